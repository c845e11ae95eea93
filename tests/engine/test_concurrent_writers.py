"""Contract: compaction is safe next to other writers, on real tables, with the other writer committing
exactly between the rewrite's planning and its commit (Spark's task slots are held meanwhile).

An append lands and the rewrite commits on top of it: both commits land, no row is lost. A row-level
delete (position delete files) on the files being rewritten makes the rewrite stop cleanly: its status
is `conflict` (not a failure), it commits nothing, leaves no files behind, and no deleted row comes back; the
next run compacts with the deletes applied. Under partial progress a file group that fails (a
conflicting commit, or a group that cannot be written) fails the action with an honest report, where
Iceberg on its own would report success: the groups that committed are counted in the impact, the
table is consistent, nothing is left behind.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions.maintenance_action import ActionResult, MaintenanceAction
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.status_reader import collect_status
from icepack_dagster.spark.runner import MaintenanceRunner
from tests.engine.safety_testkit import (
    MOR_V2,
    StalledTaskSlots,
    commit_position_deletes,
    files_under,
    finished,
    locate_rows,
    referenced_files,
    run_in_thread,
    snapshot_rows,
    table_dir,
)
from tests.factories import make_action
from tests.tables_testkit import append_rows, make_table, table_fingerprint, table_key

pytestmark = pytest.mark.spark

REWRITE = MaintenanceAction.REWRITE_DATA_FILES
PARTIAL = {"partial-progress.enabled": "true", "partial-progress.max-commits": "10"}


def reader(catalogs: CatalogSet, key: TableKey) -> Callable[[], TableStatus]:
    return lambda: collect_status(catalogs.get("lake"), key, HealthThresholds(), datetime.now(UTC))


def rewrite_while(
    spark: SparkSession,
    catalogs: CatalogSet,
    key: TableKey,
    flag: Path,
    other_writer: Callable[[], object],
    **options: str,
) -> tuple[ActionResult, object]:
    """Runs compaction; `other_writer` runs after it planned and before it may write or commit."""
    compaction = make_action(REWRITE, **{"min-input-files": "2", **options})
    runner = MaintenanceRunner(spark, "lake")
    with StalledTaskSlots(spark, flag) as stall:
        thread, outcome = run_in_thread(
            lambda: runner.run(key, [compaction], status_before=reader(catalogs, key))
        )
        stall.wait_for_other_job()
        written = other_writer()
        stall.release()
        [result] = finished(thread, outcome)
    return result, written


def assert_nothing_left_behind(spark: SparkSession, catalogs: CatalogSet, key: TableKey) -> None:
    data = table_dir(catalogs, key) / "data"
    assert files_under(data) == {p for p in referenced_files(spark, catalogs, key) if data in p.parents}


def test_compaction_and_a_concurrent_append_both_land(
    spark: SparkSession, catalogs: CatalogSet, namespace: str, tmp_path: Path
) -> None:
    key = make_table(catalogs, table_key(namespace, "busy"), commits=4)
    q = qualified_table("lake", key)
    before = table_fingerprint(spark, q)

    def append() -> int:
        append_rows(catalogs, key, 1000, 1010)
        return catalogs.get("lake").load_table(key.identifier).metadata.current_snapshot_id

    result, appended = rewrite_while(spark, catalogs, key, tmp_path / "release", append)

    assert result.status == "succeeded", result.error
    assert result.impact.procedure_output["rewritten_data_files_count"] == 4
    [replace] = [r for r in snapshot_rows(spark, key) if r.operation == "replace"]
    assert replace.parent_id == appended  # the rewrite committed on top of the concurrent append
    assert table_fingerprint(spark, q) == table_fingerprint(spark, f"{q} VERSION AS OF {appended}")
    assert table_fingerprint(spark, q)[0] == before[0] + 10
    assert (result.impact.data_files_before, result.impact.data_files_after) == (4, 2)
    assert_nothing_left_behind(spark, catalogs, key)


def test_a_concurrent_row_level_delete_fails_the_rewrite_and_no_row_comes_back(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    key = make_table(catalogs, table_key(namespace, "deleted_meanwhile"), commits=4, properties=MOR_V2)
    q = qualified_table("lake", key)
    doomed = locate_rows(spark, key, [3, 15, 27])

    result, deleted = rewrite_while(
        spark, catalogs, key, tmp_path / "release", lambda: commit_position_deletes(spark, key, doomed)
    )

    assert result.status == "conflict" and result.error is None  # no failure: another writer won
    assert "concurrent commit" in (result.reason or "") and "committed nothing" in (result.reason or "")
    assert "position delete" in (result.reason or "")  # Iceberg's validation, named
    assert catalogs.get("lake").load_table(key.identifier).metadata.current_snapshot_id == deleted
    assert spark.sql(f"SELECT count(*) FROM {q} WHERE id IN (3, 15, 27)").first()[0] == 0
    assert table_fingerprint(spark, q) == (37, table_fingerprint(spark, f"{q} VERSION AS OF {deleted}")[1])
    assert_nothing_left_behind(spark, catalogs, key)
    assert engine.unreferenced_files(key).young == ()

    after_conflict = table_fingerprint(spark, q)
    [again] = MaintenanceRunner(spark, "lake").run(
        key, [make_action(REWRITE, **{"min-input-files": "2", "delete-file-threshold": "1"})]
    )
    assert again.status == "succeeded", again.error
    assert table_fingerprint(spark, q) == after_conflict
    assert spark.sql(f"SELECT count(*) FROM {q}.files WHERE content = 0").first()[0] == 1


def test_partial_progress_with_a_conflicting_group_reports_what_it_committed(
    spark: SparkSession, catalogs: CatalogSet, namespace: str, tmp_path: Path
) -> None:
    key = make_table(
        catalogs, table_key(namespace, "partial_conflict"), commits=3, partitions=2, properties=MOR_V2
    )
    q = qualified_table("lake", key)
    doomed = locate_rows(spark, key, [1, 3])  # both in partition p=1

    result, deleted = rewrite_while(
        spark,
        catalogs,
        key,
        tmp_path / "release",
        lambda: commit_position_deletes(spark, key, doomed),
        **PARTIAL,
    )

    assert "'partial-progress.max-failed-commits', '0'" in result.statements[-1]
    assert result.status == "failed"
    assert "1 rewrite commits failed" in (result.error or "") and "partial progress" in (result.error or "")
    # honest: partition p=0 was compacted and committed, p=1 was left as it was
    assert (result.impact.data_files_before, result.impact.data_files_after) == (6, 4)
    files_by_partition = dict(spark.sql(f"SELECT partition.p, count(*) FROM {q}.files GROUP BY 1").collect())
    assert files_by_partition == {0: 1, 1: 4}  # three data files and the delete file
    assert spark.sql(f"SELECT count(*) FROM {q} WHERE id IN (1, 3)").first()[0] == 0
    assert table_fingerprint(spark, q) == table_fingerprint(spark, f"{q} VERSION AS OF {deleted}")
    assert_nothing_left_behind(spark, catalogs, key)


def test_partial_progress_with_a_group_that_cannot_be_written_reports_it(
    spark: SparkSession, catalogs: CatalogSet, namespace: str, tmp_path: Path
) -> None:
    key = make_table(catalogs, table_key(namespace, "partial_unwritable"), commits=3, partitions=2)
    q = qualified_table("lake", key)
    before = table_fingerprint(spark, q)
    victim = sorted(files_under(table_dir(catalogs, key) / "data" / "p=1"))[0]
    hidden = tmp_path / victim.name

    def storage_hiccup() -> None:  # one file of partition p=1 is unreadable while the rewrite runs
        shutil.move(victim, hidden)

    try:
        result, _ = rewrite_while(spark, catalogs, key, tmp_path / "release", storage_hiccup, **PARTIAL)
    finally:
        shutil.move(hidden, victim)

    assert result.status == "failed"
    assert "1 rewrite commits failed" in (result.error or "") and "partial progress" in (result.error or "")
    assert (result.impact.data_files_before, result.impact.data_files_after) == (6, 4)
    assert table_fingerprint(spark, q) == before
    assert_nothing_left_behind(spark, catalogs, key)
