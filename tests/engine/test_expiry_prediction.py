"""Contract: the expiry icepack predicts is the one Iceberg does, snapshot by snapshot, on a table with
branches and tags: main keeps the call's `retain_last`, a branch created WITH SNAPSHOT RETENTION keeps
its own count, another branch keeps the call's count from its own head, a tag keeps its snapshot, and
everything else older than `older_than` goes. The prediction is exact (the number of manifest lists
Iceberg deletes), the outcome is recorded as planned = done, and every ref reads back identically.
Run on the embedded SQLite catalog and on the PostgreSQL-backed one.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.engine.safety_testkit import wait_past_newest_snapshot
from tests.tables_testkit import contents_by_version, make_table, table_key

pytestmark = pytest.mark.spark

EXPIRE = MaintenanceAction.EXPIRE_SNAPSHOTS


@pytest.mark.parametrize("catalog", ["lake", "pg"])
def test_expiry_is_predicted_per_branch_and_tag_as_iceberg_does_it(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str, catalog: str
) -> None:
    key = make_table(catalogs, table_key(namespace, "refs_retention", catalog), commits=8)
    q = qualified_table(catalog, key)
    s = [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {q}.history ORDER BY made_current_at").collect()]
    spark.sql(f"ALTER TABLE {q} CREATE TAG old_tag AS OF VERSION {s[1]}")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH audit AS OF VERSION {s[2]} WITH SNAPSHOT RETENTION 3 SNAPSHOTS")
    for n in range(3):
        spark.sql(f"INSERT INTO {q}.branch_audit VALUES ({1000 + n}, 0, 'audit')")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH short AS OF VERSION {s[4]}")
    audit = [
        r[0] for r in spark.sql(
            f"SELECT snapshot_id FROM {q}.snapshots WHERE snapshot_id NOT IN ({', '.join(map(str, s))})"
        ).collect()
    ]
    spark.sql(
        f"ALTER TABLE {q} SET TBLPROPERTIES "
        "('icepack.snapshot.max-age-hours'='0', 'icepack.snapshot.retain-last'='2')"
    )
    wait_past_newest_snapshot(catalogs, key)
    refs = {r[0] for r in spark.sql(f"SELECT name FROM {q}.refs").collect()}
    contents = {v: c for v, c in contents_by_version(spark, key).items() if v.strip("'") in refs}
    # main keeps s7, s6; short keeps s4, s3; audit keeps its 3 own commits; the tag keeps s1
    expected_expired = {s[0], s[2], s[5]}

    recommendation = engine.recommend(key)
    [planned] = [a for a in recommendation.actions if a.action is EXPIRE]
    assert planned.prediction is not None and planned.prediction.exact
    assert planned.prediction.files_in == len(expected_expired)
    assert planned.options["retain_last"] == "2"
    assert "3 of 11 snapshots would be expired" in planned.reason and "audit" in planned.reason

    report = engine.maintain(key, recommendation, only=[EXPIRE])

    [result] = report.results
    assert result.status == "succeeded", result.error or result.reason
    judged = result.predicted_actual
    assert judged is not None and judged.done is not None and judged.near
    assert judged.done.files_in == len(expected_expired)
    remaining = {r[0] for r in spark.sql(f"SELECT snapshot_id FROM {q}.snapshots").collect()}
    assert remaining == (set(s) | set(audit)) - expected_expired
    after = contents_by_version(spark, key)
    assert {v: after[v] for v in contents} == contents  # main, both branches and the tag
    [accuracy] = [a for a in engine.accuracy(key) if a.action == EXPIRE.value]
    assert (accuracy.planned_files_in, accuracy.done_files_in) == (3, 3)
