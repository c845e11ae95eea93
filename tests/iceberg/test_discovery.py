"""Contract: `discover_tables` finds every table of every configured catalog (embedded SQLite and
PostgreSQL), through nested namespaces, keeps those some include pattern and no exclude pattern matches
(as `catalog.ns.table` or `ns.table`), and returns them sorted. A catalog that cannot be opened or a
namespace that cannot be listed is reported in `failures` (the result is then not `complete`), never
raised and never silently dropped; everything else is still listed.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pyarrow as pa
import pytest

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.discovery import DiscoveryResult, NamespaceFailure, discover_tables
from tests.network import free_port

SCHEMA = pa.schema([("x", pa.int64())])
TABLES = [("top",), ("inner", "mid"), ("inner", "deep", "low"), ("inner", "deep", "low_tmp")]


@pytest.fixture
def nested(catalogs: CatalogSet, namespace: str) -> str:
    """In both shared catalogs: `ns.top`, `ns.inner.mid`, `ns.inner.deep.low`, `ns.inner.deep.low_tmp`.
    `ns.inner.deep` is created directly, so `ns.inner` exists only as its parent."""
    for name in ("lake", "pg"):
        catalog = catalogs.get(name)
        catalog.create_namespace_if_not_exists((namespace,))
        catalog.create_namespace_if_not_exists((namespace, "inner", "deep"))
        for *levels, table in TABLES:
            catalog.create_table((namespace, *levels, table), schema=SCHEMA)
    return namespace


def _key(catalog: str, *parts: str) -> TableKey:
    return TableKey(catalog=catalog, namespace=tuple(parts[:-1]), name=parts[-1])


def _mine(catalog: str, namespace: str) -> list[TableKey]:
    return [_key(catalog, namespace, *parts) for parts in TABLES]


def test_walks_nested_namespaces_in_every_catalog(catalogs: CatalogSet, nested: str) -> None:
    result = discover_tables(catalogs, include=[f"{nested}.*"], exclude=[])

    expected = _mine("lake", nested) + _mine("pg", nested)
    assert result.tables == tuple(sorted(expected, key=lambda k: (k.catalog, k.namespace, k.name)))
    assert result.complete and result.failures == ()


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        (["lake.{ns}.*"], ["*_tmp"], ["lake top", "lake inner.mid", "lake inner.deep.low"]),
        (["{ns}.inner.*"], ["pg.*"], ["lake inner.mid", "lake inner.deep.low", "lake inner.deep.low_tmp"]),
        (["pg.{ns}.top", "{ns}.inner.deep.low"], [], ["lake inner.deep.low", "pg top", "pg inner.deep.low"]),
        (["{ns}.*"], ["{ns}.*"], []),
        ([], [], []),
    ],
)
def test_include_and_exclude_patterns(
    catalogs: CatalogSet, nested: str, include: list[str], exclude: list[str], expected: list[str]
) -> None:
    include = [p.format(ns=nested) for p in include]
    result = discover_tables(catalogs, include=include, exclude=[p.format(ns=nested) for p in exclude])

    wanted = {_key(catalog, nested, *parts.split(".")) for catalog, parts in map(str.split, expected)}
    assert set(result.tables) == wanted and len(result.tables) == len(wanted)
    assert list(result.tables) == sorted(result.tables, key=lambda k: (k.catalog, k.namespace, k.name))


def _solo_settings(settings: IcepackSettings, home: Path, **extra: object) -> IcepackSettings:
    """A private embedded catalog `solo` (plus `extra` catalogs); `settings` has cleared ICEPACK_* vars."""
    return load_settings(home=home, catalogs={"solo": {"kind": "embedded"}, **extra})


def test_unreachable_catalog_is_reported_and_the_others_still_listed(
    settings: IcepackSettings, tmp_path: Path
) -> None:
    bad = {
        "kind": "postgres", "host": "127.0.0.1", "port": free_port(), "database": "nowhere",
        "user": "nobody", "warehouse": str(tmp_path / "bad_warehouse"),
    }
    catalogs = CatalogSet(_solo_settings(settings, tmp_path, bad=bad))
    catalogs.get("solo").create_namespace("ns")
    catalogs.get("solo").create_table(("ns", "kept"), schema=SCHEMA)

    started = time.monotonic()
    result = discover_tables(catalogs, include=["*"], exclude=[])

    assert time.monotonic() - started < 30
    assert result.tables == (_key("solo", "ns", "kept"),)
    assert not result.complete
    [failure] = result.failures
    assert (failure.catalog, failure.namespace) == ("bad", ())
    assert "CatalogUnavailableError" in failure.error and "'bad'" in failure.error


def test_namespace_that_cannot_be_listed_is_reported_and_its_siblings_kept(
    settings: IcepackSettings, tmp_path: Path
) -> None:
    catalogs = CatalogSet(_solo_settings(settings, tmp_path))
    catalog = catalogs.get("solo")
    for levels in [("open",), ("locked",), ("locked", "below")]:
        catalog.create_namespace(levels)
        catalog.create_table((*levels, "t"), schema=SCHEMA)
    # Fault injection in the real catalog database: any read of a table row in namespace 'locked'
    # (or below it) now fails inside SQLite, the way a permission error fails one namespace of a REST catalog.
    with sqlite3.connect(tmp_path / "catalog.db") as db:
        db.executescript(
            """
            ALTER TABLE iceberg_tables RENAME TO iceberg_tables_stored;
            CREATE VIEW iceberg_tables AS SELECT catalog_name, table_namespace,
                CASE WHEN table_namespace LIKE 'locked%' THEN json('refused') ELSE table_name END
                    AS table_name,
                metadata_location, previous_metadata_location, iceberg_type
            FROM iceberg_tables_stored;
            """
        )

    result = discover_tables(catalogs, include=["*"], exclude=[])

    assert result.tables == (_key("solo", "open", "t"),)
    assert result.failures == (
        NamespaceFailure(catalog="solo", namespace=("locked",), error=result.failures[0].error),
    )
    assert "malformed JSON" in result.failures[0].error and not result.complete


def test_result_model_is_frozen_and_strict() -> None:
    result = DiscoveryResult(tables=(_key("c", "n", "t"),))
    assert result.complete
    with pytest.raises(ValueError, match="extra"):
        DiscoveryResult(tables=(), unknown=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="frozen"):
        result.tables = ()  # type: ignore[misc]
