"""Contract: `read_status`/`collect_status` measure a table from its Iceberg metadata alone, and every
number agrees exactly with Spark's own metadata tables (`files`, `manifests`, `partitions`, `snapshots`,
`refs`, `metadata_log_entries`) on the same real table, in the embedded SQLite and the PostgreSQL
catalogs: format v1, v2 and v3, partitioned with an evolved spec, position deletes, deletion vectors,
equality deletes, branches and tags, and a table with no snapshot. Main's numbers ignore other branches.
The schema's types are named with the first column holding each, nested fields included (what the
runtime gate checks a Spark can read). Unreadable or invalid input fails with an error naming the
table (and the field or file). Manifest
decoding and the manifest cache are pinned in tests/iceberg/test_manifest_cache.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DecimalType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
)

from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.exceptions import InvalidPolicyError, MetadataReadError, TableNotFoundError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.manifest_summary import SIZE_BUCKET_BOUNDS
from icepack_dagster.iceberg.status_reader import collect_status, schema_types

pytestmark = pytest.mark.spark

THRESHOLDS = HealthThresholds()
SMALL = 1200  # icepack.small-file-threshold-bytes for tables whose small-file split matters


def _table(catalogs: CatalogSet, catalog: str, namespace: str, name: str) -> tuple[TableKey, str]:
    catalogs.get(catalog).create_namespace_if_not_exists(namespace)
    return TableKey(catalog=catalog, namespace=(namespace,), name=name), f"{catalog}.{namespace}.{name}"


def _status(catalogs: CatalogSet, key: TableKey, now: datetime | None = None) -> TableStatus:
    return collect_status(catalogs.get(key.catalog), key, THRESHOLDS, now or datetime.now(UTC), workers=4)


def spark_facts(spark, qualified: str, small_threshold: int) -> dict[str, object]:
    """The status fields, computed by Spark from Iceberg's metadata tables."""
    def one(sql: str) -> tuple:
        return tuple(spark.sql(sql).collect()[0])

    by_content = {
        row["content"]: row
        for row in spark.sql(
            f"SELECT content, count(*) AS n, sum(file_size_in_bytes) AS bytes, sum(record_count) AS records "
            f"FROM {qualified}.files GROUP BY content"
        ).collect()
    }

    def files(content: int, column: str) -> int:
        return int(by_content[content][column]) if content in by_content else 0

    bounds = (0, *SIZE_BUCKET_BOUNDS)
    buckets = ", ".join(
        f"sum(CASE WHEN file_size_in_bytes >= {low} {f'AND file_size_in_bytes < {high}' if high else ''} "
        "THEN 1 ELSE 0 END)"
        for low, high in zip(bounds, (*SIZE_BUCKET_BOUNDS, None), strict=True)
    )
    small_n, small_bytes, *histogram = one(
        f"SELECT sum(CASE WHEN file_size_in_bytes < {small_threshold} THEN 1 ELSE 0 END), "
        f"sum(CASE WHEN file_size_in_bytes < {small_threshold} THEN file_size_in_bytes ELSE 0 END), "
        f"{buckets} FROM {qualified}.files WHERE content = 0"
    )
    manifests, manifest_bytes, data_manifests = one(
        f"SELECT count(*), sum(length), sum(CASE WHEN content = 0 THEN 1 ELSE 0 END) "
        f"FROM {qualified}.manifests"
    )
    vectors, vector_records = one(
        f"SELECT count(*), coalesce(sum(record_count), 0) FROM {qualified}.files "
        "WHERE content = 1 AND upper(file_format) = 'PUFFIN'"
    )
    refs = {r["name"]: (r["type"], r["snapshot_id"]) for r in spark.table(f"{qualified}.refs").collect()}
    return {
        "snapshot_id": refs["main"][1] if "main" in refs else None,
        "live_data_files": files(0, "n"),
        "live_data_bytes": files(0, "bytes"),
        "total_records": files(0, "records"),
        "live_position_delete_files": files(1, "n"),
        "position_delete_records": files(1, "records"),
        "live_deletion_vectors": vectors,
        "deletion_vector_records": int(vector_records),
        "live_equality_delete_files": files(2, "n"),
        "equality_delete_records": files(2, "records"),
        "live_delete_files": files(1, "n") + files(2, "n"),
        "live_delete_bytes": files(1, "bytes") + files(2, "bytes"),
        "small_file_count": int(small_n or 0),
        "small_file_bytes": int(small_bytes or 0),
        "histogram": [int(n or 0) for n in histogram],
        "manifest_count": manifests,
        "data_manifest_count": int(data_manifests or 0),
        "delete_manifest_count": manifests - int(data_manifests or 0),
        "manifest_bytes": int(manifest_bytes or 0),
        "partition_count": one(f"SELECT count(*) FROM {qualified}.partitions")[0],
        "snapshot_count": one(f"SELECT count(*) FROM {qualified}.snapshots")[0],
        # Spark lists the current metadata file too; the status counts the previous ones
        "metadata_log_entries": one(f"SELECT count(*) FROM {qualified}.metadata_log_entries")[0] - 1,
        "branch_count": sum(1 for name, (kind, _) in refs.items() if kind == "BRANCH" and name != "main"),
        "tag_count": sum(1 for kind, _ in refs.values() if kind == "TAG"),
    }


