"""Contract: one catalog, two engines. A table Spark creates is seen by PyIceberg at the same snapshot,
and a table PyIceberg creates is seen by Spark, on the embedded SQLite catalog and on PostgreSQL."""

from __future__ import annotations

import pyarrow as pa
import pytest

from icepack_dagster.iceberg.catalogs import CatalogSet

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("catalog_name", ["lake", "pg"])
def test_spark_and_pyiceberg_see_the_same_tables(spark, catalogs: CatalogSet, catalog_name: str) -> None:
    catalog = catalogs.get(catalog_name)
    catalog.create_namespace_if_not_exists("shared_view")
    spark.sql(f"CREATE TABLE {catalog_name}.shared_view.from_spark (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {catalog_name}.shared_view.from_spark VALUES (1), (2)")
    table = catalog.load_table(("shared_view", "from_spark"))
    spark_snapshot = spark.sql(
        f"SELECT snapshot_id FROM {catalog_name}.shared_view.from_spark.snapshots ORDER BY committed_at DESC"
    ).collect()[0][0]
    assert table.current_snapshot() is not None
    assert table.current_snapshot().snapshot_id == spark_snapshot

    catalog.create_table(("shared_view", "from_pyiceberg"), schema=pa.schema([("x", pa.int64())]))
    assert spark.sql(f"SELECT count(*) FROM {catalog_name}.shared_view.from_pyiceberg").collect()[0][0] == 0
    names = {r.tableName for r in spark.sql(f"SHOW TABLES IN {catalog_name}.shared_view").collect()}
    assert names == {"from_spark", "from_pyiceberg"}
