"""Contract: compaction leaves out the partitions writers are still writing, so it does not fight them.

A table partitioned by day: three earlier days written a while ago, "today" written just now (the
policy's hot window, `icepack.compaction.hot-minutes`, falls between the two). The recommendation
rewrites the earlier days only, with a `where` that leaves today out, and says so. A writer that
appends to today's partition and deletes rows of today's files (an upsert) commits exactly while the
rewrite runs (Spark's task slots are held in between): the rewrite of the earlier days commits with
zero conflicts, rewrites what was predicted, and every row of the writer's snapshot is there. The same
rewrite over the whole table, next to the same writer, stops on the conflict (status `conflict`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions.maintenance_action import ActionResult, MaintenanceAction
from icepack_dagster.domain.recommendation.model import RecommendedAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.spark.runner import MaintenanceRunner
from tests.compaction_testkit import daily_table, insert_days
from tests.engine.safety_testkit import (
    StalledTaskSlots,
    commit_position_deletes,
    finished,
    locate_rows,
    run_in_thread,
)
from tests.tables_testkit import local, table_fingerprint

pytestmark = pytest.mark.spark

REWRITE = MaintenanceAction.REWRITE_DATA_FILES
TODAY = "2026-11-04"
TODAY_IDS = list(range(10_000, 10_060))


def earlier_days_then_today(spark: SparkSession, namespace: str, name: str) -> tuple[TableKey, datetime]:
    """Three days of three small files each, then three inserts into today; the hot window is set to
    half the time between the last earlier commit and the last commit of today. Returns the moment
    (the last commit) to recommend at."""
    key = daily_table(spark, namespace, name, days=3, files_per_day=3)
    q = qualified_table("lake", key)
    for start in range(TODAY_IDS[0], TODAY_IDS[-1] + 1, 20):
        insert_days(spark, q, start, 20, 1, first_day=TODAY)
    commits = sorted(r[0] for r in spark.sql(f"SELECT committed_at FROM {q}.snapshots").collect())
    earlier, last = commits[2], commits[-1]  # the third insert wrote the earlier days' last files
    minutes = (last - earlier).total_seconds() / 60 / 2
    spark.sql(f"ALTER TABLE {q} SET TBLPROPERTIES ('icepack.compaction.hot-minutes'='{minutes:.6f}')")
    return key, last.astimezone(UTC)


def append_today(spark: SparkSession, key: TableKey, ids: list[int]) -> None:
    """Appends rows to today's partition as another engine would: a Parquet file written with pyarrow,
    committed through Iceberg's Java API on the driver (so it commits while the task slots are held)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession,  # type: ignore[attr-defined]
        qualified_table("lake", key),
    )
    moment = datetime.fromisoformat(f"{TODAY}T08:00:00+00:00")
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"}),
            pa.field("ts", pa.timestamp("us", tz="UTC"), metadata={"PARQUET:field_id": "2"}),
            pa.field("payload", pa.string(), metadata={"PARQUET:field_id": "3"}),
        ]
    )
    rows = pa.table(
        {"id": ids, "ts": [moment] * len(ids), "payload": [f"upsert-{i}" for i in ids]}, schema=schema
    )
    partition = f"ts_day={TODAY}"
    path = local(str(table.location())) / "data" / partition / f"upsert-{uuid.uuid4().hex}.parquet"
    pq.write_table(rows, path)
    data_file = (
        jvm.org.apache.iceberg.DataFiles.builder(table.spec())
        .withPath(f"file:{path}")
        .withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
        .withFileSizeInBytes(path.stat().st_size)
        .withRecordCount(len(ids))
        .withPartitionPath(partition)
        .build()
    )
    table.newAppend().appendFile(data_file).commit()


def upsert_today(spark: SparkSession, key: TableKey) -> Callable[[], int]:
    """A writer on today's partition: appends rows, then deletes two of today's earlier rows (position
    deletes); returns its last snapshot id. Rows are located now, before any stall."""
    doomed = locate_rows(spark, key, TODAY_IDS[:2])

    def write() -> int:
        append_today(spark, key, [90_000, 90_001])
        return commit_position_deletes(spark, key, doomed)

    return write


def rewrite_next_to(
    spark: SparkSession, key: TableKey, planned: RecommendedAction, writer: Callable[[], int], flag: Path
) -> tuple[ActionResult, int]:
    runner = MaintenanceRunner(spark, "lake")
    with StalledTaskSlots(spark, flag) as stall:
        thread, outcome = run_in_thread(lambda: runner.run(key, [planned]))
        stall.wait_for_other_job()
        written = writer()
        stall.release()
        [result] = finished(thread, outcome)
    return result, written


def test_compaction_leaves_hot_partitions_out_and_does_not_conflict(
    spark: SparkSession, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    key, now = earlier_days_then_today(spark, namespace, "hot_today")
    q = qualified_table("lake", key)
    [planned] = [a for a in engine.recommend(key, now=now).actions if a.action is REWRITE]
    assert planned.prediction is not None
    assert planned.prediction.excluded_hot_partitions == (f"ts_day={TODAY}",)
    assert (len(planned.prediction.groups), planned.prediction.files_in) == (3, 9)
    assert f"left out: ts_day={TODAY}" in planned.reason
    assert "NOT ((`ts` >= TIMESTAMP '2026-11-04 00:00:00+00:00'" in planned.options["where"]

    writer = upsert_today(spark, key)
    result, written = rewrite_next_to(spark, key, planned, writer, tmp_path / "go")

    assert result.status == "succeeded", result.error  # zero commit conflicts
    assert result.predicted_actual is not None and result.predicted_actual.near
    assert result.impact.procedure_output["rewritten_data_files_count"] == 9
    assert table_fingerprint(spark, q) == table_fingerprint(spark, f"{q} VERSION AS OF {written}")
    today = spark.sql(f"SELECT count(*) FROM {q}.files WHERE partition.ts_day = DATE '{TODAY}'").first()
    assert today is not None and today[0] == 5  # 3 inserts + the append + the delete file, untouched


def test_the_same_rewrite_over_the_whole_table_conflicts_with_that_writer(
    spark: SparkSession, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    key, now = earlier_days_then_today(spark, namespace, "hot_whole")
    [planned] = [a for a in engine.recommend(key, now=now).actions if a.action is REWRITE]
    options = {name: value for name, value in planned.options.items() if name != "where"}
    whole_table = planned.model_copy(update={"options": options, "prediction": None})

    result, _ = rewrite_next_to(spark, key, whole_table, upsert_today(spark, key), tmp_path / "go")

    assert result.status == "conflict" and result.error is None  # no failure: the writer won
    assert "concurrent commit" in (result.reason or "")