def assert_matches_spark(spark, status: TableStatus, qualified: str) -> None:
    expected = spark_facts(spark, qualified, status.small_file_threshold_bytes)
    actual = status.model_dump() | {"histogram": [b.file_count for b in status.file_size_histogram]}
    assert {name: actual[name] for name in expected} == expected
    ages = spark.sql(
        f"SELECT min(unix_millis(committed_at)), max(unix_millis(committed_at)) FROM {qualified}.snapshots"
    ).collect()[0]
    now_ms = status.collected_at.timestamp() * 1000
    if ages[0] is None:
        assert status.oldest_snapshot_age_seconds is None and status.newest_snapshot_age_seconds is None
    else:
        assert status.oldest_snapshot_age_seconds == pytest.approx((now_ms - ages[0]) / 1000, abs=1e-3)
        assert status.newest_snapshot_age_seconds == pytest.approx((now_ms - ages[1]) / 1000, abs=1e-3)


CATALOGS = pytest.mark.parametrize("catalog", ["lake", "pg"])


@CATALOGS
def test_unpartitioned_v2_with_several_appends(spark, catalogs, namespace, catalog) -> None:
    key, qualified = _table(catalogs, catalog, namespace, "appends")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint, s string) USING iceberg "
        f"TBLPROPERTIES ('format-version'='2', 'icepack.small-file-threshold-bytes'='{SMALL}')"
    )
    spark.sql(f"INSERT INTO {qualified} VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"INSERT INTO {qualified} VALUES (3, 'c')")
    spark.sql(f"INSERT INTO {qualified} SELECT id, uuid() FROM range(0, 60000, 1, 1)")  # one file > 1 MiB

    status = _status(catalogs, key)

    assert_matches_spark(spark, status, qualified)
    assert (status.total_records, status.manifest_count, status.snapshot_count) == (60003, 3, 3)
    assert 0 < status.small_file_count < status.live_data_files  # the threshold property splits them
    assert status.file_size_histogram[1].file_count == 1 and status.file_size_histogram[1].label == "1-8 MiB"
    assert status.small_file_threshold_bytes == SMALL and status.format_version == 2
    assert status.properties["icepack.small-file-threshold-bytes"] == str(SMALL)


@CATALOGS
def test_partitioned_with_evolved_spec(spark, catalogs, namespace, catalog) -> None:
    key, qualified = _table(catalogs, catalog, namespace, "evolved")
    spark.sql(f"CREATE TABLE {qualified} (id bigint, cat string) USING iceberg PARTITIONED BY (cat)")
    spark.sql(f"INSERT INTO {qualified} VALUES (1, 'a'), (2, 'b'), (3, 'b')")
    spark.sql(f"ALTER TABLE {qualified} ADD PARTITION FIELD bucket(4, id)")
    spark.sql(f"INSERT INTO {qualified} VALUES (10, 'a'), (11, 'a'), (12, 'c'), (13, 'c')")

    status = _status(catalogs, key)

    assert_matches_spark(spark, status, qualified)
    assert status.partition_spec_count == 2
    distinct = spark.sql(f"SELECT count(DISTINCT spec_id, partition) FROM {qualified}.files").collect()[0][0]
    assert status.partition_count == distinct > 2


@CATALOGS
def test_format_v1_table(spark, catalogs, namespace, catalog) -> None:
    key, qualified = _table(catalogs, catalog, namespace, "v1")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint, p string) USING iceberg PARTITIONED BY (p) "
        "TBLPROPERTIES ('format-version'='1')"
    )
    spark.sql(f"INSERT INTO {qualified} VALUES (1, 'x'), (2, 'y')")
    spark.sql(f"INSERT INTO {qualified} VALUES (3, 'x')")
    spark.sql(f"DELETE FROM {qualified} WHERE p = 'y'")  # leaves a DELETED entry in a manifest

    status = _status(catalogs, key)

    assert_matches_spark(spark, status, qualified)
    assert (status.format_version, status.total_records, status.partition_count) == (1, 2, 1)


