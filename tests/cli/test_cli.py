"""Contract: the newcomer's path works end to end through the real `icepack` command, in its own process,
on a fresh embedded lakehouse: `demo` builds the tables, `tables/status/health/recommend/policy` answer
with the JSON contract, `maintain --dry-run` changes nothing, and `maintain` cuts the small-files
table's live data files at least tenfold with identical contents, as predicted (`accuracy` says so).
Exit codes tell done, nothing to do, failed and a table that is gone apart; bad input is a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from icepack_dagster.config.settings import load_settings
from icepack_dagster.iceberg.catalogs import open_catalog
from icepack_dagster.spark.demo_lakehouse import ORPHAN_FILES, ORPHAN_PREFIX
from tests.tables_testkit import arrow_fingerprint

ICEPACK = str(Path(sys.executable).parent / "icepack")

pytestmark = pytest.mark.spark  # the command runs Spark in its own process


def run(
    home: Path, *args: str, expect: int | None = 0, config: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`icepack ARGS` in its own process on `home`; with `config`, that file is its ICEPACK_CONFIG."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    env |= {
        "ICEPACK_HOME": str(home),
        "ICEPACK_SPARK__MASTER": "local[2]",
        "ICEPACK_SPARK__DRIVER_MEMORY": "1g",
    }
    if config is not None:
        env["ICEPACK_CONFIG"] = str(config)
    done = subprocess.run([ICEPACK, *args], env=env, capture_output=True, text=True, timeout=600)
    if expect is not None:
        assert done.returncode == expect, (
            f"icepack {' '.join(args)} -> {done.returncode}\n{done.stderr[-3000:]}"
        )
    return done


@pytest.fixture(scope="module")
def lakehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cli_home")
    created = json.loads(run(home, "demo", "--json").stdout)
    assert "demo.events_small_files" in created
    return home


def _pyiceberg_table(home: Path, name: str):  # type: ignore[no-untyped-def]
    settings = load_settings(home=home)
    return open_catalog("lake", settings).load_table(tuple(name.split(".")))


def test_read_commands_follow_the_json_contract(lakehouse: Path) -> None:
    names = json.loads(run(lakehouse, "tables", "--json").stdout)
    assert "demo.events_small_files" in names and "demo.dim_healthy" in names
    status = json.loads(run(lakehouse, "status", "demo.events_small_files", "--json").stdout)
    for field in (
        "table",
        "snapshot_id",
        "live_data_files",
        "live_delete_files",
        "live_data_bytes",
        "total_records",
        "small_file_count",
        "manifest_count",
        "snapshot_count",
        "oldest_snapshot_age_seconds",
    ):
        assert field in status, field
    assert status["table"] == "demo.events_small_files"
    assert status["small_file_count"] == status["live_data_files"] >= 40
    health = json.loads(run(lakehouse, "health", "demo.events_small_files", "--json").stdout)
    assert health["state"] in ("warning", "critical")
    assert any(i["code"] == "SMALL_FILES" for i in health["issues"])
    for issue in health["issues"]:
        assert set(issue) >= {"code", "severity", "metric", "value", "threshold", "message"}
    healthy = json.loads(run(lakehouse, "health", "demo.dim_healthy", "--json").stdout)
    assert healthy["state"] == "healthy"
    recommendation = json.loads(run(lakehouse, "recommend", "demo.events_small_files", "--json").stdout)
    assert recommendation["actions"][0]["action"] == "rewrite_data_files"
    for entry in recommendation["actions"]:
        assert set(entry) >= {"action", "reason", "priority", "options"}
    assert all(set(s) >= {"action", "reason"} for s in recommendation["skipped"])
    explained = run(lakehouse, "policy", "demo.events_small_files", "--explain").stdout
    assert "cadence_hours" in explained and "default" in explained


def test_unreferenced_lists_the_planted_orphans_and_nothing_referenced(lakehouse: Path) -> None:
    table = "demo.logs_with_orphans"
    found = json.loads(run(lakehouse, "unreferenced", table, "--json").stdout)
    assert found["table"] == table and found["young"] == []
    names = sorted(Path(f["location"].removeprefix("file:")).name for f in found["removable"])
    assert names == [f"{ORPHAN_PREFIX}{i}.parquet" for i in range(ORPHAN_FILES)]
    referenced = {Path(t.file.file_path.removeprefix("file:")).name
                  for t in _pyiceberg_table(lakehouse, table).scan().plan_files()}
    assert referenced and not referenced & set(names)
    text = run(lakehouse, "unreferenced", table).stdout
    assert text.startswith(f"{table}: 0 unreferenced files") and f"{ORPHAN_PREFIX}0.parquet" in text


def test_dry_run_then_maintain_compacts_tenfold_with_identical_contents(lakehouse: Path) -> None:
    table = "demo.events_small_files"
    before = _pyiceberg_table(lakehouse, table)
    fingerprint = arrow_fingerprint(before)
    files_before = json.loads(run(lakehouse, "status", table, "--json").stdout)["live_data_files"]

    dry = json.loads(run(lakehouse, "maintain", table, "--dry-run", "--json").stdout)
    assert {r["status"] for r in dry["results"]} <= {"dry_run", "skipped"}
    assert any(r["status"] == "dry_run" and r["statements"] for r in dry["results"])
    assert (
        _pyiceberg_table(lakehouse, table).current_snapshot().snapshot_id
        == before.current_snapshot().snapshot_id
    )

    done = json.loads(run(lakehouse, "maintain", table, "--json").stdout)
    assert done["table"] == table
    by_action = {r["action"]: r for r in done["results"]}
    assert by_action["rewrite_data_files"]["status"] == "succeeded"
    assert set(by_action["rewrite_data_files"]) >= {"action", "status", "impact", "duration_seconds"}
    files_after = json.loads(run(lakehouse, "status", table, "--json").stdout)["live_data_files"]
    assert files_after * 10 <= files_before, (files_before, files_after)
    assert arrow_fingerprint(_pyiceberg_table(lakehouse, table)) == fingerprint
    judged = by_action["rewrite_data_files"]["predicted_actual"]
    assert judged["planned"]["files_in"] == judged["done"]["files_in"] == files_before
    accuracy = json.loads(run(lakehouse, "accuracy", "--json").stdout)
    [rewrite] = [row for row in accuracy if row["action"] == "rewrite_data_files"]
    planned_done = (rewrite["runs"], rewrite["planned_files_in"], rewrite["done_files_in"])
    assert planned_done == (1, files_before, files_before)

    # Right after maintenance the cadence has not elapsed: nothing to do, exit code 3.
    again = run(lakehouse, "maintain", table, "--json", expect=3)
    assert {r["status"] for r in json.loads(again.stdout)["results"]} <= {"skipped"}


def test_bad_input_is_a_clear_error(lakehouse: Path) -> None:
    missing = run(lakehouse, "status", "demo.no_such_table", expect=1)
    assert "demo.no_such_table" in missing.stderr and "Traceback" not in missing.stderr
    malformed = run(lakehouse, "status", "no_namespace", expect=2)  # an ill-formed name is bad usage
    assert "namespace.table" in malformed.stderr
    ill_formed = run(lakehouse, "maintain", "foo", expect=2)
    assert "'foo' is not a table identifier" in ill_formed.stderr and "Traceback" not in ill_formed.stderr
    usage = run(lakehouse, "maintain", expect=2)
    assert "TABLE" in usage.stderr


def test_maintaining_a_table_that_is_gone_says_so_and_exits_4(lakehouse: Path) -> None:
    gone = run(lakehouse, "maintain", "demo.no_such_table", "--json", expect=4)
    assert json.loads(gone.stdout)["outcome"] == "table_gone"
    human = run(lakehouse, "maintain", "demo.no_such_table", expect=4)
    assert human.stdout.startswith("demo.no_such_table: table gone") and "Traceback" not in human.stderr
    history = json.loads(run(lakehouse, "quarantine", "show", "demo.no_such_table", "--json").stdout)
    assert history["consecutive_failures"] == 0 and history["last_run_at"] is None
    assert "demo.no_such_table" in history["circuit_breakers"]["not read"]  # the breakers need its status
    present = json.loads(run(lakehouse, "quarantine", "show", "demo.events_small_files", "--json").stdout)
    assert present["circuit_breakers"] == {}
