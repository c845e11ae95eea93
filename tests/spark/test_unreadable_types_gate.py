"""Contract: on the pinned Spark 3.5 and Iceberg runtime, an action on a table whose schema holds a type
this Spark cannot read (here `timestamp_ns`, added to a format v3 table by Iceberg's own Java API, since
PyIceberg does not write format v3 metadata) is refused before any statement on the table, naming the
table, the column and type, the Spark and its runtime; the status read by PyIceberg says which types the
schema holds. Nothing changes: the same metadata file, snapshots, branch and tag, and the same rows read
by PyIceberg (Spark cannot read the table). A table with an `unknown` column, which Spark reads, is
compacted as usual with its contents unchanged on main, branch and tag. A `variant` column, which
PyIceberg 0.12 has no model of, stops the status read itself with an error naming the table and the type.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.exceptions import MetadataReadError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.status_reader import collect_status
from icepack_dagster.spark.jvm_artifacts import ICEBERG_SPARK_RUNTIME
from icepack_dagster.spark.runner import MaintenanceRunner
from tests.factories import make_action
from tests.tables_testkit import arrow_fingerprint, contents_by_version, v3_table_with_column

pytestmark = [pytest.mark.spark]

A = MaintenanceAction


def test_a_table_with_a_type_spark_cannot_read_is_refused_and_untouched(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    key = v3_table_with_column(spark, namespace, "nanos", "timestamp_ns")
    catalog = catalogs.get("lake")
    before = catalog.load_table(key.identifier)
    status = collect_status(catalog, key, HealthThresholds(), datetime.now(UTC))
    assert status.schema_types == {"long": "id", "timestamp_ns": "x"}
    compaction = make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2"})

    results = MaintenanceRunner(spark, "lake").run(
        key, [compaction, make_action(A.REWRITE_MANIFESTS)], status_planned_on=status
    )

    runtime = f"Spark {spark.version}, Iceberg runtime {ICEBERG_SPARK_RUNTIME.version}"
    assert [(r.status, r.statements, r.error) for r in results] == [("refused", (), None)] * 2
    assert results[0].reason == (
        f"table {key.text}: rewrite_data_files refused: column x is of type timestamp_ns, which this Spark "
        f"({runtime}) cannot read: Spark has no type for it, so no Spark runtime of Iceberg (up to 1.11.0) "
        "reads it; maintain this table with an engine that reads the type; icepack leaves it untouched"
    )
    after = catalog.load_table(key.identifier)
    assert after.metadata_location == before.metadata_location
    assert [s.snapshot_id for s in after.snapshots()] == [s.snapshot_id for s in before.snapshots()]
    assert after.metadata.refs == before.metadata.refs
    assert arrow_fingerprint(after) == arrow_fingerprint(before)


def test_a_table_with_a_type_spark_reads_is_maintained(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    key = v3_table_with_column(spark, namespace, "unknowns", "unknown")
    status = collect_status(catalogs.get("lake"), key, HealthThresholds(), datetime.now(UTC))
    assert status.schema_types == {"long": "id", "unknown": "x"}
    contents = contents_by_version(spark, key)

    [result] = MaintenanceRunner(spark, "lake").run(
        key, [make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2"})], status_planned_on=status
    )

    assert result.status == "succeeded", result.error or result.reason
    assert result.impact.procedure_output["rewritten_data_files_count"] == 3
    after = contents_by_version(spark, key)
    assert {version: after[version] for version in contents} == contents


def test_a_variant_column_stops_the_status_read_with_the_table_and_the_type(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    key = v3_table_with_column(spark, namespace, "variants", "variant")

    with pytest.raises(MetadataReadError) as raised:
        collect_status(catalogs.get("lake"), key, HealthThresholds(), datetime.now(UTC))

    assert str(raised.value).startswith(
        f"table {key.text}: its schema holds type variant, which this PyIceberg cannot read, so icepack "
        "can neither measure nor maintain the table; nothing was changed."
    )
