"""Contract: with `icepack.snapshot.clean-expired-metadata=true`, expiry passes Iceberg's
`clean_expired_metadata`, and the partition specs no retained snapshot uses are gone afterwards, on
real Spark and the pinned runtime; without it they stay.

The table was partitioned by month, written, then evolved to days: compaction rewrites the month files
under the day spec (its snapshot still lists them, deleted, in a month-spec manifest; the next commit
drops it), and expiry of the snapshots before leaves the month spec unused. The table has no
branch or tag (either would keep a snapshot using the month spec); contents on main are unchanged.
"""

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
from tests.compaction_testkit import daily_table, insert_days
from tests.engine.safety_testkit import wait_past_newest_snapshot
from tests.tables_testkit import contents_by_version

pytestmark = pytest.mark.spark

EXPIRE = MaintenanceAction.EXPIRE_SNAPSHOTS


@pytest.fixture
def engine(settings: IcepackSettings, catalogs: CatalogSet, spark, tmp_path: Path) -> Engine:  # type: ignore[no-untyped-def]
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    return Engine(settings, catalogs, spark_provider=lambda: spark, history=history)


@pytest.mark.parametrize("clean", [True, False])
def test_expiry_by_policy_removes_partition_specs_no_snapshot_uses(
    spark: SparkSession, engine: Engine, catalogs: CatalogSet, namespace: str, clean: bool
) -> None:
    key = daily_table(spark, namespace, f"evolved_{clean}", days=2, files_per_day=3, earlier_spec_files=3)
    q = qualified_table("lake", key)
    spark.sql(
        f"ALTER TABLE {q} SET TBLPROPERTIES ('icepack.compaction.hot-minutes'='0', "
        "'icepack.snapshot.max-age-hours'='0', 'icepack.snapshot.retain-last'='1', "
        f"'icepack.snapshot.clean-expired-metadata'='{str(clean).lower()}')"
    )
    [[main]] = spark.sql(f"SELECT snapshot_id FROM {q}.refs WHERE name = 'main'").collect()
    engine.maintain(key, only=[MaintenanceAction.REWRITE_DATA_FILES])
    insert_days(spark, q, 10_000, 2, 2)  # a commit after it: no manifest of the month spec is left
    contents = contents_by_version(spark, key)
    assert engine.status(key).partition_spec_count == 2
    wait_past_newest_snapshot(catalogs, key)  # expiry's cutoff is whole seconds: every older snapshot is due

    recommendation = engine.recommend(key)
    [expiry] = [a for a in recommendation.actions if a.action is EXPIRE]
    assert ("clean_expired_metadata" in expiry.options) is clean
    report = engine.maintain(key, recommendation, only=[EXPIRE])

    [result] = report.results
    assert result.status == "succeeded", result.error or result.reason
    assert engine.status(key).partition_spec_count == (1 if clean else 2)
    now = contents_by_version(spark, key)
    assert {v: now[v] for v in now} == {v: contents[v] for v in now}  # every retained version, main too
    assert str(main) not in now  # the snapshot before compaction was expired
