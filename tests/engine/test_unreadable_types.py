"""Contract: through the engine (what `icepack maintain` and the Dagster job run), a table whose schema
holds a type the Spark cannot read (`timestamp_ns`) is planned on its PyIceberg status, and its
maintenance is `refused` (recorded, naming the column and type), with the table untouched: the same
metadata file and snapshots, the same rows read by PyIceberg."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.factories import make_action, make_recommendation
from tests.tables_testkit import arrow_fingerprint, v3_table_with_column

pytestmark = [pytest.mark.spark]


def test_the_engine_records_a_refusal_for_a_table_spark_cannot_read(
    spark: SparkSession, engine: Engine, catalogs: CatalogSet, namespace: str
) -> None:
    key = v3_table_with_column(spark, namespace, "nanos", "timestamp_ns")
    before = catalogs.get("lake").load_table(key.identifier)
    assert engine.status(key).schema_types["timestamp_ns"] == "x"
    compaction = make_action(MaintenanceAction.REWRITE_DATA_FILES, **{"min-input-files": "2"})

    report = engine.maintain(key, make_recommendation(compaction, table=key.text))

    assert report.outcome == "refused"
    [result] = report.results
    assert result.status == "refused" and "column x is of type timestamp_ns" in (result.reason or "")
    recorded = engine.history_store.last_maintenance(key.text)
    assert recorded is not None and recorded.outcome == "refused"
    after = catalogs.get("lake").load_table(key.identifier)
    assert after.metadata_location == before.metadata_location
    assert [s.snapshot_id for s in after.snapshots()] == [s.snapshot_id for s in before.snapshots()]
    assert arrow_fingerprint(after) == arrow_fingerprint(before)
