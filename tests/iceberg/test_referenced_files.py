"""Contract: the files an orphan check counts as referenced (`referenced_locations`, read with the
project's Avro readers) are exactly the files Iceberg's own metadata tables reach on the same real table:
`all_files` (live entries of every manifest of every snapshot), `all_manifests`, every manifest list and
the metadata log, plus statistics files. Formats v1, v2 and v3; position deletes and deletion vectors;
a branch with its own commit and a tag; manifests that still carry deleted entries after a compaction. A
damaged manifest fails the check with an error naming the table, and nothing is counted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import MetadataReadError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.manifest_reader import read_manifest_list
from icepack_dagster.iceberg.unreferenced_files import orphan_removal_refusals, referenced_locations
from tests.engine.safety_testkit import referenced_files
from tests.tables_testkit import local

pytestmark = pytest.mark.spark


MOR = "'write.delete.mode'='merge-on-read'"


def _create(
    spark: SparkSession, catalogs: CatalogSet, namespace: str, name: str, properties: str
) -> TableKey:
    catalogs.get("lake").create_namespace_if_not_exists(namespace)
    key = TableKey(catalog="lake", namespace=(namespace,), name=name)
    spark.sql(
        f"CREATE TABLE lake.{namespace}.{name} (id bigint, p int) USING iceberg PARTITIONED BY (p) "
        f"TBLPROPERTIES ({properties})"
    )
    return key


def _ours(catalogs: CatalogSet, key: TableKey) -> set[Path]:
    table = catalogs.get("lake").load_table(key.identifier)
    return {local(location) for location in referenced_locations(table)}


def _deleted_entries(spark: SparkSession, q: str) -> int:
    return int(spark.sql(f"SELECT count(*) FROM {q}.all_entries WHERE status = 2").collect()[0][0])


def _data_files(spark: SparkSession, relation: str) -> set[Path]:
    return {local(row[0]) for row in spark.sql(f"SELECT input_file_name() FROM {relation}").collect()}


def test_v2_with_position_deletes_a_branch_a_tag_and_a_compaction(spark, catalogs, namespace) -> None:
    key = _create(spark, catalogs, namespace, "v2", f"'format-version'='2', {MOR}")
    q = f"lake.{namespace}.v2"
    for start in (0, 20, 40):
        spark.sql(f"INSERT INTO {q} SELECT id, CAST(id % 2 AS INT) FROM range({start}, {start + 20}, 1, 2)")
    spark.sql(f"DELETE FROM {q} WHERE id IN (3, 24, 45)")
    spark.sql(f"ALTER TABLE {q} CREATE TAG before_compaction")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH audit")
    spark.sql(f"INSERT INTO {q}.branch_audit VALUES (100, 0), (101, 1)")
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{namespace}.v2', "
        "options => map('min-input-files', '2'))"
    )
    spark.sql(f"CALL lake.system.rewrite_manifests('{namespace}.v2')")

    ours = _ours(catalogs, key)

    assert ours == referenced_files(spark, catalogs, key)
    deletes = {local(row[0]) for row in spark.sql(f"SELECT file_path FROM {q}.all_delete_files").collect()}
    assert deletes and deletes <= ours
    assert _deleted_entries(spark, q) > 0


def test_v1_with_a_partition_deleted(spark, catalogs, namespace) -> None:
    key = _create(spark, catalogs, namespace, "v1", "'format-version'='1'")
    q = f"lake.{namespace}.v1"
    spark.sql(f"INSERT INTO {q} SELECT id, CAST(id % 3 AS INT) FROM range(0, 30, 1, 1)")
    spark.sql(f"INSERT INTO {q} VALUES (7, 2)")
    overwritten = _data_files(spark, f"{q} WHERE p = 0")
    # a metadata-only delete rewrites the first manifest with a deleted entry beside live ones
    spark.sql(f"DELETE FROM {q} WHERE p = 0")
    spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{namespace}.v1', "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    )

    ours = _ours(catalogs, key)

    assert ours == referenced_files(spark, catalogs, key)
    # the delete's manifest still lists the file it removed, as a deleted entry: expiry removed that
    # file, and it is not counted as referenced
    assert _deleted_entries(spark, q) > 0
    gone = {path for path in overwritten if not path.exists()}
    assert gone and not gone & ours


def test_v3_with_deletion_vectors(spark, catalogs, namespace) -> None:
    key = _create(spark, catalogs, namespace, "v3", f"'format-version'='3', {MOR}")
    q = f"lake.{namespace}.v3"
    spark.sql(f"INSERT INTO {q} SELECT id, CAST(id % 2 AS INT) FROM range(0, 20, 1, 1)")
    spark.sql(f"DELETE FROM {q} WHERE id IN (2, 5)")
    spark.sql(f"DELETE FROM {q} WHERE id = 8")

    ours = _ours(catalogs, key)

    assert ours == referenced_files(spark, catalogs, key)
    assert any(path.suffix == ".puffin" for path in ours)  # the deletion vectors' file


def test_a_damaged_manifest_fails_the_check_naming_the_table(spark, catalogs, namespace) -> None:
    key = _create(spark, catalogs, namespace, "damaged", "'format-version'='2'")
    spark.sql(f"INSERT INTO lake.{namespace}.damaged VALUES (1, 1)")
    table = catalogs.get("lake").load_table(key.identifier)
    [manifest] = read_manifest_list(table.io, table.current_snapshot().manifest_list)
    local(manifest.path).write_bytes(b"Obj\x01 not avro")

    with pytest.raises(MetadataReadError, match=f"table lake.{namespace}.damaged: its files could not"):
        orphan_removal_refusals(table, key)
