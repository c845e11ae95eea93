"""Contract: what `recommend` predicts for `rewrite_position_delete_files` is what Iceberg then does,
per partition, on real Spark and a real v2 table partitioned by day with merge-on-read deletes.

- Three, two and one position delete files in three day partitions: the prediction names the two
  partitions holding more than one (5 files in, 2 out, exact), the rendered call passes the sizes and
  min-input-files it assumed, Iceberg rewrites exactly those 5 files into 2 and leaves the lone file
  alone; the outcome is recorded (`accuracy` shows planned = done); contents are unchanged on main and
  on every branch, tag and snapshot.
- The rewrite writes deletes at the table's `write.delete.granularity`; the main case sets `partition`.
  One position delete file per partition, or file-scoped deletes (`file`, Iceberg's default, where a
  rewrite writes one delete file per data file and merges nothing): no rewrite is recommended, and
  the reason says why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.history_store import HistoryStore
from tests.compaction_testkit import daily_table
from tests.tables_testkit import contents_by_version

pytestmark = pytest.mark.spark

REWRITE_DELETES = MaintenanceAction.REWRITE_POSITION_DELETE_FILES
DAY = ["2026-11-01", "2026-11-02", "2026-11-03"]


@pytest.fixture
def engine(settings: IcepackSettings, catalogs: CatalogSet, spark, tmp_path: Path) -> Engine:  # type: ignore[no-untyped-def]
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    return Engine(settings, catalogs, spark_provider=lambda: spark, history=history)


def table_with_deletes(
    spark: SparkSession, namespace: str, name: str, deletes_per_day: list[int], granularity: str = "partition"
) -> TableKey:
    """As many inserts as the most deletes of a day, each writing one data file per day; then, per day,
    single-row DELETEs of rows in that many different data files. Each commits one file-scoped position
    delete file (Iceberg merges a new delete of the same data file into its old one, so each deletes
    from another file). Data compaction is disabled, so the position delete rewrite is planned on its
    own (a data rewrite would apply the deletes). `granularity` is then set for the rewrite."""
    days, rows = len(deletes_per_day), 20
    inserts = max(deletes_per_day)
    key = daily_table(spark, namespace, name, days=days, files_per_day=inserts, rows_per_file=rows)
    q = qualified_table("lake", key)
    spark.sql(
        f"ALTER TABLE {q} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read', "
        "'icepack.action.rewrite_data_files.enabled'='false')"
    )
    for day, count in enumerate(deletes_per_day):
        for insert in range(count):
            spark.sql(f"DELETE FROM {q} WHERE id = {insert * rows * days + day}")
    spark.sql(f"ALTER TABLE {q} SET TBLPROPERTIES ('write.delete.granularity'='{granularity}')")
    spark.sql(f"ALTER TABLE {q} CREATE TAG before_rewrite")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH audit")
    return key


def delete_files_by_day(spark: SparkSession, key: TableKey) -> dict[str, set[str]]:
    """Live position delete file paths per day (Spark's `delete_files` metadata table)."""
    rows = spark.sql(
        f"SELECT string(partition.ts_day) AS day, file_path FROM {qualified_table('lake', key)}.delete_files "
        "WHERE content = 1"
    ).collect()
    found: dict[str, set[str]] = {}
    for row in rows:
        found.setdefault(row["day"], set()).add(row["file_path"])
    return found


def test_the_predicted_position_delete_rewrite_is_what_iceberg_does(
    spark: SparkSession, engine: Engine, namespace: str
) -> None:
    key = table_with_deletes(spark, namespace, "pos_deletes", [3, 2, 1])
    contents = contents_by_version(spark, key)
    before = delete_files_by_day(spark, key)
    assert {day: len(paths) for day, paths in before.items()} == {DAY[0]: 3, DAY[1]: 2, DAY[2]: 1}

    recommendation = engine.recommend(key)
    [planned] = [a for a in recommendation.actions if a.action is REWRITE_DELETES]
    prediction = planned.prediction
    assert prediction is not None and prediction.exact
    assert [(g.partition, g.files_in, g.files_out) for g in prediction.groups] == [
        (f"ts_day={DAY[0]}", 3, 1), (f"ts_day={DAY[1]}", 2, 1)
    ]
    assert (prediction.files_in, prediction.files_out) == (5, 2)
    assert planned.options["min-input-files"] == "2"
    assert planned.options["target-file-size-bytes"] == str(64 * 1024**2)  # Iceberg's delete target

    report = engine.maintain(key, recommendation, only=[REWRITE_DELETES])

    [result] = [r for r in report.results if r.action is REWRITE_DELETES]
    assert result.status == "succeeded", result.error or result.reason
    judged = result.predicted_actual
    assert judged is not None and judged.done is not None and judged.near
    assert (judged.done.files_in, judged.done.files_out) == (5, 2)
    assert judged.done.bytes_in == prediction.bytes_in
    after = delete_files_by_day(spark, key)
    assert {day: len(paths) for day, paths in after.items()} == {DAY[0]: 1, DAY[1]: 1, DAY[2]: 1}
    assert after[DAY[2]] == before[DAY[2]]  # the lone delete file is left as it was
    assert not (after[DAY[0]] | after[DAY[1]]) & (before[DAY[0]] | before[DAY[1]])
    assert engine.status(key).live_position_delete_files == 3
    now = contents_by_version(spark, key)
    assert {v: now[v] for v in contents} == contents  # main, branch, tag and every snapshot
    [accuracy] = [a for a in engine.accuracy(key) if a.action == REWRITE_DELETES.value]
    assert (accuracy.runs, accuracy.planned_files_in, accuracy.done_files_in) == (1, 5, 5)
    assert (accuracy.planned_files_out, accuracy.done_files_out) == (2, 2)


@pytest.mark.parametrize(
    ("granularity", "per_day", "reason"),
    [
        ("partition", [1, 1, 1], "3 position delete files are each alone in its partition"),
        ("file", [2, 1], "write.delete.granularity is 'file': a rewrite writes one delete file per data"),
    ],
)
def test_position_deletes_a_rewrite_cannot_merge_are_not_rewritten(
    spark: SparkSession, engine: Engine, namespace: str, granularity: str, per_day: list[int], reason: str
) -> None:
    """One delete file per partition; or file-scoped deletes, which Iceberg rewrites one file per data
    file (the main test's 5 files came out as 5 until the table asked for partition granularity)."""
    key = table_with_deletes(spark, namespace, f"unmergeable_{granularity}", per_day, granularity)

    recommendation = engine.recommend(key)

    assert REWRITE_DELETES not in {a.action for a in recommendation.actions}
    [skipped] = [s for s in recommendation.skipped if s.action is REWRITE_DELETES]
    assert reason in skipped.reason
