"""Contract: `compute_table_stats` and `compute_partition_stats` are planned by policy, predicted and
verified on real Spark and Iceberg, on format v2 and v3 tables, with and without statistics.

- Without statistics, status says main has none and health has no issue; with the policy's fields set,
  `recommend` plans both, each predicting one statistics file for the snapshot main is at; `maintain`
  runs them, the table's metadata (read by PyIceberg, apart from icepack's own reader) lists the file
  each procedure returned for exactly that snapshot, status reports them current, and the next
  recommendation has nothing to gain. No snapshot is added; contents on main, a branch, a tag and every
  snapshot are unchanged.
- With statistics three commits behind (a compaction, then two inserts): status counts the commits and
  the rows they changed, the compaction's none (a quarter of the table: health warns STALE_STATISTICS);
  policy at two commits plans both again and they are current
  afterwards (partition statistics incrementally), the warning gone.
- A no-op is never a success: compute_partition_stats planned on a state whose statistics someone else
  computed meanwhile returns the file already registered, and the run is `no_effect`.
- An unpartitioned table never gets compute_partition_stats (Iceberg refuses it); the table statistics
  are computed all the same.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.health.stale_statistics import STALE_STATISTICS
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.compaction_testkit import insert_days
from tests.tables_testkit import contents_by_version

pytestmark = pytest.mark.spark

TABLE_STATS = MaintenanceAction.COMPUTE_TABLE_STATS
PARTITION_STATS = MaintenanceAction.COMPUTE_PARTITION_STATS
BOTH = [TABLE_STATS, PARTITION_STATS]
OUTPUT = {TABLE_STATS: "statistics_file", PARTITION_STATS: "partition_statistics_file"}


def stats_table(
    spark: SparkSession, namespace: str, name: str, version: int, *, partitioned: bool = True
) -> TableKey:
    """Three inserts of 60 rows over three days (partitioned by day unless not), format `version`, a tag
    and a branch, no cadence, and a policy keeping both statistics within two commits."""
    key = TableKey(catalog="lake", namespace=(namespace,), name=name)
    q = qualified_table("lake", key)
    spark.sql(
        f"CREATE TABLE {q} (id bigint, ts timestamp, payload string) USING iceberg "
        f"{'PARTITIONED BY (days(ts))' if partitioned else ''} TBLPROPERTIES ('format-version'='{version}', "
        "'icepack.cadence-hours'='0', 'icepack.stats.table.commits-behind'='2', "
        "'icepack.stats.partition.commits-behind'='2')"
    )
    for insert in range(3):
        insert_days(spark, q, insert * 60, 60, 3)
    spark.sql(f"ALTER TABLE {q} CREATE TAG first")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH audit")
    return key


def registered(catalogs: CatalogSet, key: TableKey) -> tuple[int | None, dict[int, str], dict[int, str]]:
    """Main's snapshot and the statistics and partition statistics files per snapshot, as PyIceberg
    reads the table's metadata."""
    metadata = catalogs.get("lake").load_table(key.identifier).metadata
    return (
        metadata.current_snapshot_id,
        {s.snapshot_id: s.statistics_path for s in metadata.statistics},
        {s.snapshot_id: s.statistics_path for s in metadata.partition_statistics},
    )


@pytest.mark.parametrize("version", [2, 3])
def test_statistics_are_computed_for_main_as_predicted_and_verified(
    spark: SparkSession, engine: Engine, catalogs: CatalogSet, namespace: str, version: int
) -> None:
    key = stats_table(spark, namespace, f"stats_v{version}", version)
    contents = contents_by_version(spark, key)
    status = engine.status(key)
    assert status.format_version == version and status.statistics is not None
    assert (status.statistics.table_statistics, status.statistics.partition_statistics) == (None, None)
    assert STALE_STATISTICS not in {issue.code for issue in engine.health(status).issues}

    recommendation = engine.recommend(key)
    planned = {a.action: a for a in recommendation.actions if a.action in BOTH}
    assert set(planned) == set(BOTH)
    for action, kind in ((TABLE_STATS, "table"), (PARTITION_STATS, "partition")):
        assert planned[action].reason.startswith(f"main has no {kind} statistics; computed for the snapshot")
        assert str(status.snapshot_id) in planned[action].reason
    report = engine.maintain(key, recommendation, only=BOTH)

    snapshot, table_files, partition_files = registered(catalogs, key)
    assert snapshot == status.snapshot_id  # no snapshot added
    by_action = {r.action: r for r in report.results}
    for action, files in ((TABLE_STATS, table_files), (PARTITION_STATS, partition_files)):
        result = by_action[action]
        assert result.status == "succeeded", result.error or result.reason
        assert result.predicted_actual is not None and result.predicted_actual.near
        assert files == {snapshot: result.impact.procedure_output[OUTPUT[action]]}
    after = engine.status(key)
    assert after.statistics is not None and after.statistics.table_statistics is not None
    assert after.statistics.partition_statistics is not None
    assert after.statistics.table_statistics.path == table_files[snapshot]
    assert after.statistics.partition_statistics.commits_behind == 0
    again = engine.recommend(key, after)
    reasons = {s.action: s.reason for s in again.skipped if s.action in BOTH}
    assert reasons == {
        TABLE_STATS: f"nothing to gain: table statistics are current (snapshot {snapshot})",
        PARTITION_STATS: f"nothing to gain: partition statistics are current (snapshot {snapshot})",
    }
    assert contents_by_version(spark, key) == contents


