"""The whole platform loop with no one clicking, on real Spark, real Iceberg tables and a real Dagster
instance: discovery adds the table as a partition and asks for its first health sync; health sync
finds it critical (small files); the maintenance sensor launches one maintenance run for it; the run
compacts it on Spark with identical contents (row count and checksum) and records the impact; the
post-maintenance sensor re-measures it (healthy), the maintenance sensor launches nothing more, and the
fleet refresh that follows shows the result, also in its Prometheus file. A quarantined table is not
touched and says why in its metadata."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import dagster as dg
import pytest

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.maintenance.unreferenced_report import (
    UNREFERENCED_KEPT_BYTES,
    UNREFERENCED_KEPT_FILES,
    UNREFERENCED_REMOVABLE_BYTES,
    UNREFERENCED_REMOVABLE_FILES,
)
from icepack_dagster.defs.materialization_codec import OUTCOME, decode_report
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from tests.defs.dagster_testkit import (
    after_run,
    apply_partition_requests,
    evaluate_sensor,
    execute_run_request,
    latest_health,
    record_failures,
    sync_request,
)
from tests.factories import settings_with_platform
from tests.tables_testkit import table_fingerprint

pytestmark = pytest.mark.spark


@pytest.fixture
def scoped_settings(settings: IcepackSettings, namespace: str) -> IcepackSettings:
    return settings.model_copy(update={"include": [f"lake.{namespace}.*"]})


@pytest.fixture
def defs(scoped_settings: IcepackSettings, tmp_path: Path) -> dg.Definitions:
    return build_definitions(
        settings_with_platform(
            scoped_settings, PlatformSettings(fleet_metrics_path=tmp_path / "metrics" / "icepack.prom")
        )
    )


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as test_instance:
        yield test_instance


def small_files_table(spark, qualified: str, inserts: int) -> None:  # type: ignore[no-untyped-def]
    spark.sql(f"CREATE TABLE {qualified} (id BIGINT, name STRING) USING iceberg")
    for i in range(inserts):
        spark.sql(f"INSERT INTO {qualified} VALUES ({i}, 'row {i}')")


def test_unhealthy_table_is_maintained_without_a_click(
    spark,
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    namespace: str,
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    qualified = f"lake.{namespace}.events"
    partition = qualified
    small_files_table(spark, qualified, inserts=12)
    before = table_fingerprint(spark, qualified)

    discovered = evaluate_sensor(defs, "iceberg_table_discovery", instance)
    apply_partition_requests(instance, discovered)
    assert list(instance.get_dynamic_partitions("iceberg_tables")) == [partition]
    (first_sync,) = discovered.run_requests
    assert execute_run_request(defs, instance, first_sync, "health_sync").success
    assert latest_health(instance, partition).state == "critical"

    decided = evaluate_sensor(defs, "maintenance_sensor", instance)
    (request,) = decided.run_requests
    maintenance = execute_run_request(defs, instance, request, "maintenance")
    assert maintenance.success
    assert maintenance.dagster_run.tags["icepack/table"] == partition

    (event,) = maintenance.asset_materializations_for_node("maintained_table")
    metadata = event.metadata
    assert metadata[OUTCOME].value == "succeeded"
    assert metadata["data_files_before"].value == 12
    assert metadata["data_files_after"].value < 12
    assert metadata["files_reclaimed"].value >= 11
    assert metadata["duration_seconds"].value > 0
    report = decode_report(metadata)
    assert report is not None and any(
        r.action is MaintenanceAction.REWRITE_DATA_FILES for r in report.results
    )
    (check,) = maintenance.get_asset_check_evaluations()
    assert check.check_name == "healthy_after_maintenance" and check.passed
    assert check.partition == partition  # one result per table, not one overwriting the last
    (recommended,) = maintenance.asset_materializations_for_node("maintenance_recommendation")
    assert recommended.metadata["needs_work"].value is True
    assert table_fingerprint(spark, qualified) == before

    remeasure = after_run(defs, "post_maintenance_health_sensor", instance, maintenance)
    assert sync_request(remeasure) == ([partition], "all")
    fleet_before = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    synced = execute_run_request(defs, instance, remeasure, "health_sync")
    assert synced.success
    assert latest_health(instance, partition).state == "healthy"
    quiet = evaluate_sensor(defs, "maintenance_sensor", instance, cursor=decided.cursor)
    assert not quiet.run_requests

    refresh = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=fleet_before.cursor)
    assert refresh.get_num_requested(DEFAULT_NAMES.fleet_summary) == 1, "refreshed after the sync"
    fleet = defs.resolve_job_def("fleet_refresh").execute_in_process(instance=instance)
    (summary,) = fleet.asset_materializations_for_node("fleet_summary")
    assert summary.metadata["tables_healthy"].value == 1
    assert summary.metadata["files_reclaimed_total"].value >= 11
    # Planned against done across the fleet's recorded runs: this run's compaction is counted.
    rows = {r.data["action"]: r.data for r in summary.metadata["prediction_accuracy"].records}
    compaction = rows["rewrite_data_files"]
    assert compaction["runs"] >= 1 and compaction["done_files_in"] >= 12
    prom = (tmp_path / "metrics" / "icepack.prom").read_text()
    assert 'icepack_tables{state="healthy"} 1' in prom
    assert f'icepack_table_health{{table="{partition}"}} 0' in prom


def test_quarantined_table_is_left_alone_and_says_why(
    spark,
    defs: dg.Definitions,
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    namespace: str,  # type: ignore[no-untyped-def]
) -> None:
    qualified = f"lake.{namespace}.stuck"
    small_files_table(spark, qualified, inserts=10)
    before = table_fingerprint(spark, qualified)
    record_failures(scoped_settings, qualified, 3, days_ago=5)
    discovered = evaluate_sensor(defs, "iceberg_table_discovery", instance)
    apply_partition_requests(instance, discovered)
    assert execute_run_request(defs, instance, discovered.run_requests[0], "health_sync").success
    decided = evaluate_sensor(defs, "maintenance_sensor", instance)
    assert not decided.run_requests
    assert "quarantined after 3 consecutive failures" in decided.skip_reason.skip_message

    manual = defs.resolve_job_def("maintenance").execute_in_process(
        instance=instance, partition_key=qualified
    )
    assert manual.success
    (recommended,) = manual.asset_materializations_for_node("maintenance_recommendation")
    assert recommended.metadata["quarantined"].value is True
    assert "disk full" in recommended.metadata["last_error"].value
    (maintained,) = manual.asset_materializations_for_node("maintained_table")
    assert maintained.metadata[OUTCOME].value == "nothing_to_do"
    assert maintained.metadata["quarantined"].value is True
    assert table_fingerprint(spark, qualified) == before


def test_a_healthy_table_with_old_orphans_is_swept_weekly(
    spark,
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs,
    namespace: str,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """Orphans cannot be seen in metadata, so the table stays healthy; with `orphan_sweep` on, the
    maintenance sensor still launches its orphan removal once its weekly cadence is due, after any
    unhealthy table, and only orphans older than the policy age go. Contents stay identical."""
    qualified = f"lake.{namespace}.quiet"
    small_files_table(spark, qualified, inserts=2)
    before = table_fingerprint(spark, qualified)
    table = catalogs.get("lake").load_table(f"{namespace}.quiet")
    data_file = Path(urlparse(next(iter(table.inspect.files()["file_path"].to_pylist()))).path)
    old, young = data_file.with_name("crashed-write-old.parquet"), data_file.with_name("in-flight.parquet")
    for orphan in (old, young):
        shutil.copy(data_file, orphan)
    os.utime(old, (time.time() - 5 * 24 * 3600,) * 2)  # older than the default orphan age of 3 days

    platform = PlatformSettings(orphan_sweep=True, fleet_metrics_path=tmp_path / "icepack.prom")
    defs = build_definitions(settings_with_platform(scoped_settings, platform))
    discovered = evaluate_sensor(defs, "iceberg_table_discovery", instance)
    apply_partition_requests(instance, discovered)
    (first_sync,) = discovered.run_requests
    assert execute_run_request(defs, instance, first_sync, "health_sync").success
    assert latest_health(instance, qualified).state == "healthy"

    without_sweep = build_definitions(settings_with_platform(scoped_settings, PlatformSettings()))
    off = evaluate_sensor(without_sweep, "maintenance_sensor", instance)
    assert not off.run_requests, "without the sweep a healthy table is never maintained"
    decided = evaluate_sensor(defs, "maintenance_sensor", instance)
    (request,) = decided.run_requests
    maintenance = execute_run_request(defs, instance, request, "maintenance")
    assert maintenance.success
    report = decode_report(maintenance.asset_materializations_for_node("maintained_table")[0].metadata)
    assert report is not None
    assert [r.action for r in report.results if r.status == "succeeded"] == [
        MaintenanceAction.REMOVE_ORPHAN_FILES
    ]
    assert not old.exists() and young.exists()
    assert table_fingerprint(spark, qualified) == before
    left = maintenance.asset_materializations_for_node("maintained_table")[0].metadata
    assert left[UNREFERENCED_KEPT_FILES].value == 1, "the young orphan stays, and is reported"
    assert left[UNREFERENCED_KEPT_BYTES].value == young.stat().st_size
    assert left[UNREFERENCED_REMOVABLE_FILES].value == 0 and left[UNREFERENCED_REMOVABLE_BYTES].value == 0

    again = evaluate_sensor(defs, "maintenance_sensor", instance, cursor=decided.cursor)
    assert not again.run_requests, "the weekly cadence holds the next sweep back"
