"""Contract: what `recommend` predicts for `rewrite_data_files` is what Iceberg then does, on real Spark
and real Iceberg tables partitioned by day.

- 3 and 20 small files per partition, a table evolved from months(ts) to days(ts), and one through
  four partition specs (unpartitioned, months, days, days and bucket): the predicted
  groups are the partitions Iceberg rewrites, files in match exactly, files out exactly for partitions of
  the current spec (a group of earlier specs' files is written out per current partition, so its files
  out is a lower bound); the table is healthy after one maintenance; contents are unchanged on main and
  on every branch, tag and snapshot; the outcome is recorded and `accuracy` shows planned = done.
- 1 small file per partition: no compaction is recommended (Iceberg would rewrite nothing), health names
  FINE_PARTITIONING with the numbers; a stale whole-table compaction on it is `no_effect` with both
  numbers, not `succeeded`, is no failure, and is not repeated on the unchanged table.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.planners.compaction import OTHER_SPECS, RewritePrediction
from icepack_dagster.domain.health.judging import FINE_PARTITIONING
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.history_store import HistoryStore
from tests.compaction_testkit import daily_table, files_by_partition, insert_days
from tests.factories import make_action, make_recommendation
from tests.tables_testkit import contents_by_version

pytestmark = pytest.mark.spark

REWRITE = MaintenanceAction.REWRITE_DATA_FILES
COOL = "ALTER TABLE {} SET TBLPROPERTIES ('icepack.compaction.hot-minutes'='0')"  # nothing is hot


@pytest.fixture
def engine(settings: IcepackSettings, catalogs: CatalogSet, spark, tmp_path: Path) -> Engine:  # type: ignore[no-untyped-def]
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    return Engine(settings, catalogs, spark_provider=lambda: spark, history=history)


def with_branch_and_tag(spark: SparkSession, key: TableKey) -> None:
    q = qualified_table(key.catalog, key)
    spark.sql(f"ALTER TABLE {q} CREATE TAG before_compaction")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH audit")
    spark.sql(f"INSERT INTO {q}.branch_audit VALUES (999999, TIMESTAMP '2026-11-01 07:00:00+00:00', 'b')")


@pytest.mark.parametrize(
    ("name", "days", "per_day", "earlier", "groups", "files_in", "catalog"),
    [
        ("three_a_day", 4, 3, 0, 4, 12, "lake"),
        ("three_a_day", 4, 3, 0, 4, 12, "pg"),  # the same on the PostgreSQL catalog
        ("twenty_a_day", 2, 20, 0, 2, 40, "lake"),
        ("evolved", 2, 3, 2, 3, 8, "lake"),  # two months(ts) files, then 3 a day for 2 days under days(ts)
    ],
)
def test_the_predicted_rewrite_is_what_iceberg_does(
    spark: SparkSession,
    engine: Engine,
    namespace: str,
    name: str,
    days: int,
    per_day: int,
    earlier: int,
    groups: int,
    files_in: int,
    catalog: str,
) -> None:
    key = daily_table(spark, namespace, name, days, per_day, earlier_spec_files=earlier, catalog=catalog)
    spark.sql(COOL.format(qualified_table(catalog, key)))
    with_branch_and_tag(spark, key)
    contents = contents_by_version(spark, key)
    files_before = files_by_partition(spark, key)
    assert engine.health(engine.status(key)).state is HealthState.CRITICAL

    recommendation = engine.recommend(key)
    [planned] = [a for a in recommendation.actions if a.action is REWRITE]
    prediction = planned.prediction
    assert prediction is not None
    assert (len(prediction.groups), prediction.files_in) == (groups, files_in)
    assert prediction.exact is (earlier == 0)

    report = engine.maintain(key, recommendation, only=[REWRITE])

    [result] = [r for r in report.results if r.action is REWRITE]
    assert result.status == "succeeded", result.error or result.reason
    judged = result.predicted_actual
    assert judged is not None and judged.done is not None and judged.near
    assert judged.done.files_in == prediction.files_in  # exactly the files predicted
    assert judged.done.bytes_in == prediction.bytes_in
    current_groups = [g for g in prediction.groups if g.partition != OTHER_SPECS]
    if earlier:  # the earlier specs' files are written out per day they hold: at least one file
        assert prediction.files_out <= (judged.done.files_out or 0) <= prediction.files_out + days
    else:
        assert judged.done.files_out == prediction.files_out == len(current_groups)
    files_after = files_by_partition(spark, key)
    rewritten = {p for p, paths in files_before.items() if paths - files_after.get(p, set())}
    assert len([p for p in rewritten if not p.startswith("0:") or not earlier]) == len(current_groups)

    assert engine.health(engine.status(key)).state is HealthState.HEALTHY
    after = contents_by_version(spark, key)
    assert {v: after[v] for v in contents} == contents  # main, branch, tag and every snapshot
    [accuracy] = [a for a in engine.accuracy() if a.action == REWRITE.value]
    assert (accuracy.runs, accuracy.planned_files_in, accuracy.done_files_in) == (1, files_in, files_in)


def test_one_small_file_per_partition_is_fine_partitioning_not_compaction(
    spark: SparkSession, engine: Engine, namespace: str
) -> None:
    key = daily_table(spark, namespace, "one_a_day", days=11, files_per_day=1)
    spark.sql(COOL.format(qualified_table("lake", key)))
    status = engine.status(key)

    [issue] = engine.health(status).issues
    assert issue.code == FINE_PARTITIONING
    assert "11 of 11 data files" in issue.message and "11 partitions" in issue.message
    recommendation = engine.recommend(key, status)
    assert REWRITE not in {a.action for a in recommendation.actions}
    [skipped] = [s for s in recommendation.skipped if s.action is REWRITE]
    assert "11 small data files are each alone in their partition" in skipped.reason


@pytest.mark.parametrize("catalog", ["lake", "pg"])
def test_a_rewrite_that_does_nothing_is_no_effect_and_not_repeated(
    spark: SparkSession, engine: Engine, namespace: str, catalog: str
) -> None:
    """The observed failure: a whole-table estimate ("11 files would merge") run on a table where no
    partition reaches min-input-files. Iceberg rewrites nothing; icepack must say so."""
    key = daily_table(spark, namespace, "stale_plan", days=11, files_per_day=1, catalog=catalog)
    contents = contents_by_version(spark, key)
    stale = make_action(
        REWRITE,
        reason="11 data files would merge into about 1",
        prediction=RewritePrediction(files_in=11, files_out=1, bytes_in=1, exact=False),
        **{"min-input-files": "5"},
    )

    report = engine.maintain(key, make_recommendation(stale, table=key.text))

    [result] = report.results
    assert (report.outcome, result.status) == ("no_effect", "no_effect")
    assert result.reason == "no effect: planned 11 files, Iceberg processed 0 files"
    history = engine.history(key)
    assert history.consecutive_failures == 0 and not history.quarantined
    assert history.no_effect_on == {REWRITE: engine.status(key).snapshot_id}
    assert contents_by_version(spark, key) == contents
    [accuracy] = engine.accuracy(key)
    assert (accuracy.no_effect_runs, accuracy.planned_files_in, accuracy.done_files_in) == (1, 11, 0)
    # the unchanged table: the recommendation does not repeat it (whatever it would plan)
    recommendation = engine.recommend(key, now=datetime.now(UTC))
    assert REWRITE not in {a.action for a in recommendation.actions}


def test_four_partition_specs_are_predicted_as_iceberg_groups_them(
    spark: SparkSession, engine: Engine, namespace: str
) -> None:
    """Unpartitioned, then months(ts), then days(ts), then days(ts) and bucket(2, id): every file of the
    three earlier specs is one group; each current (day, bucket) partition is its own."""
    key = TableKey(catalog="lake", namespace=(namespace,), name="four_specs")
    q = qualified_table("lake", key)
    spark.sql(f"CREATE TABLE {q} (id bigint, ts timestamp, payload string) USING iceberg")
    spark.sql(COOL.format(q))
    start = 0
    for evolve, inserts in [
        (None, 2),
        ("ADD PARTITION FIELD months(ts)", 1),
        ("REPLACE PARTITION FIELD months(ts) WITH days(ts)", 2),
        ("ADD PARTITION FIELD bucket(2, id)", 2),
    ]:
        if evolve:
            spark.sql(f"ALTER TABLE {q} {evolve}")
        for _ in range(inserts):
            insert_days(spark, q, start, 60, days=3)
            start += 60
    contents = contents_by_version(spark, key)
    files = files_by_partition(spark, key)
    earlier = sum(len(paths) for p, paths in files.items() if not p.startswith("3:"))
    current = {p: len(paths) for p, paths in files.items() if p.startswith("3:")}

    [planned] = [a for a in engine.recommend(key).actions if a.action is REWRITE]
    prediction = planned.prediction
    assert prediction is not None
    groups = {g.partition: g.files_in for g in prediction.groups}
    assert groups.pop(OTHER_SPECS) == earlier
    assert sorted(groups.values()) == sorted(current.values())  # one group per (day, bucket)

    report = engine.maintain(key, make_recommendation(planned, table=key.text))

    [result] = report.results
    judged = result.predicted_actual
    assert result.status == "succeeded" and judged is not None and judged.done is not None
    assert judged.done.files_in == prediction.files_in
    assert prediction.files_out <= (judged.done.files_out or 0) <= prediction.files_out + len(current)
    after = contents_by_version(spark, key)
    assert {v: after[v] for v in contents} == contents  # main and every earlier snapshot
