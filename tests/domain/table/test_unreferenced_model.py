"""Contract: unreferenced files are matched to referenced locations the way Iceberg's orphan removal
matches them (`/p`, `file:/p` and `file:///p` are one file, `s3a://` and `s3://` are one scheme, another
authority is another file) and split by the orphan age: younger files are kept as possibly in flight,
older ones are what orphan removal deletes next. The files a removal with a given `older_than` deletes
are predicted from a listing, and counted gone from a listing after it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from icepack_dagster.domain.table.unreferenced_files import (
    UnreferencedFile,
    classify_unreferenced,
    file_identity,
    removable_before,
    removed_since,
)

NOW = datetime(2025, 6, 1, 12, tzinfo=UTC)


def listed(location: str, hours_old: float, size: int = 10) -> UnreferencedFile:
    return UnreferencedFile(location=location, size_bytes=size, modified_at=NOW - timedelta(hours=hours_old))


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        ("/w/t/data/a.parquet", "file:/w/t/data/a.parquet", True),
        ("file:///w/t/data/a.parquet", "file:/w/t/data/a.parquet", True),
        ("s3a://bucket/t/a.parquet", "s3://bucket/t/a.parquet", True),
        ("s3://bucket/t/a.parquet", "s3://other/t/a.parquet", False),
        ("file://otherhost/w/t/a.parquet", "file:/w/t/a.parquet", False),
        ("/w/t/data/p%3D1/a.parquet", "/w/t/data/p=1/a.parquet", True),
        ("file:///w#1/t/a.parquet", "/w#1/t/a.parquet", True),  # `#` and `?` are part of the path
        ("file:///w#1/t/a.parquet", "file:///w#2/t/a.parquet", False),
        ("file:///w?v=1/t/a.parquet", "file:///w?v=2/t/a.parquet", False),
    ],
)
def test_locations_are_one_file_exactly_when_orphan_removal_says_so(one: str, other: str, same: bool) -> None:
    assert (file_identity(one) == file_identity(other)) is same


def test_unreferenced_files_are_split_by_the_orphan_age() -> None:
    files = [
        listed("/w/t/data/live.parquet", 200),
        listed("/w/t/data/in-flight.parquet", 1, size=7),
        listed("/w/t/data/old-orphan.parquet", 80, size=5),
        listed("/w/t/metadata/v1.metadata.json", 300),
    ]
    referenced = ["file:/w/t/data/live.parquet", "file:///w/t/metadata/v1.metadata.json"]

    result = classify_unreferenced("lake.ns.t", "file:/w/t", files, referenced, NOW, 72)

    assert [f.location for f in result.young] == ["/w/t/data/in-flight.parquet"]
    assert [f.location for f in result.removable] == ["/w/t/data/old-orphan.parquet"]
    assert (result.young_bytes, result.removable_bytes) == (7, 5)
    assert result.summary().startswith("table lake.ns.t: 1 unreferenced files (7 bytes) newer than 72 h")


def test_the_files_a_removal_deletes_are_predicted_and_counted_gone_by_identity() -> None:
    older_than = NOW - timedelta(hours=48)
    files = [
        listed("/w/t/data/old.parquet", 72),
        listed("/w/t/data/also-old.parquet", 50),
        listed("/w/t/data/young.parquet", 30),  # younger than older_than: kept
        listed("/w/t/data/kept.parquet", 96),  # referenced
    ]
    predicted = removable_before(files, ["file:/w/t/data/kept.parquet"], older_than)

    assert predicted == {file_identity("/w/t/data/old.parquet"), file_identity("/w/t/data/also-old.parquet")}
    after = [listed("file:///w/t/data/also-old.parquet", 50), files[2], files[3], listed("/w/t/new", 0)]
    assert removed_since(predicted, after) == 1  # `file:///p` after is `/p` before: still there
    assert removed_since(predicted, []) == 2
