"""Contract: `read_light_status` measures a table from its metadata file, snapshot summary and manifest
list alone (it opens exactly one Avro file, the manifest list) and every field it fills equals the full
status of the same real table: appends, format v1, position deletes, equality deletes, branches and
tags, no snapshot, in the embedded and the PostgreSQL catalogs. Fields it cannot know are `None`: never
small files, histogram or partition count; data and delete bytes only when the table has delete files;
the delete-file split only when both kinds are present; every summary-derived field when the summary
lacks running totals or disagrees with the manifest list. Invalid input fails with an error naming
the table and the field or file.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icepack_dagster.domain.health_thresholds import HealthThresholds
from icepack_dagster.domain.status import TableStatus
from icepack_dagster.domain.table_key import TableKey
from icepack_dagster.exceptions import InvalidPolicyError, MetadataReadError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.light_status import LightStatus, read_light_status
from icepack_dagster.iceberg.status_reader import read_status
from tests.adapters.test_manifest_cache import _counted
from tests.adapters.test_status_reader import _table

pytestmark = pytest.mark.spark

THRESHOLDS = HealthThresholds()
NEVER_LIGHT = {"small_file_count", "small_file_bytes", "file_size_histogram", "partition_count"}
SPLIT = {"live_position_delete_files", "live_equality_delete_files"}
BYTES = {"live_data_bytes", "live_delete_bytes"}
SUMMARY = {"position_delete_records", "equality_delete_records", "live_file_bytes"} | SPLIT | BYTES


def measured(catalogs: CatalogSet, key: TableKey) -> tuple[LightStatus, TableStatus, list[str]]:
    """The light and the full status of one table at the same instant, and the files the light one
    opened."""
    table, io = _counted(catalogs, key)
    now = datetime.now(UTC)
    light = read_light_status(table, key, THRESHOLDS, now)
    opened = list(io.opened)
    return light, read_status(table, key, THRESHOLDS, now), opened


def unknown_fields(light: LightStatus, full: TableStatus) -> set[str]:
    """Asserts every filled field equals the full status; returns the fields left None."""
    values = light.model_dump()
    for name, value in values.items():
        if value is not None and name in TableStatus.model_fields and name != "depth":
            assert value == getattr(full, name), name
    if light.live_file_bytes is not None:
        assert light.live_file_bytes == full.live_data_bytes + full.live_delete_bytes
    if light.delete_records is not None:
        assert light.delete_records == full.position_delete_records + full.equality_delete_records
    return {name for name, value in values.items() if value is None}


CATALOGS = pytest.mark.parametrize("catalog", ["lake", "pg"])


@CATALOGS
def test_appends_fill_everything_but_entry_level_fields(spark, catalogs, namespace, catalog) -> None:
    key, qualified = _table(catalogs, catalog, namespace, "appends")
    spark.sql(f"CREATE TABLE {qualified} (id bigint, p int) USING iceberg PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {qualified} SELECT id, CAST(id % 3 AS INT) FROM range(0, 30, 1, 2)")
    spark.sql(f"INSERT INTO {qualified} VALUES (100, 1)")
    spark.sql(f"ALTER TABLE {qualified} CREATE TAG t1")
    spark.sql(f"ALTER TABLE {qualified} CREATE BRANCH b1")

    light, full, opened = measured(catalogs, key)

    assert unknown_fields(light, full) == set()
    assert (light.total_records, light.manifest_count, light.branch_count, light.tag_count) == (31, 2, 1, 1)
    assert light.live_data_bytes == full.live_data_bytes > 0 and light.depth == "light"
    table = catalogs.get(catalog).load_table(key.identifier)
    assert opened == [table.current_snapshot().manifest_list]  # type: ignore[union-attr]
    assert NEVER_LIGHT.isdisjoint(LightStatus.model_fields)


def test_format_v1_table(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "v1")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint, p string) USING iceberg PARTITIONED BY (p) "
        "TBLPROPERTIES ('format-version'='1')"
    )
    spark.sql(f"INSERT INTO {qualified} VALUES (1, 'x'), (2, 'y')")
    spark.sql(f"DELETE FROM {qualified} WHERE p = 'y'")

    light, full, _ = measured(catalogs, key)

    assert unknown_fields(light, full) == set()
    assert (light.format_version, light.live_data_files, light.total_records) == (1, 1, 1)


@CATALOGS
def test_position_deletes_leave_the_byte_split_unknown(spark, catalogs, namespace, catalog) -> None:
    key, qualified = _table(catalogs, catalog, namespace, "mor")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    spark.sql(f"INSERT INTO {qualified} SELECT id FROM range(0, 20, 1, 1)")
    spark.sql(f"DELETE FROM {qualified} WHERE id IN (3, 7)")

    light, full, _ = measured(catalogs, key)

    assert unknown_fields(light, full) == BYTES
    assert (light.live_position_delete_files, light.position_delete_records) == (1, 2)
    assert light.delete_records == 2
    assert light.live_equality_delete_files == 0 and light.delete_manifest_count == 1


def test_both_delete_kinds_leave_the_file_split_unknown(spark, catalogs, namespace) -> None:
    """Spark SQL writes position deletes; Iceberg's Java API (same JVM) commits a real equality delete."""
    key, qualified = _table(catalogs, "lake", namespace, "both")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    spark.sql(f"INSERT INTO {qualified} SELECT id FROM range(0, 10, 1, 1)")
    spark.sql(f"DELETE FROM {qualified} WHERE id = 1")
    _commit_equality_delete(spark, qualified, ids=[2, 3])

    light, full, _ = measured(catalogs, key)

    assert unknown_fields(light, full) == BYTES | SPLIT
    assert (light.position_delete_records, light.equality_delete_records) == (1, 2)
    assert full.live_position_delete_files == full.live_equality_delete_files == 1


