"""Contract: a maintenance process killed in the middle of a rewrite (SIGKILL of the `icepack maintain`
process and its Spark JVM, after the rewrite wrote its files and while its commit cannot land, so the
outcome is unknown to anyone) leaves the table's contents and snapshots unchanged; the next run
completes; at most that attempt's files are left, reported as young unreferenced files, bounded and
named, until orphan removal collects exactly them once they are older than the orphan age.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.spark.runner import MaintenanceRunner
from tests.engine.safety_testkit import DEADLINE_SECONDS, age_files, files_under, table_dir
from tests.factories import make_action
from tests.polling import wait_until
from tests.tables_testkit import local, make_table, table_fingerprint, table_key

pytestmark = pytest.mark.spark

ICEPACK = str(Path(sys.executable).parent / "icepack")


@contextmanager
def catalog_write_lock(database: Path) -> Iterator[None]:
    """Holds SQLite's write lock on the catalog: reads go on, no commit can land until release."""
    connection = sqlite3.connect(database, isolation_level=None, timeout=30)
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        connection.execute("ROLLBACK")
        connection.close()


def start_maintenance(settings: IcepackSettings, table: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    env |= {
        "ICEPACK_HOME": str(settings.home),
        "ICEPACK_CATALOGS": json.dumps({"lake": {"kind": "embedded"}}),
        "ICEPACK_STATE_URL": f"sqlite:///{log.parent / 'killed_state.db'}",
        "ICEPACK_SPARK__MASTER": "local[1]",
        "ICEPACK_SPARK__DRIVER_MEMORY": "512m",
    }
    with log.open("wb") as output:
        return subprocess.Popen(
            [ICEPACK, "maintain", table, "--action", "rewrite_data_files"],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the kill takes the Spark JVM with it
        )


def kill_when_files_appear(process: subprocess.Popen[bytes], data: Path, known: set[Path], log: Path) -> None:

    def written() -> set[Path]:
        assert process.poll() is None, f"maintenance ended before it wrote anything:\n{_tail(log)}"
        return files_under(data) - known

    wait_until(written, "the rewrite's first output", DEADLINE_SECONDS * 2, 0.02, detail=lambda: _tail(log))
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(DEADLINE_SECONDS)


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def test_a_maintenance_killed_mid_rewrite_changes_nothing_and_leaves_only_its_own_files(
    spark: SparkSession,
    catalogs: CatalogSet,
    settings: IcepackSettings,
    engine: Engine,
    namespace: str,
    tmp_path: Path,
) -> None:
    key = make_table(catalogs, table_key(namespace, "killed"), commits=10, partitions=2)
    q = qualified_table("lake", key)
    spark.sql(  # both partitions were just written: none is left out as hot
        f"ALTER TABLE {q} SET TBLPROPERTIES "
        "('icepack.min-input-files'='2', 'icepack.compaction.hot-minutes'='0')"
    )
    root = table_dir(catalogs, key)
    known, before = files_under(root), table_fingerprint(spark, q)
    snapshot = catalogs.get("lake").load_table(key.identifier).metadata.current_snapshot_id
    log = tmp_path / "maintain.log"

    with catalog_write_lock(settings.catalog_db_path):
        process = start_maintenance(settings, key.dotted, log)
        kill_when_files_appear(process, root / "data", known, log)

    assert process.returncode == -signal.SIGKILL
    assert catalogs.get("lake").load_table(key.identifier).metadata.current_snapshot_id == snapshot
    assert table_fingerprint(spark, q) == before
    attempt = files_under(root) - known
    leftovers = engine.unreferenced_files(key)
    assert {local(f.location) for f in leftovers.young} == attempt  # exactly that attempt's files
    written = {path for path in attempt if root / "data" in path.parents}
    assert leftovers.removable == () and 1 <= len(written) <= 2  # at most one new file per file group
    assert len(attempt - written) <= 3  # at most one uncommitted manifest, manifest list, metadata file
    assert f"{len(attempt)} unreferenced files" in leftovers.summary()

    report = engine.maintain(key, only=[MaintenanceAction.REWRITE_DATA_FILES])

    assert report.outcome == "succeeded", report.first_error
    assert (report.results[0].impact.data_files_before, report.results[0].impact.data_files_after) == (20, 2)
    assert table_fingerprint(spark, q) == before
    assert {local(f.location) for f in engine.unreferenced_files(key).young} == attempt

    age_files(root)  # days later: the attempt's files are past the orphan age, like everything else
    removal_action = make_action(MaintenanceAction.REMOVE_ORPHAN_FILES)
    [removal] = MaintenanceRunner(spark, "lake").run(key, [removal_action])
    assert removal.status == "succeeded", removal.error
    assert removal.impact.orphan_files_removed == len(attempt)
    assert not any(path.exists() for path in attempt)
    assert engine.unreferenced_files(key).young == engine.unreferenced_files(key).removable == ()
    assert table_fingerprint(spark, q) == before
