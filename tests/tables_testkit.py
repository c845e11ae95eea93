"""Test helpers over real Iceberg tables: the one small-table builder every suite uses (written through
PyIceberg, so any catalog's own client and FileIO write it: embedded, PostgreSQL, REST, Glue, S3), and
the contents fingerprints (row count + order-independent checksum) that every maintenance test compares
before and after, on the table and on every snapshot, branch and tag."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

from icepack_dagster.domain.sql.procedures import qualified_table, sql_string
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.iceberg.catalogs import CatalogSet

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "p", IntegerType(), required=False),
    NestedField(3, "payload", StringType(), required=False),
)


def rows(start: int, end: int, partitions: int = 0) -> pa.Table:
    """Rows with ids `start`..`end - 1` in SCHEMA; `p = id % partitions` (0 without partitions)."""
    ids = list(range(start, end))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": pa.array([i % partitions if partitions else 0 for i in ids], pa.int32()),
            "payload": pa.array([f"row-{i}" for i in ids]),
        }
    )


def table_key(namespace: str, name: str, catalog: str = "lake") -> TableKey:
    """The key of table `name` in the one-level `namespace` of `catalog` (the embedded one by default)."""
    return TableKey(catalog=catalog, namespace=(namespace,), name=name)


def make_table(
    catalogs: CatalogSet,
    key: TableKey,
    commits: int,
    *,
    partitions: int = 0,
    rows_per_commit: int = 10,
    properties: dict[str, str] | None = None,
    location: str | None = None,
) -> TableKey:
    """Table `key`, in its catalog of `catalogs` (embedded, PostgreSQL, REST, Glue, S3), of `commits`
    appends of `rows_per_commit` rows, ids counting up; returns `key`. Written with PyIceberg (no Spark
    job), so the catalog's own client and FileIO write it: each commit writes one file per partition,
    one snapshot and one manifest. With `partitions`, identity-partitioned by `p = id % partitions`.
    Format v2 unless `properties` say otherwise; at `location` when given."""
    catalog = catalogs.get(key.catalog)
    catalog.create_namespace_if_not_exists(key.namespace)
    spec = (
        PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="p"))
        if partitions
        else PartitionSpec()
    )
    extra = {"location": location} if location else {}
    catalog.create_table(
        key.identifier, SCHEMA, partition_spec=spec, properties=properties or {"format-version": "2"}, **extra
    )
    for start in range(0, rows_per_commit * commits, rows_per_commit):
        append_rows(catalogs, key, start, start + rows_per_commit, partitions)
    return key


def append_rows(catalogs: CatalogSet, key: TableKey, start: int, end: int, partitions: int = 0) -> None:
    """One more commit of the rows `start`..`end - 1` (see `rows`) to a table `make_table` built."""
    catalogs.get(key.catalog).load_table(key.identifier).append(rows(start, end, partitions))


def spark_table_with_refs(spark: Any, namespace: str, name: str, version: int) -> TableKey:
    """Table `name` in the one-level `namespace` of the embedded catalog, created by Spark at format
    `version`: three commits of ten rows (ids 0..29, one file each), a tag `before` and a branch `audit`
    (for tests whose table must be written by Spark, as format v3 ones are: PyIceberg writes v1 and v2)."""
    key = table_key(namespace, name)
    q = qualified_table("lake", key)
    spark.sql(f"CREATE TABLE {q} (id bigint) USING iceberg TBLPROPERTIES ('format-version'='{version}')")
    for batch in range(3):
        spark.sql(f"INSERT INTO {q} SELECT id FROM range({batch * 10}, {batch * 10 + 10}, 1, 1)")
    spark.sql(f"ALTER TABLE {q} CREATE TAG before")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH audit")
    return key


def v3_table_with_column(spark: Any, namespace: str, name: str, new_type: str) -> TableKey:
    """A format v3 table of three commits, a tag and a branch, to which Iceberg's Java API (the runtime
    in this JVM) then adds column `x` of type `new_type` (timestamp_ns, variant or unknown): PyIceberg
    does not write format v3 metadata."""
    key = spark_table_with_refs(spark, namespace, name, 3)
    jvm: Any = spark._jvm
    qualified = qualified_table("lake", key)
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, qualified)
    types = jvm.org.apache.iceberg.types.Types
    column = {
        "timestamp_ns": types.TimestampNanoType.withoutZone, "variant": types.VariantType.get,
        "unknown": types.UnknownType.get,
    }[new_type]()
    table.updateSchema().addColumn("x", column).commit()
    return key


def local(path: str) -> Path:
    """The local path of a `file:` URI (or of a plain path) as Iceberg metadata records it."""
    return Path(path.removeprefix("file:").removeprefix("//"))


def table_fingerprint(spark: Any, qualified: str) -> tuple[int, str]:
    """(row count, checksum of all rows independent of order and file layout)."""
    row = spark.sql(
        f"SELECT count(*) AS n, "
        f"coalesce(sum(xxhash64(to_json(struct(*)))), 0) AS h1, "
        f"coalesce(sum(hash(to_json(struct(*)))), 0) AS h2 FROM {qualified}"
    ).collect()[0]
    return int(row["n"]), f"{row['h1']}:{row['h2']}"


def arrow_fingerprint(table: Any) -> tuple[int, str]:
    """(row count, order-independent checksum) of a PyIceberg table read through PyIceberg itself
    (deletes applied): an independent reader for tests that cannot share the test's Spark session."""
    rows = table.scan().to_arrow().to_pylist()
    digests = sorted(
        hashlib.sha256(json.dumps(r, sort_keys=True, default=str).encode()).hexdigest() for r in rows
    )
    return len(rows), hashlib.sha256("".join(digests).encode()).hexdigest()


def contents_by_version(spark: Any, table: TableKey | str) -> dict[str, tuple[int, str]]:
    """The contents fingerprint of every snapshot (by id), branch and tag (by quoted name) of `table`
    (its key, or its name as `spark` addresses it), in one Spark job."""
    q = qualified_table(table.catalog, table) if isinstance(table, TableKey) else table
    versions = [str(r[0]) for r in spark.sql(f"SELECT snapshot_id FROM {q}.snapshots").collect()]
    versions += [f"'{r[0]}'" for r in spark.sql(f"SELECT name FROM {q}.refs").collect()]
    union = " UNION ALL ".join(
        f"SELECT {sql_string(v)} AS version, count(*) AS n, "
        f"coalesce(sum(xxhash64(to_json(struct(*)))), 0) AS h1, "
        f"coalesce(sum(hash(to_json(struct(*)))), 0) AS h2 FROM {q} VERSION AS OF {v}"
        for v in versions
    )
    return {r["version"]: (int(r["n"]), f"{r['h1']}:{r['h2']}") for r in spark.sql(union).collect()}


def kept_versions(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> bool:
    """Every branch and tag, and every snapshot still present after maintenance, reads as before;
    expired snapshots are gone by design, so only the surviving ones are compared."""
    refs = {v for v in before if v.startswith("'")}
    return refs <= set(after) and all(after[v] == before[v] for v in after if v in before)
