"""Contract: snapshot expiry, as icepack runs it from a table's policy, keeps the retain-last count, the
head of every branch and the snapshot of every tag, and never deletes a file that a remaining snapshot
references, also when an earlier expiry left a gap in the snapshot chain. What it deletes is only what
no remaining version reaches, and every remaining version reads back identically.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.engine.safety_testkit import files_under, referenced_files, table_dir, wait_past_newest_snapshot
from tests.tables_testkit import append_rows, contents_by_version, make_table, table_fingerprint, table_key

pytestmark = pytest.mark.spark


def test_expiry_after_a_gap_in_the_chain_keeps_every_file_still_reached(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str
) -> None:
    key = make_table(catalogs, table_key(namespace, "gapped"), commits=2)
    q = qualified_table("lake", key)
    first_files = files_under(table_dir(catalogs, key) / "data")
    spark.sql(f"DELETE FROM {q} WHERE id = 0")  # copy-on-write: the first file leaves main for good
    for start in (20, 30, 40):
        append_rows(catalogs, key, start, start + 10)
    s = [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {q}.history ORDER BY made_current_at").collect()]
    spark.sql(f"ALTER TABLE {q} CREATE TAG kept AS OF VERSION {s[3]}")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH audit AS OF VERSION {s[3]}")
    spark.sql(f"INSERT INTO {q}.branch_audit VALUES (100, 0, 'branch only')")
    spark.sql(f"CALL lake.system.expire_snapshots(table => '{key.dotted}', snapshot_ids => array({s[4]}))")
    assert spark.sql(f"SELECT count(*) FROM {q}.snapshots WHERE snapshot_id = {s[4]}").first()[0] == 0
    branch_head = spark.sql(f"SELECT snapshot_id FROM {q}.refs WHERE name = 'audit'").first()[0]
    spark.sql(
        f"ALTER TABLE {q} SET TBLPROPERTIES "
        "('icepack.snapshot.max-age-hours'='0', 'icepack.snapshot.retain-last'='2')"
    )
    root = table_dir(catalogs, key)
    before, versions = table_fingerprint(spark, q), contents_by_version(spark, key)
    wait_past_newest_snapshot(catalogs, key)  # expiry's cutoff is whole seconds: every older snapshot is due

    report = engine.maintain(key, only=[MaintenanceAction.EXPIRE_SNAPSHOTS])

    [result] = report.results
    assert result.status == "succeeded", result.error
    assert "retain_last => 2" in result.statements[-1]
    remaining = {r[0] for r in spark.sql(f"SELECT snapshot_id FROM {q}.snapshots").collect()}
    # main's ancestry ends at the gap, so only its head survives there; the branch keeps its head and
    # one parent (the tagged snapshot, which the tag keeps anyway); the older snapshots go
    assert remaining == {s[5], s[3], branch_head}
    assert result.impact.procedure_output["deleted_data_files_count"] == 1
    assert not any(p.exists() for p in first_files - referenced_files(spark, catalogs, key))
    assert referenced_files(spark, catalogs, key) <= files_under(root)
    assert table_fingerprint(spark, q) == before
    after = contents_by_version(spark, key)
    assert after == {version: versions[version] for version in after}  # each reads as it did
    assert set(after) == {str(s[5]), str(s[3]), str(branch_head), "'main'", "'kept'", "'audit'"}
