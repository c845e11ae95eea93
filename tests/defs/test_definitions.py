"""The code location: `build_definitions` assembles a loadable `Definitions` from one settings object;
the lineage is table_status → table_health → maintenance_recommendation → maintained_table, all four
partitioned by the one `iceberg_tables` dynamic partitions definition; sensors and the schedule start
running without a click; importing the module reads no environment; the workspace file loads."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.partitions import TABLE_PARTITIONS
from icepack_dagster.exceptions import ConfigurationError
from tests.factories import settings_with_platform

REPO = Path(__file__).resolve().parents[2]
LINEAGE = ["table_status", "table_health", "maintenance_recommendation", "maintained_table"]


def test_definitions_load_and_validate(settings: IcepackSettings, platform: PlatformSettings) -> None:
    defs = build_definitions(settings_with_platform(settings, platform))
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    for upstream, downstream in zip(LINEAGE, LINEAGE[1:], strict=False):
        assert dg.AssetKey(upstream) in graph.get(dg.AssetKey(downstream)).parent_keys
    for name in LINEAGE:
        assert graph.get(dg.AssetKey(name)).partitions_def == TABLE_PARTITIONS
    assert graph.get(dg.AssetKey("fleet_summary")).partitions_def is None
    assert {s.name for s in defs.sensors} == {
        "iceberg_table_discovery",
        "maintenance_sensor",
        "fleet_automation_sensor",
        "post_maintenance_health_sensor",
        "maintenance_failure_sensor",
        "alert_sensor",
    }
    for sensor in defs.sensors:
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert {s.name for s in defs.schedules} == {"health_sync_schedule", "housekeeping_schedule"}
    for schedule in defs.schedules:
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    assert defs.resolve_schedule_def("health_sync_schedule").cron_schedule == "*/15 * * * *"
    assert defs.resolve_schedule_def("housekeeping_schedule").cron_schedule == "17 3 * * *"
    # A health sync and a fleet refresh by hand pay no step process; maintenance keeps one, so a crashed
    # worker is recognised.
    assert defs.resolve_job_def("health_sync").executor_def.name == "in_process"
    assert defs.resolve_job_def("fleet_refresh").executor_def.name == "in_process"
    assert defs.resolve_job_def("maintenance").executor_def.name != "in_process"


def test_platform_knobs_reach_definitions(settings: IcepackSettings) -> None:
    platform = PlatformSettings(
        health_sync_cron="0 * * * *", sensors_running_by_default=False, maintenance_interval_seconds=17,
        fleet_summary_interval_seconds=240,
    )
    defs = build_definitions(settings_with_platform(settings, platform))
    assert defs.resolve_schedule_def("health_sync_schedule").cron_schedule == "0 * * * *"
    sensor = defs.resolve_sensor_def("maintenance_sensor")
    assert sensor.minimum_interval_seconds == 17
    assert defs.resolve_sensor_def("fleet_automation_sensor").minimum_interval_seconds == 240
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED


def test_the_health_assets_fail_their_freshness_when_the_sync_stops(settings: IcepackSettings) -> None:
    """The window is 1.5 x the longest rewrite interval (no table goes longer without a write while the
    sync runs) plus two of the schedule's tick gaps; the other assets have no freshness policy."""
    platform = PlatformSettings(
        health_sync_cron="0 * * * *", health_rewrite_hours=24, attention_rewrite_hours=1
    )
    graph = build_definitions(settings_with_platform(settings, platform)).resolve_asset_graph()
    for name in ("table_status", "table_health"):
        policy = graph.get(dg.AssetKey(name)).freshness_policy
        assert isinstance(policy, dg.FreshnessPolicy)
        assert policy.fail_window.to_timedelta() == timedelta(hours=36 + 2)
    for name in ("maintenance_recommendation", "maintained_table", "fleet_summary"):
        assert graph.get(dg.AssetKey(name)).freshness_policy is None


def test_platform_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICEPACK_PLATFORM_HEALTH_SYNC_BATCH_SIZE", "50")
    assert load_settings().platform.health_sync_batch_size == 50
    monkeypatch.setenv("ICEPACK_PLATFORM_HEALTH_SYNC_BATCH_SIZE", "zero")
    with pytest.raises(ConfigurationError, match="ICEPACK_PLATFORM_HEALTH_SYNC_BATCH_SIZE"):
        load_settings()
    monkeypatch.delenv("ICEPACK_PLATFORM_HEALTH_SYNC_BATCH_SIZE")
    monkeypatch.setenv("ICEPACK_PLATFORM_HEALTH_SYNC_CRON", "every minute")
    with pytest.raises(ConfigurationError, match="ICEPACK_PLATFORM_HEALTH_SYNC_CRON"):
        load_settings()


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_importing_definitions_reads_no_environment(tmp_path: Path) -> None:
    """A broken ICEPACK_ setting must not break the import, only building the definitions."""
    env = {**os.environ, "ICEPACK_HOME": str(tmp_path), "ICEPACK_STATUS_WORKERS": "not-a-number"}
    imported = _python("import icepack_dagster.definitions", env)
    assert imported.returncode == 0, imported.stderr
    built = _python("from icepack_dagster.definitions import defs; defs()", env)
    assert built.returncode != 0
    assert "status_workers" in built.stderr


