"""Contract: on format v3 tables, deletion vectors are told from position delete files by the manifests,
and what `recommend` predicts for deletes is what `maintain` then does, on real Spark and Iceberg.

- A v2 merge-on-read table (3 day partitions, 18 data files, 18 Parquet position delete files) upgraded
  with `'format-version'='3'`: status counts 18 position delete files and no deletion vector, as Spark's
  `delete_files` table lists them; `recommend` plans `rewrite_position_delete_files` over all 18 (not
  "deletion vectors already"); `maintain` runs every recommended action and leaves 18 deletion vectors
  and no Parquet delete file; each prediction is near what Iceberg did; the next recommendation has no
  position delete rewrite (it would do nothing); contents are unchanged on main, branch, tag and every
  snapshot.
- A v3 table with deletion vectors over ten partitions, three of which lose half their rows: status
  reads the vectors' deleted rows from the manifests (no Puffin read); health measures the deleted-row
  share; compaction is planned with `delete-ratio-threshold` for exactly those three partitions and
  Iceberg rewrites exactly those; the rewrite keeps row lineage (`_row_id` and
  `_last_updated_sequence_number` of every row are unchanged) and contents everywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.health.judging import DELETE_FILE_BUILDUP
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.history_store import HistoryStore
from tests.compaction_testkit import daily_table, insert_days
from tests.tables_testkit import contents_by_version

pytestmark = pytest.mark.spark

REWRITE_DELETES = MaintenanceAction.REWRITE_POSITION_DELETE_FILES
REWRITE_DATA = MaintenanceAction.REWRITE_DATA_FILES


@pytest.fixture
def engine(settings: IcepackSettings, catalogs: CatalogSet, spark, tmp_path: Path) -> Engine:  # type: ignore[no-untyped-def]
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    return Engine(settings, catalogs, spark_provider=lambda: spark, history=history)


def delete_files_by_format(spark: SparkSession, key: TableKey) -> dict[str, int]:
    """Live delete files per file format, as Spark's `delete_files` metadata table lists them."""
    rows = spark.sql(
        f"SELECT file_format, count(*) AS n FROM {qualified_table('lake', key)}.delete_files GROUP BY 1"
    ).collect()
    return {row["file_format"]: row["n"] for row in rows}