def _commit_equality_delete(spark: Any, qualified: str, ids: list[int]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, qualified)
    location = f"{table.location()}/data/equality-deletes-{len(ids)}.parquet"
    local = Path(urlparse(location).path)
    id_field = pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})
    pq.write_table(pa.table({"id": ids}, schema=pa.schema([id_field])), local)
    field_ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
    field_ids[0] = 1
    delete_file = (
        jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec())
        .ofEqualityDeletes(field_ids).withPath(location).withFormat("PARQUET")
        .withFileSizeInBytes(local.stat().st_size).withRecordCount(len(ids)).build()
    )
    table.newRowDelta().addDeletes(delete_file).commit()
    spark.sql(f"REFRESH TABLE {qualified}")


def test_table_with_no_snapshot(catalogs, namespace, spark) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "empty")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")

    light, full, opened = measured(catalogs, key)

    no_snapshot = {"snapshot_id", "oldest_snapshot_age_seconds", "newest_snapshot_age_seconds"}
    assert unknown_fields(light, full) == no_snapshot
    assert light.live_data_files == light.manifest_count == light.live_file_bytes == 0 and opened == []


def _register_with_summary(catalog: Catalog, source: Table, identifier: tuple[str, str], edit: Any) -> Table:
    """A real catalog entry for a copy of `source`'s metadata file whose current snapshot summary was
    rewritten by `edit`: a table as a writer that keeps other (or no) running totals leaves it."""
    metadata = json.loads(Path(urlparse(source.metadata_location).path).read_text())
    current = next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])
    edit(current["summary"])
    copy = Path(urlparse(source.metadata_location).path).with_name(f"00099-{identifier[1]}.metadata.json")
    copy.write_text(json.dumps(metadata))
    return catalog.register_table(identifier, copy.as_uri())


def test_summary_totals_are_used_only_when_present_and_consistent(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "source")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {qualified} VALUES (1), (2), (3)")
    catalog = catalogs.get("lake")
    source = catalog.load_table(key.identifier)

    def drop(summary: dict[str, str]) -> None:
        summary.pop("total-files-size")

    def wrong(summary: dict[str, str]) -> None:
        summary["total-records"] = "4"

    for name, edit in (("no_totals", drop), ("wrong_totals", wrong)):
        table = _register_with_summary(catalog, source, (namespace, name), edit)
        copy = TableKey(catalog="lake", namespace=(namespace,), name=name)
        now = datetime.now(UTC)
        light = read_light_status(table, copy, THRESHOLDS, now)
        assert unknown_fields(light, read_status(table, copy, THRESHOLDS, now)) == SUMMARY
        assert light.total_records == 3 and light.live_data_files  # the manifest list still counts


def test_invalid_input_names_the_table_and_field(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "bad")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {qualified} VALUES (1)")
    spark.sql(f"ALTER TABLE {qualified} SET TBLPROPERTIES ('write.target-file-size-bytes'='big')")
    table = catalogs.get("lake").load_table(key.identifier)
    with pytest.raises(InvalidPolicyError, match=f"{key.text}.*write.target-file-size-bytes"):
        read_light_status(table, key, THRESHOLDS, datetime.now(UTC))
    with pytest.raises(ValueError, match=f"{key.text}.*timezone-aware"):
        read_light_status(table, key, THRESHOLDS, datetime(2026, 1, 1))
    spark.sql(f"ALTER TABLE {qualified} SET TBLPROPERTIES ('write.target-file-size-bytes'='1000')")
    table = catalogs.get("lake").load_table(key.identifier)
    manifest_list = table.current_snapshot().manifest_list  # type: ignore[union-attr]
    Path(urlparse(manifest_list).path).write_bytes(b"Obj\x01 truncated")
    with pytest.raises(MetadataReadError, match=f"{key.text}.*{Path(manifest_list).name}"):
        read_light_status(table, key, THRESHOLDS, datetime.now(UTC))