def test_workspace_file_loads_the_code_location(tmp_path: Path) -> None:
    """`dagster definitions validate -w workspace.yaml`, as an operator would run it."""
    env = {**os.environ, "ICEPACK_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path)}
    env = {k: v for k, v in env.items() if not k.startswith("ICEPACK_PLATFORM_")}
    dagster = Path(sys.executable).with_name("dagster")
    done = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", str(REPO / "workspace.yaml")],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "icepack_dagster" in done.stdout + done.stderr


def _names(defs: dg.Definitions) -> dict[str, set[str]]:
    """Every name the definitions give Dagster: asset keys, checks, jobs, sensors, schedules, resource
    keys, the assets' ops and the partitions definitions and pools they use."""
    graph = defs.resolve_asset_graph()
    assets = [graph.get(key) for key in graph.get_all_asset_keys()]
    jobs = [defs.resolve_job_def(job.name) for job in defs.jobs or []]
    return {
        "assets": {key.to_user_string() for key in graph.get_all_asset_keys()},
        "checks": {key.to_user_string() for key in graph.asset_check_keys},
        "jobs": {job.name for job in jobs},
        "sensors": {sensor.name for sensor in defs.sensors or []},
        "schedules": {schedule.name for schedule in defs.schedules or []},
        "resources": set(defs.resources or {}),
        "ops": {node.name for assets_def in defs.assets or [] for node in [assets_def.node_def]},  # type: ignore[union-attr]
        "partitions": {node.partitions_def.name for node in assets if node.partitions_def},  # type: ignore[attr-defined]
        "pools": {op.pool for job in jobs for op in job.graph.node_defs if op.pool},  # type: ignore[attr-defined]
    }


DEFAULT_DEPLOYMENT_NAMES = {
    "assets": {
        "table_status", "table_health", "maintenance_recommendation", "maintained_table", "fleet_summary",
    },
    "checks": {
        "table_health:healthy", "table_health:needs_operator", "maintained_table:healthy_after_maintenance",
    },
    "jobs": {
        "health_sync", "maintenance", "maintenance_batch", "fleet_refresh", "release_quarantine_job",
        "rollback_job", "housekeeping",
    },
    "sensors": {
        "iceberg_table_discovery", "maintenance_sensor", "fleet_automation_sensor",
        "post_maintenance_health_sensor", "maintenance_failure_sensor", "alert_sensor",
    },
    "schedules": {"health_sync_schedule", "housekeeping_schedule"},
    "resources": {"icepack", "spark"},
    "ops": {"table_status_and_health", "maintenance_recommendation", "maintained_table", "fleet_summary"},
    "partitions": {"iceberg_tables"},
    "pools": {"icepack_maintenance"},
}


def test_the_default_deployment_keeps_every_name(
    settings: IcepackSettings, platform: PlatformSettings
) -> None:
    """An instance that ran icepack before keeps its assets' history, its runs' jobs and its instigators'
    state: the default deployment's names are exactly those it always had."""
    assert _names(build_definitions(settings_with_platform(settings, platform))) == DEFAULT_DEPLOYMENT_NAMES


def test_another_deployment_prefixes_every_name(
    settings: IcepackSettings, platform: PlatformSettings
) -> None:
    """Asset keys take the deployment's name as a key prefix, every other name as a name prefix, so two
    deployments' definitions merge into one code location without a shared name."""
    lake_b = settings_with_platform(settings, platform.model_copy(update={"deployment_name": "lake_b"}))
    names = _names(build_definitions(lake_b))
    default = DEFAULT_DEPLOYMENT_NAMES
    assert names["assets"] == {f"lake_b/{asset}" for asset in default["assets"]}
    assert names["checks"] == {f"lake_b/{check}" for check in default["checks"]}
    for kind in ("jobs", "sensors", "schedules", "resources"):
        assert names[kind] == {f"lake_b_{name}" for name in default[kind]}, kind
    assert names["ops"] == {f"lake_b__{op}" for op in default["ops"]}
    assert names["partitions"] == {"iceberg_tables_lake_b"} and names["pools"] == {"lake_b_maintenance"}
    default_deployment = build_definitions(settings_with_platform(settings, platform))
    merged = dg.Definitions.merge(default_deployment, build_definitions(lake_b))
    dg.Definitions.validate_loadable(merged)