def upgraded_table(spark: SparkSession, namespace: str) -> TableKey:
    """Six inserts over three days (one data file per day each), then one single-row DELETE in each of
    the 18 data files under merge-on-read (18 file-scoped Parquet delete files), then format v3 (and
    no cadence, so the recommendation right after maintenance says what is left to do)."""
    key = daily_table(spark, namespace, "upgraded", days=3, files_per_day=6)
    q = qualified_table("lake", key)
    spark.sql(f"ALTER TABLE {q} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    for insert in range(6):
        for day in range(3):
            spark.sql(f"DELETE FROM {q} WHERE id = {insert * 60 + day}")  # insert k wrote ids 60k..60k+59
    spark.sql(f"ALTER TABLE {q} SET TBLPROPERTIES ('format-version'='3', 'icepack.cadence-hours'='0')")
    spark.sql(f"ALTER TABLE {q} CREATE TAG upgraded")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH audit")
    return key


def test_position_delete_files_an_upgrade_left_become_deletion_vectors_as_predicted(
    spark: SparkSession, engine: Engine, namespace: str
) -> None:
    key = upgraded_table(spark, namespace)
    contents = contents_by_version(spark, key)
    assert delete_files_by_format(spark, key) == {"PARQUET": 18}
    status = engine.status(key)
    assert (status.format_version, status.live_data_files) == (3, 18)
    assert (status.live_position_delete_files, status.live_deletion_vectors) == (18, 0)

    recommendation = engine.recommend(key)
    [planned] = [a for a in recommendation.actions if a.action is REWRITE_DELETES]
    assert planned.reason.startswith("18 position delete files left from format v2")
    assert planned.options == {"rewrite-all": "true"}
    prediction = planned.prediction
    assert prediction is not None
    assert [(g.partition, g.files_in) for g in prediction.groups] == [
        (f"ts_day=2026-11-0{day}", 6) for day in (1, 2, 3)
    ]

    report = engine.maintain(key, recommendation)

    planned_actions = {a.action for a in recommendation.actions}
    for result in (r for r in report.results if r.action in planned_actions):
        assert result.status == "succeeded", (result.action, result.error or result.reason)
        judged = result.predicted_actual
        assert judged is None or judged.near, (result.action, judged)
    [converted] = [r for r in report.results if r.action is REWRITE_DELETES]
    assert converted.predicted_actual is not None and converted.predicted_actual.done is not None
    assert (converted.predicted_actual.done.files_in, converted.predicted_actual.done.files_out) == (18, 18)
    assert delete_files_by_format(spark, key) == {"PUFFIN": 18}
    after = engine.status(key)
    assert (after.live_position_delete_files, after.live_deletion_vectors) == (18, 18)
    assert after.deletion_vector_records == 18
    again = engine.recommend(key)
    assert REWRITE_DELETES not in {a.action for a in again.actions}
    [skipped] = [s for s in again.skipped if s.action is REWRITE_DELETES]
    assert "18 deletion vectors (Puffin, as the manifests list them)" in skipped.reason
    now = contents_by_version(spark, key)
    assert {v: now[v] for v in contents} == contents  # main, branch, tag and every snapshot


def lineage(spark: SparkSession, key: TableKey) -> dict[int, tuple[int, int]]:
    """Every live row's `_row_id` and `_last_updated_sequence_number`, by id."""
    rows = spark.sql(
        f"SELECT id, _row_id, _last_updated_sequence_number AS seq FROM {qualified_table('lake', key)}"
    ).collect()
    return {row["id"]: (row["_row_id"], row["seq"]) for row in rows}


def test_deletion_vectors_drive_compaction_by_deleted_row_share_and_keep_row_lineage(
    spark: SparkSession, engine: Engine, namespace: str
) -> None:
    key = TableKey(catalog="lake", namespace=(namespace,), name="vectors")
    q = qualified_table("lake", key)
    spark.sql(
        f"CREATE TABLE {q} (id bigint, ts timestamp, payload string) USING iceberg PARTITIONED BY (days(ts)) "
        "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read', "
        "'icepack.compaction.hot-minutes'='0')"
    )
    insert_days(spark, q, 0, 200, 10)  # ten day partitions of 20 rows, one data file each
    spark.sql(f"DELETE FROM {q} WHERE id % 10 IN (0, 1, 2) AND id % 20 >= 10")  # half of days 0-2
    spark.sql(f"DELETE FROM {q} WHERE id IN (3, 4, 5, 6)")  # one row of days 3-6
    spark.sql(f"ALTER TABLE {q} CREATE TAG with_vectors")
    contents = contents_by_version(spark, key)
    rows_before = lineage(spark, key)
    assert delete_files_by_format(spark, key) == {"PUFFIN": 7}
    [[deleted]] = spark.sql(f"SELECT sum(record_count) FROM {q}.delete_files").collect()

    status = engine.status(key)
    assert (status.live_deletion_vectors, status.deletion_vector_records) == (7, deleted) == (7, 34)
    assert status.leftover_position_delete_files == 0
    health = engine.health(status)
    [issue] = [i for i in health.issues if i.code == DELETE_FILE_BUILDUP]
    assert issue.metric == "deleted_row_share" and issue.value == pytest.approx(34 / 200)

    recommendation = engine.recommend(key)
    [compaction] = [a for a in recommendation.actions if a.action is REWRITE_DATA]
    assert compaction.options["delete-ratio-threshold"] == "0.3"
    assert "delete-file-threshold" not in compaction.options
    prediction = compaction.prediction
    assert prediction is not None
    assert [(g.partition, g.files_in) for g in prediction.groups] == [
        (f"ts_day=2026-11-0{day}", 1) for day in (1, 2, 3)
    ]
    assert REWRITE_DELETES not in {a.action for a in recommendation.actions}

    report = engine.maintain(key, recommendation, only=[REWRITE_DATA])

    [result] = report.results
    assert result.status == "succeeded", result.error or result.reason
    assert result.predicted_actual is not None and result.predicted_actual.near
    assert result.predicted_actual.done is not None and result.predicted_actual.done.files_in == 3
    assert delete_files_by_format(spark, key) == {"PUFFIN": 4}  # the light vectors are kept
    assert lineage(spark, key) == rows_before
    now = contents_by_version(spark, key)
    assert {v: now[v] for v in contents} == contents