def test_statistics_behind_main_by_policy_are_computed_again(
    spark: SparkSession, engine: Engine, catalogs: CatalogSet, namespace: str
) -> None:
    key = stats_table(spark, namespace, "behind", 3)
    engine.maintain(key, only=BOTH)
    _, table_files, _ = registered(catalogs, key)
    q = qualified_table("lake", key)
    compact = "options => map('rewrite-all', 'true')"
    spark.sql(f"CALL lake.system.rewrite_data_files(table => '{namespace}.behind', {compact})")
    insert_days(spark, q, 1000, 30, 3)
    insert_days(spark, q, 2000, 30, 3)
    contents = contents_by_version(spark, key)
    status = engine.status(key)
    assert status.statistics is not None and status.statistics.table_statistics is not None
    facts = status.statistics.table_statistics
    # a compaction is a commit, but changes no row; the two inserts change 60 of 240
    assert (facts.snapshot_id, facts.commits_behind, facts.rows_changed) == (next(iter(table_files)), 3, 60)
    [stale] = [i for i in engine.health(status).issues if i.code == STALE_STATISTICS]
    assert (stale.metric, stale.value) == ("table_statistics_rows_changed_share", 60 / 240)

    recommendation = engine.recommend(key, status)
    assert {a.action for a in recommendation.actions} >= set(BOTH)
    report = engine.maintain(key, recommendation, only=BOTH)

    assert {r.action: r.status for r in report.results} == dict.fromkeys(BOTH, "succeeded")
    snapshot, table_files, partition_files = registered(catalogs, key)
    assert snapshot in table_files and snapshot in partition_files
    after = engine.status(key).statistics
    assert after is not None and after.table_statistics is not None and after.partition_statistics is not None
    assert (after.table_statistics.commits_behind, after.partition_statistics.commits_behind) == (0, 0)
    assert STALE_STATISTICS not in {i.code for i in engine.health(engine.status(key)).issues}
    assert contents_by_version(spark, key) == contents


def test_partition_statistics_someone_computed_meanwhile_make_the_run_no_effect(
    spark: SparkSession, engine: Engine, catalogs: CatalogSet, namespace: str
) -> None:
    key = stats_table(spark, namespace, "meanwhile", 2)
    contents = contents_by_version(spark, key)
    recommendation = engine.recommend(key)
    spark.sql(f"CALL lake.system.compute_partition_stats(table => '{namespace}.meanwhile')")
    _, _, before = registered(catalogs, key)

    report = engine.maintain(key, recommendation, only=[PARTITION_STATS])

    [result] = report.results
    assert result.status == "no_effect", result.error
    assert result.reason is not None and "was already the partition statistics" in result.reason
    assert registered(catalogs, key)[2] == before
    assert contents_by_version(spark, key) == contents


def test_an_unpartitioned_table_gets_table_statistics_only(
    spark: SparkSession, engine: Engine, catalogs: CatalogSet, namespace: str
) -> None:
    key = stats_table(spark, namespace, "flat", 2, partitioned=False)
    contents = contents_by_version(spark, key)
    recommendation = engine.recommend(key)
    [skipped] = [s for s in recommendation.skipped if s.action is PARTITION_STATS]
    not_partitioned = "the table is not partitioned: partition statistics have nothing to count"
    assert skipped.reason == f"nothing to gain: {not_partitioned}"

    report = engine.maintain(key, recommendation, only=BOTH)

    statuses = {r.action: r.status for r in report.results}
    assert statuses == {TABLE_STATS: "succeeded", PARTITION_STATS: "skipped"}
    snapshot, table_files, partition_files = registered(catalogs, key)
    assert list(table_files) == [snapshot] and partition_files == {}
    assert contents_by_version(spark, key) == contents
