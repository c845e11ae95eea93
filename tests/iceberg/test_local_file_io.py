"""Contract: the FileIO icepack gives PyIceberg for local warehouses reads a `file:` location's path
literally, as Iceberg's Java side writes it (`#`, `?` and `%` are part of the path), and leaves every
other location to PyArrowFileIO; the catalog properties name it so PyIceberg really loads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import PyArrowFileIO

from icepack_dagster.config.catalogs import pyiceberg_properties
from icepack_dagster.config.settings import load_settings
from icepack_dagster.iceberg.local_file_io import LiteralLocalFileIO


@pytest.mark.parametrize(
    ("location", "path"),
    [
        ("file:///home/ice#pack?v=1/t/m.json", "/home/ice#pack?v=1/t/m.json"),
        ("file:/home/ice pack%41/t/m.json", "/home/ice pack%41/t/m.json"),  # Hadoop's short form
        ("FILE:///a/b", "/a/b"),
    ],
)
def test_file_locations_are_literal_paths(location: str, path: str) -> None:
    assert LiteralLocalFileIO.parse_location(location) == ("file", "", path)


@pytest.mark.parametrize("location", ["s3://bucket/a#b/key", "file://host/share/x", "/plain/path"])
def test_other_locations_are_parsed_as_pyarrow_does(location: str) -> None:
    assert LiteralLocalFileIO.parse_location(location) == PyArrowFileIO.parse_location(location)


def test_local_warehouses_load_it_and_object_stores_do_not(tmp_path: Path) -> None:
    settings = load_settings(
        home=tmp_path,
        catalogs={
            "lake": {"kind": "embedded"},
            "pg": {"kind": "postgres", "host": "h", "database": "d", "user": "u", "warehouse": "/w"},
            "s3": {"kind": "postgres", "host": "h", "database": "d", "user": "u", "warehouse": "s3://b/w"},
        },
    )
    loaded = {
        name: type(load_file_io(pyiceberg_properties(name, settings.catalogs[name], settings)))
        for name in ("lake", "pg", "s3")
    }
    assert loaded["lake"] is LiteralLocalFileIO and loaded["pg"] is LiteralLocalFileIO
    assert loaded["s3"] is not LiteralLocalFileIO
