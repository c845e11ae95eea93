"""Contract: the maintenance runner does, on real Spark and real Iceberg tables, what each action
promises and nothing else. Rewrites compact data files, delete files and manifests; expiry keeps
retain_last and every branch and tag head; orphan removal deletes only unreferenced files older than
its threshold. Table contents never change. A dry run, a refused guard, a rejected override and a
failing action touch nothing beyond what already ran; later actions are skipped; overrides stay in the
table's own session; hostile table names are addressed exactly; a missing table is a clean error."""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.recommendation.model import RecommendedAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.exceptions import TableNotFoundError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.status_reader import collect_status
from icepack_dagster.spark.progress import reported_progress
from icepack_dagster.spark.runner import MaintenanceRunner
from tests.factories import make_action
from tests.polling import wait_until
from tests.tables_testkit import local, make_table, table_fingerprint, table_key

pytestmark = pytest.mark.spark

A = MaintenanceAction
MOR = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
    "write.delete.granularity": "partition",
}
FIVE_DAYS_AGO = time.time() - 5 * 24 * 3600
TWELVE_HOURS_AGO = (datetime.now(UTC) - timedelta(hours=12)).isoformat()  # under 24 h all suite long
PROGRESS = re.compile(
    r"Spark application (?P<app>\S+): jobs (?P<jobs_done>\d+)/(?P<jobs>\d+) done, "
    r"stages (?P<stages_done>\d+)/(?P<stages>\d+)(?: \(\d+ skipped\))?, "
    r"tasks (?P<tasks_done>\d+)/(?P<tasks>\d+)"
)



def status_reader(catalogs: CatalogSet, key: TableKey) -> Callable[[], TableStatus]:
    return lambda: collect_status(catalogs.get("lake"), key, HealthThresholds(), datetime.now(UTC))


def snapshot_ids(spark: SparkSession, key: TableKey) -> set[int]:
    rows = spark.sql(f"SELECT snapshot_id FROM {qualified_table('lake', key)}.snapshots").collect()
    return {r[0] for r in rows}


def live_files(spark: SparkSession, key: TableKey, content: int = 0) -> list[str]:
    rows = spark.sql(f"SELECT file_path FROM {qualified_table('lake', key)}.files WHERE content = {content}")
    return [r[0] for r in rows.collect()]


def test_rewrite_data_files_compacts_in_a_session_of_its_own(spark, catalogs: CatalogSet, namespace) -> None:
    key = make_table(catalogs, table_key(namespace, "small_files"), commits=6)
    qualified = qualified_table("lake", key)
    before = table_fingerprint(spark, qualified)
    shuffle_partitions = spark.conf.get("spark.sql.shuffle.partitions")

    [result] = MaintenanceRunner(spark, "lake").run(
        key,
        [make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2"})],
        {"icepack.spark.sql.shuffle.partitions": "3"},
        status_before=status_reader(catalogs, key),
    )

    assert result.status == "succeeded", result.error
    assert "SET spark.sql.shuffle.partitions=3" in result.statements
    assert result.statements[-1].startswith("CALL lake.system.rewrite_data_files(")
    assert result.impact.procedure_output["rewritten_data_files_count"] == 6
    assert (result.impact.data_files_before, result.impact.data_files_after) == (6, 1)
    assert len(live_files(spark, key)) == 1
    assert table_fingerprint(spark, qualified) == before
    assert spark.conf.get("spark.sql.shuffle.partitions") == shuffle_partitions  # the override did not leak


def test_the_status_planned_on_stands_for_the_first_read(spark, catalogs: CatalogSet, namespace) -> None:
    """The caller's status (read under the lease, the one the actions were planned on) is the first
    action's "before"; the runner reads the table once after each action, not again before the first."""
    key = make_table(catalogs, table_key(namespace, "planned_on"), commits=5)
    before = table_fingerprint(spark, qualified_table("lake", key))
    read = status_reader(catalogs, key)
    planned_on = read()
    reads: list[TableStatus] = []

    def counted() -> TableStatus:
        reads.append(read())
        return reads[-1]

    compaction, manifests = make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2"}), make_action(
        A.REWRITE_MANIFESTS
    )
    results = MaintenanceRunner(spark, "lake").run(
        key, [compaction, manifests], status_before=counted, status_planned_on=planned_on
    )

    assert [r.status for r in results] == ["succeeded", "succeeded"], [r.error for r in results]
    assert len(reads) == 2  # after each action; the state before the first was known
    assert results[0].impact.data_files_before == planned_on.live_data_files == 5
    assert results[0].impact.data_files_after == reads[0].live_data_files == 1
    assert results[1].impact.data_files_before == reads[0].live_data_files
    assert table_fingerprint(spark, qualified_table("lake", key)) == before