@CATALOGS
def test_position_deletes_from_merge_on_read_delete(spark, catalogs, namespace, catalog) -> None:
    key, qualified = _table(catalogs, catalog, namespace, "mor")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    spark.sql(f"INSERT INTO {qualified} SELECT id FROM range(0, 20, 1, 1)")
    spark.sql(f"DELETE FROM {qualified} WHERE id IN (3, 7)")

    status = _status(catalogs, key)

    assert_matches_spark(spark, status, qualified)
    assert (status.live_position_delete_files, status.position_delete_records) == (1, 2)
    assert status.delete_manifest_count == 1 and status.live_delete_bytes > 0


def test_deletion_vectors_in_format_v3(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "v3")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint) USING iceberg "
        "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read')"
    )
    spark.sql(f"INSERT INTO {qualified} SELECT id FROM range(0, 10, 1, 1)")
    spark.sql(f"DELETE FROM {qualified} WHERE id = 4")

    status = _status(catalogs, key)

    assert_matches_spark(spark, status, qualified)
    assert status.format_version == 3
    assert (status.live_position_delete_files, status.position_delete_records) == (1, 1)
    assert (status.live_deletion_vectors, status.deletion_vector_records) == (1, 1)


@CATALOGS
def test_equality_deletes_committed_through_the_iceberg_api(spark, catalogs, namespace, catalog) -> None:
    """Spark SQL never writes equality deletes; Iceberg's Java API (in the same JVM) commits a real one."""
    key, qualified = _table(catalogs, catalog, namespace, "eq")
    spark.sql(f"CREATE TABLE {qualified} (id bigint, v string) USING iceberg")
    spark.sql(f"INSERT INTO {qualified} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, qualified)
    location = f"{table.location()}/data/equality-deletes-1.parquet"
    local = Path(urlparse(location).path)
    id_field = pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})
    pq.write_table(pa.table({"id": [2, 3]}, schema=pa.schema([id_field])), local)
    field_ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
    field_ids[0] = 1
    delete_file = (
        jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec())
        .ofEqualityDeletes(field_ids).withPath(location).withFormat("PARQUET")
        .withFileSizeInBytes(local.stat().st_size).withRecordCount(2).build()
    )
    table.newRowDelta().addDeletes(delete_file).commit()
    spark.sql(f"REFRESH TABLE {qualified}")
    assert spark.sql(f"SELECT id FROM {qualified}").collect() == [(1,)]  # the deletes are live

    status = _status(catalogs, key)

    assert_matches_spark(spark, status, qualified)
    assert (status.live_equality_delete_files, status.equality_delete_records) == (1, 2)
    assert status.live_position_delete_files == 0


@CATALOGS
def test_branch_and_tag_are_counted_and_main_stays_main(spark, catalogs, namespace, catalog) -> None:
    key, qualified = _table(catalogs, catalog, namespace, "refs")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {qualified} VALUES (1), (2)")
    spark.sql(f"ALTER TABLE {qualified} CREATE TAG release_1")
    spark.sql(f"ALTER TABLE {qualified} CREATE BRANCH audit")
    spark.sql(f"INSERT INTO {qualified}.branch_audit VALUES (3), (4), (5)")

    status = _status(catalogs, key)

    assert_matches_spark(spark, status, qualified)
    assert (status.branch_count, status.tag_count) == (1, 1)
    assert (status.total_records, status.snapshot_count) == (2, 2)  # the branch's 3 rows are not main's


