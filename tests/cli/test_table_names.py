"""Contract: every name `icepack tables` prints, in text and in --json, addresses exactly that table
when it is passed back to `status` and `maintain`: names with dots, a nested namespace next to a dotted
table name, quotes and backticks, `${...}` (which Spark would substitute), percent signs, and a namespace
named like the catalog. No two tables share a printed name, also with --all; the round trip holds on the
PostgreSQL-backed SQL catalog too. Each table holds a
different number of rows, so reading the wrong table cannot pass unnoticed; maintenance leaves every
table's contents unchanged. `policy --explain` and `--json` show the table's own Iceberg properties."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

from icepack_dagster.config.settings import load_settings
from icepack_dagster.iceberg.catalogs import open_catalog
from tests.cli.test_cli import run
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_database
from tests.tables_testkit import arrow_fingerprint

pytestmark = pytest.mark.spark

# (namespace, table) -> the name the CLI prints for it (one catalog, so no catalog prefix but for "lake")
TABLES = {
    (("refs",), "Tagged.Table-v2"): "refs.Tagged%2ETable-v2",
    (("h", "weird"), "t"): "h.weird.t",
    (("h",), "weird.t"): "h.weird%2Et",
    (("s",), "${spark.app.name}"): "s.${spark%2Eapp%2Ename}",
    (("q",), "it's `quoted`"): "q.it's `quoted`",
    (("p",), "50%off"): "p.50%25off",
    (("lake",), "t"): "lake.lake.t",
}
OWNER = {"history.expire.min-snapshots-to-keep": "30", "gc.enabled": "no"}


# On a catalog named "pg", the namespace named like the catalog is "pg"
PG_TABLES = {
    **{key: printed for key, printed in TABLES.items() if key != (("lake",), "t")},
    (("pg",), "t"): "pg.pg.t",
}


def _create_tables(catalog: Any, tables: dict[tuple[tuple[str, ...], str], str]) -> None:
    for rows, (namespace, name) in enumerate(tables, start=1):
        catalog.create_namespace_if_not_exists(namespace)
        properties = OWNER if name == "Tagged.Table-v2" else {}
        table = catalog.create_table(
            (*namespace, name), schema=pa.schema([("id", pa.int64())]), properties=properties
        )
        table.append(pa.table({"id": pa.array(range(rows), pa.int64())}))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("names_home")
    _create_tables(open_catalog("lake", load_settings(home=home)), TABLES)
    return home


@pytest.fixture(scope="module")
def pg_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A home whose only catalog, `pg`, is a PostgreSQL-backed SQL catalog in a fresh database; and the
    config file that says so."""
    home = tmp_path_factory.mktemp("pg_names_home")
    with fresh_database("icepack_names") as database:
        catalogs = {
            "pg": {
                "kind": "postgres", "host": PG_HOST, "port": PG_PORT, "database": database, "user": PG_USER,
                "warehouse": str(home / "pg_warehouse"),
            }
        }
        config = home / "icepack.yaml"
        config.write_text(yaml.safe_dump({"catalogs": catalogs}))
        _create_tables(open_catalog("pg", load_settings(home=home, catalogs=catalogs)), PG_TABLES)
        yield home, config


def _fingerprints(home: Path) -> dict[str, tuple[int, str]]:
    catalog = open_catalog("lake", load_settings(home=home))
    return {printed: arrow_fingerprint(catalog.load_table((*ns, n))) for (ns, n), printed in TABLES.items()}


def _assert_round_trip(home: Path, tables: dict[Any, str], config: Path | None = None) -> None:
    names = json.loads(run(home, "tables", "--json", config=config).stdout)
    assert sorted(names) == sorted(tables.values()) and len(set(names)) == len(names)
    assert run(home, "tables", config=config).stdout.splitlines() == names
    rows = {printed: rows for rows, printed in enumerate(tables.values(), start=1)}
    for name in names:
        status = json.loads(run(home, "status", name, "--json", config=config).stdout)
        assert (status["table"], status["total_records"]) == (name, rows[name])
        assert run(home, "status", name, config=config).stdout.startswith(f"{name}  (")
        dry_run = run(home, "maintain", name, "--dry-run", "--json", expect=None, config=config)
        dry = json.loads(dry_run.stdout)
        assert dry["table"] == name and dry["outcome"] != "table_gone", dry
    everything = json.loads(
        run(home, "maintain", "--all", "--dry-run", "--json", expect=None, config=config).stdout
    )
    assert sorted(r["table"] for r in everything) == sorted(names)


def test_every_printed_name_addresses_exactly_its_table(home: Path) -> None:
    _assert_round_trip(home, TABLES)


@pytest.mark.postgres
def test_every_printed_name_addresses_exactly_its_table_on_postgres(pg_home: tuple[Path, Path]) -> None:
    home, config = pg_home
    _assert_round_trip(home, PG_TABLES, config)


def test_policy_explains_the_tables_own_iceberg_properties(home: Path) -> None:
    name = "refs.Tagged%2ETable-v2"
    policy = json.loads(run(home, "policy", name, "--json").stdout)
    assert policy["table"] == name and policy["policy"]["snapshot_retain_last"] == 30
    layer = {p["name"]: p for p in policy["iceberg_properties"]}
    assert (layer["gc.enabled"]["value"], layer["gc.enabled"]["raw"]) == (False, "no")
    explained = run(home, "policy", name, "--explain").stdout
    assert "history.expire.min-snapshots-to-keep (Iceberg's own expiry keeps that much" in explained
    assert "commit.manifest.target-size-bytes" in explained and "Iceberg default" in explained
    recommendation = json.loads(run(home, "recommend", name, "--json").stdout)
    skipped = {s["action"]: s["reason"] for s in recommendation["skipped"]}
    assert "gc.enabled='no' on the table, which Iceberg reads as false" in skipped["remove_orphan_files"]


def test_maintain_runs_on_spark_for_names_spark_would_misread(home: Path) -> None:
    before = _fingerprints(home)
    name = "s.${spark%2Eapp%2Ename}"  # escaped dots, and a ${...} Spark would substitute
    done = run(home, "maintain", name, "--json", "--action", "remove_orphan_files", expect=None)
    report = json.loads(done.stdout)
    assert report["table"] == name and report["outcome"] == "succeeded", done.stderr[-2000:]
    assert done.returncode == 0
    assert _fingerprints(home) == before