def test_spark_progress_is_reported_while_an_action_runs(spark, catalogs: CatalogSet, namespace) -> None:
    """The watching thread says the action runs, then reports Spark's jobs, stages and tasks while the
    procedure runs; the line telling the result ends with Spark's progress at the end, every task done;
    every progress line names the application."""
    key = make_table(catalogs, table_key(namespace, "watched"), commits=10)
    qualified = qualified_table("lake", key)
    before = table_fingerprint(spark, qualified)
    lines: list[tuple[str, str]] = []

    [result] = MaintenanceRunner(spark, "lake", progress_interval_seconds=0.1).run(
        key,
        [make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2"})],
        status_before=status_reader(catalogs, key),
        on_progress=lambda line: lines.append((threading.current_thread().name, line)),
    )

    assert result.status == "succeeded", result.error
    watched = [line for thread, line in lines if thread.startswith("spark-progress-")]
    assert watched[0] == f"table {key.text}: running rewrite_data_files", lines  # the first poll says so
    progress = [PROGRESS.fullmatch(line) for line in watched[1:]]
    assert progress and all(progress), lines
    last_thread, last_line = lines[-1]
    assert not last_thread.startswith("spark-progress-"), lines
    assert last_line.startswith(f"table {key.text}: rewrite_data_files succeeded in "), lines
    final = PROGRESS.search(last_line)
    assert final is not None, lines
    assert {match["app"] for match in [*progress, final]} == {spark.sparkContext.applicationId}
    assert int(final["tasks"]) > 0 and final["tasks_done"] == final["tasks"], lines
    assert final["jobs_done"] == final["jobs"] and final["stages_done"] == final["stages"], lines
    assert not set(spark.sparkContext.getJobTags())  # the action's tag left with it
    assert table_fingerprint(spark, qualified) == before


def test_an_action_ended_before_the_first_poll_is_told_in_its_result_line_only(spark) -> None:
    """No line says that an action runs when it ended before the first poll (a second by default):
    its result line tells it all, so a quick action costs the run's log one line, not three. Spark's
    progress at the end is handed back for that line. An action that raised before the first poll gets
    no result line, so the line saying it ran is reported then."""
    lines: list[str] = []
    with reported_progress(spark, "quick", "table t: running quick", lines.append) as nothing_ran:
        pass
    with reported_progress(spark, "slow", "table t: running slow", lines.append, interval=0.1) as slow:
        spark.range(0, 1000, 1, 2).count()
        wait_until(lambda: "table t: running slow" in lines, "the first poll (0.1 s)", 60, 0.05)

    with pytest.raises(RuntimeError), reported_progress(spark, "boom", "table t: running boom", lines.append):
        raise RuntimeError("the action broke before the first poll")  # no result line will follow

    assert nothing_ran.summary is None  # no Spark job ran in the block
    assert lines[-1] == "table t: running boom", lines  # so the log still names what was running
    assert lines[0] == "table t: running slow" and "table t: running quick" not in lines, lines
    assert slow.summary is not None, lines
    done = PROGRESS.fullmatch(slow.summary)
    assert done and done["jobs_done"] == done["jobs"] != "0" and done["tasks_done"] == done["tasks"], slow


def test_rewrite_position_delete_files_merges_delete_files(spark, catalogs: CatalogSet, namespace) -> None:
    key = make_table(catalogs, table_key(namespace, "with_deletes"), commits=2, properties=MOR)
    qualified = qualified_table("lake", key)
    for doomed in (0, 1, 10):
        spark.sql(f"DELETE FROM {qualified} WHERE id = {doomed}")
    assert len(live_files(spark, key, content=1)) == 3
    before = table_fingerprint(spark, qualified)

    [result] = MaintenanceRunner(spark, "lake").run(
        key, [make_action(A.REWRITE_POSITION_DELETE_FILES, **{"rewrite-all": "true"})], {},
        status_before=status_reader(catalogs, key),
    )

    assert result.status == "succeeded", result.error
    assert result.impact.procedure_output["rewritten_delete_files_count"] == 3
    assert (result.impact.delete_files_before, result.impact.delete_files_after) == (3, 1)
    assert table_fingerprint(spark, qualified) == before == (17, before[1])


def test_rewrite_manifests_merges_manifests(spark, catalogs: CatalogSet, namespace: str) -> None:
    key = make_table(catalogs, table_key(namespace, "many_manifests"), commits=5)
    qualified = qualified_table("lake", key)
    before = table_fingerprint(spark, qualified)

    [result] = MaintenanceRunner(spark, "lake").run(
        key, [make_action(A.REWRITE_MANIFESTS)], {}, status_before=status_reader(catalogs, key)
    )

    assert result.status == "succeeded", result.error
    assert result.impact.procedure_output == {"rewritten_manifests_count": 5, "added_manifests_count": 1}
    assert (result.impact.manifests_before, result.impact.manifests_after) == (5, 1)
    assert table_fingerprint(spark, qualified) == before


def test_expire_snapshots_keeps_retain_last_and_every_ref_head(
    spark, catalogs: CatalogSet, namespace: str
) -> None:
    key = make_table(catalogs, table_key(namespace, "backlog"), commits=6)
    qualified = qualified_table("lake", key)
    rows = spark.sql(f"SELECT snapshot_id FROM {qualified}.history ORDER BY made_current_at").collect()
    history = [r[0] for r in rows]
    spark.sql(f"ALTER TABLE {qualified} CREATE TAG keep_tag AS OF VERSION {history[1]}")
    spark.sql(f"ALTER TABLE {qualified} CREATE BRANCH audit AS OF VERSION {history[2]}")
    before = table_fingerprint(spark, qualified)
    tagged = spark.sql(f"SELECT count(*) FROM {qualified} VERSION AS OF 'keep_tag'").collect()[0][0]
    future = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()

    [result] = MaintenanceRunner(spark, "lake").run(
        key, [make_action(A.EXPIRE_SNAPSHOTS, older_than=future, retain_last="2")], {}
    )

    assert result.status == "succeeded", result.error
    # main keeps its last 2; the branch keeps its head and one parent (retain_last applies to every
    # branch); the tag keeps its snapshot; only the first and fourth snapshots go
    assert snapshot_ids(spark, key) == {history[1], history[2], history[4], history[5]}
    assert result.impact.procedure_output["deleted_manifest_lists_count"] == 2
    assert table_fingerprint(spark, qualified) == before
    assert spark.sql(f"SELECT count(*) FROM {qualified} VERSION AS OF 'keep_tag'").collect()[0][0] == tagged


def test_remove_orphan_files_removes_only_old_unreferenced_files(
    spark, catalogs: CatalogSet, namespace: str
) -> None:
    key = make_table(catalogs, table_key(namespace, "orphans"), commits=2)
    qualified = qualified_table("lake", key)
    referenced = [local(p) for p in live_files(spark, key)]
    table_dir = referenced[0].parent.parent
    old_orphan, young_orphan = table_dir / "data" / "old-orphan.parquet", table_dir / "data" / "young.parquet"
    shutil.copy(referenced[0], old_orphan)
    for path in table_dir.rglob("*"):  # every file, referenced or not, is older than the threshold...
        os.utime(path, (FIVE_DAYS_AGO, FIVE_DAYS_AGO))
    shutil.copy(referenced[0], young_orphan)  # ...except this one
    every_file_before = {p for p in table_dir.rglob("*") if p.is_file()}
    before = table_fingerprint(spark, qualified)
    older_than = (datetime.now(UTC) - timedelta(days=3)).isoformat()
    runner = MaintenanceRunner(spark, "lake")

    [dry] = runner.run(key, [make_action(A.REMOVE_ORPHAN_FILES, older_than=older_than, dry_run="true")], {})
    assert dry.status == "succeeded", dry.error
    assert (dry.impact.procedure_output["orphan_file_count"], dry.impact.orphan_files_removed) == (1, 0)
    assert {p for p in table_dir.rglob("*") if p.is_file()} == every_file_before

    [result] = runner.run(key, [make_action(A.REMOVE_ORPHAN_FILES, older_than=older_than)], {})
    assert result.status == "succeeded", result.error
    assert result.impact.orphan_files_removed == 1
    assert {p for p in table_dir.rglob("*") if p.is_file()} == every_file_before - {old_orphan}
    assert young_orphan.exists() and all(p.exists() for p in referenced)
    assert table_fingerprint(spark, qualified) == before


@pytest.mark.parametrize(
    ("properties", "first", "expected"),
    [
        ({"gc.enabled": "false"}, make_action(A.EXPIRE_SNAPSHOTS, retain_last="1"), "gc.enabled"),
        ({}, make_action(A.REMOVE_ORPHAN_FILES, older_than=TWELVE_HOURS_AGO), "24 hours"),
        ({"icepack.spark.sql.shuffle.partitions": "4; DROP x"}, make_action(A.REWRITE_DATA_FILES), "shuffle"),
        ({"icepack.spark.sql.warehouse.dir": "/tmp"}, make_action(A.REWRITE_DATA_FILES), "allowlisted"),
    ],
    ids=["gc-disabled", "orphans-under-24h", "override-injection", "override-not-allowlisted"],
)
def test_refusals_touch_nothing_and_skip_the_rest(
    spark,
    catalogs: CatalogSet,
    namespace: str,
    properties: dict[str, str],
    first: RecommendedAction,
    expected: str,
) -> None:
    key = make_table(catalogs, table_key(namespace, "guarded"), commits=3)
    qualified = qualified_table("lake", key)
    data_dir = local(live_files(spark, key)[0]).parent
    orphan = data_dir / "stray.parquet"
    shutil.copy(local(live_files(spark, key)[0]), orphan)
    os.utime(orphan, (FIVE_DAYS_AGO, FIVE_DAYS_AGO))
    snapshots, files = snapshot_ids(spark, key), set(data_dir.iterdir())
    before = table_fingerprint(spark, qualified)

    first_result, second = MaintenanceRunner(spark, "lake").run(
        key, [first, make_action(A.REWRITE_MANIFESTS)], properties
    )

    assert first_result.status == "failed" and first_result.statements == ()
    assert key.text in (first_result.error or "") and expected in (first_result.error or "")
    assert second.status == "skipped" and str(first.action) in (second.reason or "")
    assert snapshot_ids(spark, key) == snapshots and set(data_dir.iterdir()) == files
    assert table_fingerprint(spark, qualified) == before


def test_a_failing_action_is_reported_and_later_actions_are_skipped(
    spark, catalogs: CatalogSet, namespace: str
) -> None:
    key = make_table(catalogs, table_key(namespace, "unsorted"), commits=3)
    qualified = qualified_table("lake", key)
    snapshots, before = snapshot_ids(spark, key), table_fingerprint(spark, qualified)

    failed, skipped = MaintenanceRunner(spark, "lake").run(
        key, [make_action(A.REWRITE_DATA_FILES, strategy="sort"), make_action(A.REWRITE_MANIFESTS)], {}
    )

    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error.startswith(f"table {key.text}: rewrite_data_files failed")
    assert "sort order" in failed.error and "\tat " not in failed.error  # the cause, not a stack trace
    assert skipped.status == "skipped" and skipped.reason is not None
    assert snapshot_ids(spark, key) == snapshots and table_fingerprint(spark, qualified) == before


def test_dry_run_renders_without_touching_the_table(spark, catalogs: CatalogSet, namespace: str) -> None:
    key = make_table(catalogs, table_key(namespace, "dry"), commits=3)
    qualified = qualified_table("lake", key)
    snapshots, before = snapshot_ids(spark, key), table_fingerprint(spark, qualified)
    compaction = make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2"})
    actions = [compaction, make_action(A.REWRITE_MANIFESTS)]

    results = MaintenanceRunner(spark, "lake").run(key, actions, {}, dry_run=True)
    without_spark = MaintenanceRunner(None, "lake").run(key, actions, {}, dry_run=True)

    assert [r.status for r in results] == ["dry_run", "dry_run"]
    assert results == without_spark
    assert results[0].statements[-1] == (
        f"CALL lake.system.rewrite_data_files(table => '`lake`.`{namespace}`.`dry`', "
        "options => map('min-input-files', '2'))"
    )
    assert snapshot_ids(spark, key) == snapshots and table_fingerprint(spark, qualified) == before


def test_hostile_names_are_addressed_exactly(spark, catalogs: CatalogSet) -> None:
    """A namespace named like the catalog, a name with a dot, quote, backtick, semicolon, unicode and a
    Spark variable reference; beside it the decoy that a substituted name would address."""
    catalog = catalogs.get("lake")
    catalog.create_namespace_if_not_exists("lake")
    hostile = "t.'`;é✓ ${spark.app.name}"
    decoy = hostile.replace("${spark.app.name}", spark.conf.get("spark.app.name"))
    keys = {name: TableKey(catalog="lake", namespace=("lake",), name=name) for name in (hostile, decoy)}
    for offset, name in enumerate(keys):
        table = catalog.create_table(("lake", name), schema=pa.schema([("id", pa.int64())]))
        for batch in range(3):
            table.append(pa.table({"id": pa.array([batch, batch + 10 * (offset + 1)], pa.int64())}))
    literal = spark.newSession()  # the test's own reads must not substitute either
    literal.sql("SET spark.sql.variable.substitute=false")
    before = {name: table_fingerprint(literal, qualified_table("lake", key)) for name, key in keys.items()}
    assert before[hostile] != before[decoy]

    [result] = MaintenanceRunner(spark, "lake").run(
        keys[hostile], [make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2"})], {}
    )

    assert result.status == "succeeded", result.error
    assert len(catalog.load_table(("lake", hostile)).inspect.files()) == 1
    assert len(catalog.load_table(("lake", decoy)).inspect.files()) == 3
    assert {n: table_fingerprint(literal, qualified_table("lake", k)) for n, k in keys.items()} == before


def test_a_missing_table_is_a_clean_error(spark, namespace: str) -> None:
    for key in (
        TableKey(catalog="lake", namespace=(namespace,), name="never_created"),
        TableKey(catalog="lake", namespace=("no_such_namespace",), name="t"),
    ):
        with pytest.raises(TableNotFoundError, match=key.text.replace(".", r"\.")):
            MaintenanceRunner(spark, "lake").run(key, [make_action(A.REWRITE_MANIFESTS)], {})


SAMPLE_OPTIONS = {
    "target-file-size-bytes": "1048576", "min-file-size-bytes": "0", "max-file-size-bytes": "2097152",
    "min-input-files": "2", "rewrite-all": "false", "max-file-group-size-bytes": "1073741824",
    "max-concurrent-file-group-rewrites": "2", "partial-progress.enabled": "false",
    "partial-progress.max-commits": "3", "partial-progress.max-failed-commits": "0",
    "rewrite-job-order": "bytes-desc", "delete-file-threshold": "3", "delete-ratio-threshold": "0.3",
    "use-starting-sequence-number": "true", "remove-dangling-deletes": "false", "strategy": "binpack",
    "max-files-to-rewrite": "100",
    "where": "id >= 0",
    "use_caching": "false", "spec_id": "0", "older_than": "2020-01-01T00:00:00Z", "retain_last": "3",
    "max_concurrent_deletes": "2", "stream_results": "true", "clean_expired_metadata": "false",
    "dry_run": "true", "prefix_listing": "true",
}


def test_every_allowlisted_option_is_accepted_by_the_bundled_iceberg(
    spark, catalogs: CatalogSet, namespace: str
) -> None:
    key = make_table(catalogs, table_key(namespace, "all_options"), commits=3, partitions=2)
    before = table_fingerprint(spark, qualified_table("lake", key))
    actions = []
    for kind in MaintenanceAction:
        allowed = set(definition(kind).options)
        assert allowed <= SAMPLE_OPTIONS.keys(), f"add a sample value for {allowed - SAMPLE_OPTIONS.keys()}"
        actions.append(make_action(kind, **{name: SAMPLE_OPTIONS[name] for name in allowed}))

    results = MaintenanceRunner(spark, "lake").run(key, actions, {})

    assert [r.status for r in results] == ["succeeded"] * len(actions), [r.error for r in results]
    assert table_fingerprint(spark, qualified_table("lake", key)) == before
