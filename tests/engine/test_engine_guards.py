"""Contract: the engine's own guards, end to end through `Engine.maintain` on real tables.

A table with gc.enabled=false gets no expiry and no orphan removal: a fresh recommendation skips them
saying why, and a recommendation made before gc was disabled is refused when it runs; nothing is
deleted. A table dropped after it was recommended (even in the instant before Spark opens it) ends
cleanly as "table no longer exists", outcome `table_gone`: nothing runs, nothing is recorded, no other
table is touched.
A real run executes exactly the statements its dry run listed for the same recommendation, and
nothing else reaches Spark.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.cli.presentation import format_report
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.recommendation.recommender import gc_disabled_reason
from icepack_dagster.domain.sql.procedures import SESSION_SETUP, qualified_table, table_probe
from icepack_dagster.engine import TABLE_GONE, Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.spark.iceberg_runtime import RUNTIME_PROBE
from icepack_dagster.store.history_store import HistoryStore
from tests.engine.safety_testkit import (
    MOR_V2,
    RecordingSpark,
    files_under,
    plant_orphan,
    snapshot_rows,
    table_dir,
    wait_past_newest_snapshot,
)
from tests.tables_testkit import make_table, table_fingerprint, table_key

pytestmark = pytest.mark.spark

A = MaintenanceAction
EAGER = {
    "format-version": "2",
    "icepack.snapshot.max-age-hours": "0",
    "icepack.snapshot.retain-last": "2",
}


def test_a_gc_disabled_table_gets_no_destructive_action(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str
) -> None:
    key = make_table(
        catalogs, table_key(namespace, "no_gc"), commits=6, properties=EAGER | {"gc.enabled": "false"}
    )
    q = qualified_table("lake", key)
    orphan = plant_orphan(catalogs, key)
    wait_past_newest_snapshot(catalogs, key)  # expiry's cutoff is whole seconds
    root = table_dir(catalogs, key)
    snapshots, files, before = snapshot_rows(spark, key), files_under(root), table_fingerprint(spark, q)

    fresh = engine.maintain(key)

    by_action = {r.action: r for r in fresh.results}
    for destructive in (A.EXPIRE_SNAPSHOTS, A.REMOVE_ORPHAN_FILES):
        skipped = by_action[destructive]
        assert skipped.status == "skipped" and skipped.reason == gc_disabled_reason("false")
    assert snapshot_rows(spark, key) == snapshots and files_under(root) == files and orphan.exists()

    spark.sql(f"ALTER TABLE {q} SET TBLPROPERTIES ('gc.enabled'='true')")
    stale = engine.recommend(key)
    assert {A.EXPIRE_SNAPSHOTS, A.REMOVE_ORPHAN_FILES} <= {a.action for a in stale.actions}
    spark.sql(f"ALTER TABLE {q} SET TBLPROPERTIES ('gc.enabled'='false')")
    snapshots, files = snapshot_rows(spark, key), files_under(root)

    refused = engine.maintain(key, recommendation=stale)

    by_action = {r.action: r for r in refused.results}
    expire, orphans = by_action[A.EXPIRE_SNAPSHOTS], by_action[A.REMOVE_ORPHAN_FILES]
    assert expire.status == "failed" and expire.statements == ()
    assert key.text in (expire.error or "") and "gc.enabled" in (expire.error or "")
    assert orphans.status == "skipped" and orphans.statements == ()
    assert snapshot_rows(spark, key) == snapshots and files_under(root) == files and orphan.exists()
    assert table_fingerprint(spark, q) == before


def test_a_table_dropped_after_its_recommendation_ends_cleanly(
    spark: SparkSession, catalogs: CatalogSet, settings: IcepackSettings, namespace: str, tmp_path: Path
) -> None:
    gone = make_table(catalogs, table_key(namespace, "gone"), commits=10)
    other = make_table(catalogs, table_key(namespace, "other"), commits=3)
    gone_root, other_q = table_dir(catalogs, gone), qualified_table("lake", other)
    gone_files, other_snapshots = files_under(gone_root), snapshot_rows(spark, other)
    other_before = table_fingerprint(spark, other_q)

    def drop_then_spark() -> SparkSession:  # the table goes in the instant before Spark opens it
        spark.sql(f"DROP TABLE IF EXISTS {qualified_table('lake', gone)}")
        return spark

    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    engine = Engine(settings, catalogs, spark_provider=drop_then_spark, history=history)
    recommendation = engine.recommend(gone)
    assert recommendation.actions

    reports = [engine.maintain(gone), engine.maintain(gone, recommendation=recommendation)]

    for report in reports:  # once dropped while starting, once already gone with a recommendation
        assert report.outcome == "table_gone"
        assert [r.action for r in report.results] == [a.action for a in recommendation.actions]
        for result in report.results:
            assert result.status == "skipped" and result.statements == ()
            assert (result.reason or "").startswith(TABLE_GONE) and gone.text in (result.reason or "")
        assert TABLE_GONE in format_report(gone.dotted, report)
        assert format_report(gone.dotted, report).startswith(f"{gone.dotted}: table gone")
    assert engine.history(gone).last_run_at is None  # a vanished table is no failure to count
    assert files_under(gone_root) == gone_files  # not even the dropped table's files were touched
    assert snapshot_rows(spark, other) == other_snapshots
    assert table_fingerprint(spark, other_q) == other_before


def test_the_real_run_executes_exactly_what_the_dry_run_listed(
    spark: SparkSession, catalogs: CatalogSet, settings: IcepackSettings, namespace: str, tmp_path: Path
) -> None:
    stats = {"icepack.stats.table.commits-behind": "1"}  # partition statistics: partitioned tables only
    properties = EAGER | MOR_V2 | stats | {"icepack.spark.sql.shuffle.partitions": "3"}
    key = make_table(catalogs, table_key(namespace, "agree"), commits=10, properties=properties)
    q = qualified_table("lake", key)
    for doomed in (1, 25):  # position delete files, so every action has work
        spark.sql(f"DELETE FROM {q} WHERE id = {doomed}")
    orphan = plant_orphan(catalogs, key)
    wait_past_newest_snapshot(catalogs, key)  # expiry's cutoff is whole seconds: every action has work
    before = table_fingerprint(spark, q)
    executed: list[str] = []
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    recording = RecordingSpark(spark, executed)
    engine = Engine(settings, catalogs, spark_provider=lambda: recording, history=history)
    recommendation = engine.recommend(key)
    every = [action for action in A if action is not A.COMPUTE_PARTITION_STATS]
    assert [a.action for a in recommendation.actions] == every  # every action is exercised

    dry = engine.maintain(key, recommendation=recommendation, dry_run=True)
    assert executed == []  # a dry run never reaches Spark
    real = engine.maintain(key, recommendation=recommendation)

    assert [r.status for r in dry.results if r.action in every] == ["dry_run"] * len(every)
    succeeded = [r.status for r in real.results if r.action in every]
    assert succeeded == ["succeeded"] * len(every), real.first_error
    assert [(r.action, r.statements) for r in real.results] == [(r.action, r.statements) for r in dry.results]
    listed = [statement for r in dry.results for statement in r.statements]
    # the session setup runs once, when the table's session opens: the actions' own copies of it are
    # listed (they say what the session holds) but not sent again
    sent = [statement for statement in listed if statement not in SESSION_SETUP]
    # the runtime first: a table whose types this Spark cannot read is refused before any statement on it
    probes = [RUNTIME_PROBE, table_probe("lake", key)]  # then the table (it exists; its format version)
    assert executed == [*SESSION_SETUP, *probes, *sent]
    assert listed.count(SESSION_SETUP[0]) == len(every)
    assert "SET spark.sql.shuffle.partitions=3" in listed
    assert not orphan.exists()
    assert table_fingerprint(spark, q) == before