@CATALOGS
def test_table_with_no_snapshot(spark, catalogs, namespace, catalog) -> None:
    key, qualified = _table(catalogs, catalog, namespace, "empty")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")

    status = _status(catalogs, key)

    assert_matches_spark(spark, status, qualified)
    assert status.snapshot_id is None and status.snapshot_count == 0
    assert status.oldest_snapshot_age_seconds is None and status.newest_snapshot_age_seconds is None
    assert status.live_data_files == status.manifest_count == status.partition_count == 0
    assert status.partition_spec_count == 1 and sum(b.file_count for b in status.file_size_histogram) == 0


def test_agrees_with_pyiceberg_inspect(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "inspected")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint, p int) USING iceberg PARTITIONED BY (p) "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    spark.sql(f"INSERT INTO {qualified} SELECT id, CAST(id % 3 AS INT) FROM range(0, 30, 1, 2)")
    spark.sql(f"DELETE FROM {qualified} WHERE id = 5")
    table = catalogs.get("lake").load_table(key.identifier)
    files = table.inspect.files().to_pylist()
    manifests = table.inspect.manifests().to_pylist()

    status = _status(catalogs, key)

    data = [f for f in files if f["content"] == 0]
    deletes = [f for f in files if f["content"] != 0]
    assert status.live_data_files == len(data) and status.live_delete_files == len(deletes) > 0
    assert status.live_data_bytes == sum(f["file_size_in_bytes"] for f in data)
    assert status.live_delete_bytes == sum(f["file_size_in_bytes"] for f in deletes)
    assert status.total_records == sum(f["record_count"] for f in data) == 30
    assert status.partition_count == len({(f["spec_id"], tuple(f["partition"].items())) for f in data}) == 3
    assert status.manifest_count == len(manifests)
    assert status.manifest_bytes == sum(m["length"] for m in manifests)


def test_missing_table_is_reported_by_name(catalogs, namespace) -> None:
    key = TableKey(catalog="lake", namespace=(namespace,), name="never_created")
    with pytest.raises(TableNotFoundError, match=f"lake.{namespace}.never_created"):
        _status(catalogs, key)


def test_unreadable_manifest_names_table_and_file(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "damaged")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {qualified} VALUES (1)")
    manifest = spark.sql(f"SELECT path FROM {qualified}.manifests").collect()[0][0]
    Path(urlparse(manifest).path).write_bytes(b"Obj\x01 truncated")
    with pytest.raises(MetadataReadError, match=f"lake.{namespace}.damaged.*{Path(manifest).name}"):
        _status(catalogs, key)


@pytest.mark.parametrize(
    ("prop", "value"),
    [
        ("write.target-file-size-bytes", "large"),
        ("write.target-file-size-bytes", "1_000"),  # Java's Long.parseLong refuses it, so does Iceberg
        ("icepack.small-file-threshold-bytes", "0"),
        ("icepack.small-file-threshold-bytes", "1_000"),  # icepack.* numbers: plain ASCII digits only
        ("icepack.small-file-threshold-bytes", "１０００"),
    ],
)
def test_invalid_size_property_names_table_and_field(spark, catalogs, namespace, prop, value) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "badprops")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg TBLPROPERTIES ('{prop}'='{value}')")
    with pytest.raises(InvalidPolicyError, match=f"lake.{namespace}.badprops.*{prop}") as raised:
        _status(catalogs, key)
    assert (raised.value.table, raised.value.field) == (key.text, prop)


def test_naive_now_is_refused(catalogs, namespace) -> None:
    key = TableKey(catalog="lake", namespace=(namespace,), name="any")
    catalogs.get("lake").create_table(key.identifier, schema=pa.schema([("x", pa.int64())]))
    with pytest.raises(ValueError, match="timezone-aware"):
        _status(catalogs, key, now=datetime(2026, 1, 1))


def test_schema_types_name_each_type_once_with_its_first_column() -> None:
    schema = Schema(
        NestedField(1, "id", LongType()),
        NestedField(2, "amount", DecimalType(10, 2)),
        NestedField(3, "event", StructType(
            NestedField(5, "at", TimestampNanoType()), NestedField(6, "n", LongType())
        )),
        NestedField(4, "tags", ListType(7, StringType())),
        NestedField(8, "price", DecimalType(12, 4)),
    )
    assert schema_types(schema) == {
        "long": "id", "decimal": "amount", "timestamp_ns": "event.at", "string": "tags.element"
    }
