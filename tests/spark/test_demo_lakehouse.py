"""Contract: the demo lakehouse builds, through Spark, six tables each in its promised shape, judged by
the real status reader and health rules: many small files, many manifests, a snapshot backlog due for
expiry, position delete files, old orphan files, and one healthy table. Every action recommended for
them renders; maintenance cuts the small-file table's data files at least tenfold and removes the
planted orphans, contents unchanged. Rebuilding replaces a table (planted orphans included)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.health.judging import (
    DELETE_FILE_BUILDUP,
    SMALL_FILES,
    SNAPSHOT_BACKLOG,
    TOO_MANY_MANIFESTS,
    assess_health,
)
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import resolve_policy
from icepack_dagster.domain.recommendation.recommender import recommend
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey, parse_table_key
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.status_reader import collect_status
from icepack_dagster.spark.demo_lakehouse import ORPHAN_PREFIX, build_demo_lakehouse
from icepack_dagster.spark.runner import MaintenanceRunner
from tests.tables_testkit import table_fingerprint

pytestmark = pytest.mark.spark

NAMESPACE = "demo_under_test"
NAMES = [
    "events_small_files",
    "orders_many_manifests",
    "clicks_snapshot_backlog",
    "customers_with_deletes",
    "logs_with_orphans",
    "dim_healthy",
]


def status(catalogs: CatalogSet, key: TableKey) -> TableStatus:
    return collect_status(catalogs.get("lake"), key, HealthThresholds(), datetime.now(UTC))


def planted_orphans(spark: SparkSession, key: TableKey) -> list[Path]:
    [row] = spark.sql(f"SELECT file_path FROM {qualified_table('lake', key)}.files LIMIT 1").collect()
    any_file: str = row[0]
    return sorted(Path(any_file.removeprefix("file:")).parent.glob(f"{ORPHAN_PREFIX}*"))


@pytest.fixture(scope="module")
def demo(spark: SparkSession, catalogs: CatalogSet) -> dict[str, tuple[TableKey, TableStatus]]:
    """The demo, built once, with each table's status right after the build."""
    catalogs.get("lake").create_namespace_if_not_exists(NAMESPACE)
    messages: list[str] = []
    created = build_demo_lakehouse(spark, "lake", NAMESPACE, on_progress=messages.append)
    assert created == [f"{NAMESPACE}.{name}" for name in NAMES]
    assert len(messages) == len(NAMES)
    keys = {name: parse_table_key(f"lake.{text}") for name, text in zip(NAMES, created, strict=True)}
    return {name: (key, status(catalogs, key)) for name, key in keys.items()}


def test_every_table_is_in_its_promised_shape(spark, demo) -> None:
    statuses = {name: s for name, (_, s) in demo.items()}
    health = {name: assess_health(s, HealthThresholds()) for name, s in statuses.items()}
    issues = {name: {i.code for i in h.issues} for name, h in health.items()}

    assert statuses["events_small_files"].live_data_files >= 40
    assert SMALL_FILES in issues["events_small_files"]
    assert statuses["orders_many_manifests"].manifest_count >= 60
    assert TOO_MANY_MANIFESTS in issues["orders_many_manifests"]
    assert statuses["clicks_snapshot_backlog"].snapshot_count >= 100
    assert SNAPSHOT_BACKLOG in issues["clicks_snapshot_backlog"]
    assert statuses["clicks_snapshot_backlog"].properties["icepack.snapshot.retain-last"] == "5"
    customers = statuses["customers_with_deletes"]
    assert customers.format_version == 2 and customers.live_position_delete_files >= 4
    assert DELETE_FILE_BUILDUP in issues["customers_with_deletes"]
    orphans = planted_orphans(spark, demo["logs_with_orphans"][0])
    three_days_ago = datetime.now().timestamp() - 3 * 86400
    assert len(orphans) == 3 and all(o.stat().st_mtime < three_days_ago for o in orphans)
    assert health["dim_healthy"].state == HealthState.HEALTHY


def test_recommended_maintenance_renders_and_fixes_the_demo(spark, catalogs: CatalogSet, demo) -> None:
    now = datetime.now(UTC)
    runner = MaintenanceRunner(spark, "lake")
    recommendations = {}
    for name, (key, _) in demo.items():
        current = status(catalogs, key)
        policy = resolve_policy(key, current.properties, ()).policy
        recommendations[name] = recommend(
            current, assess_health(current, HealthThresholds()), policy, TableHistory.empty(key.text), now
        )
        planned = runner.run(key, recommendations[name].actions, current.properties, dry_run=True)
        assert all(r.status == "dry_run" for r in planned), [r.error for r in planned]

    events = demo["events_small_files"][0]
    chosen = recommendations["events_small_files"].actions
    assert MaintenanceAction.REWRITE_DATA_FILES in {a.action for a in chosen}
    before = table_fingerprint(spark, qualified_table("lake", events))
    results = runner.run(events, chosen, {})
    assert all(r.status == "succeeded" for r in results), [r.error for r in results]
    assert status(catalogs, events).live_data_files * 10 <= demo["events_small_files"][1].live_data_files
    assert table_fingerprint(spark, qualified_table("lake", events)) == before

    logs = demo["logs_with_orphans"][0]
    recommended = recommendations["logs_with_orphans"].actions
    orphan_removal = [a for a in recommended if definition(a.action).destructive]
    before = table_fingerprint(spark, qualified_table("lake", logs))
    results = runner.run(logs, orphan_removal, {})
    [removal] = [r for r in results if r.action is MaintenanceAction.REMOVE_ORPHAN_FILES]
    assert removal.impact.orphan_files_removed == 3 and planted_orphans(spark, logs) == []
    assert table_fingerprint(spark, qualified_table("lake", logs)) == before


def test_rebuilding_replaces_a_table_with_its_planted_orphans(spark, catalogs: CatalogSet, demo) -> None:
    key = demo["logs_with_orphans"][0]
    spark.sql(f"INSERT INTO {qualified_table('lake', key)} SELECT * FROM {qualified_table('lake', key)}")
    data_dir = Path(status(catalogs, key).location.removeprefix("file:")) / "data"
    (data_dir / f"{ORPHAN_PREFIX}from-an-older-build.parquet").write_bytes(b"PAR1")

    assert build_demo_lakehouse(spark, "lake", NAMESPACE, tables=["logs_with_orphans"]) == [key.dotted]

    rebuilt = status(catalogs, key)
    assert (rebuilt.live_data_files, rebuilt.snapshot_count, rebuilt.total_records) == (3, 3, 150)
    assert [p.name for p in planted_orphans(spark, key)] == [f"{ORPHAN_PREFIX}{i}.parquet" for i in range(3)]
