"""Contract: with `icepack.compaction.max-files-per-run`, compaction passes Iceberg's
`max-files-to-rewrite` and predicts the budget as files in; Iceberg rewrites exactly that many files and
leaves the rest for the next run, which is recommended again. Real Spark and the pinned runtime;
contents unchanged on main, branch and tag."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.history_store import HistoryStore
from tests.compaction_testkit import daily_table
from tests.tables_testkit import contents_by_version

pytestmark = pytest.mark.spark

COMPACT = MaintenanceAction.REWRITE_DATA_FILES


@pytest.fixture
def engine(settings: IcepackSettings, catalogs: CatalogSet, spark, tmp_path: Path) -> Engine:  # type: ignore[no-untyped-def]
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    return Engine(settings, catalogs, spark_provider=lambda: spark, history=history)


def test_a_per_run_budget_bounds_what_compaction_rewrites(
    spark: SparkSession, engine: Engine, namespace: str
) -> None:
    key = daily_table(spark, namespace, "budget", days=4, files_per_day=3)  # 12 small files, 4 groups
    q = qualified_table("lake", key)
    spark.sql(
        f"ALTER TABLE {q} SET TBLPROPERTIES ('icepack.compaction.hot-minutes'='0', "
        "'icepack.compaction.max-files-per-run'='5', 'icepack.cadence-hours'='0')"
    )
    spark.sql(f"ALTER TABLE {q} CREATE TAG before")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH audit")
    contents = contents_by_version(spark, key)

    recommendation = engine.recommend(key)
    [planned] = [a for a in recommendation.actions if a.action is COMPACT]
    assert planned.options["max-files-to-rewrite"] == "5"
    assert planned.prediction is not None and planned.prediction.files_in == 5
    report = engine.maintain(key, recommendation, only=[COMPACT])

    [result] = report.results
    assert result.status == "succeeded", result.error or result.reason
    judged = result.predicted_actual
    assert judged is not None and judged.done is not None and judged.done.files_in == 5 and judged.near
    assert engine.status(key).live_data_files == 12 - 5 + judged.done.files_out
    again = engine.recommend(key)
    assert COMPACT in {a.action for a in again.actions}  # the rest waits for the next run
    now = contents_by_version(spark, key)
    assert {v: now[v] for v in contents} == contents
