"""Issue 26: the fleet summary is refreshed by its automation condition, under the real `dagster-daemon`
on PostgreSQL storage (production YAML) with icepack's shipped definitions and only the fleet automation
sensor turned on: its first tick requests nothing (no health was materialized since it started); a
health sync that then materializes the health of three tables (three partitions of `table_health`)
leads to exactly one refresh run, carrying icepack's tags, and the ticks after it request nothing
more. The daemon is stopped while the sync runs, so its next tick sees the whole sync at once whatever
the machine's speed (with the daemon running, a tick falling in the middle of a sync asks for a second
refresh)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.fleet.fleet_automation import FLEET_AUTOMATION_SENSOR
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.defs.run_tags import DEPLOYMENT_TAG, KIND_TAG, OBSERVATION
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import run_health_sync, small_file_table
from tests.platform.platform_testkit import (
    code_location_settings,
    pg_env,
    write_code_location,
    write_dagster_home,
)
from tests.polling import wait_until
from tests.processes import DagsterDaemon

pytestmark = [pytest.mark.postgres, pytest.mark.daemon]

SHIPPED = """
from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.definitions import build_definitions

PLATFORM = PlatformSettings(sensors_running_by_default=False, fleet_summary_interval_seconds=5)
defs = build_definitions(SETTINGS.model_copy(update={"platform": PLATFORM}))
"""
FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def _summaries(instance: dg.DagsterInstance) -> list[dg.EventLogRecord]:
    return list(instance.fetch_materializations(DEFAULT_NAMES.fleet_summary, limit=100).records)


def _refresh_runs(instance: dg.DagsterInstance) -> list[dg.RunRecord]:
    """Every run the daemon launched: only the fleet automation sensor is on."""
    return [r for r in instance.get_run_records() if r.dagster_run.job_name != "health_sync"]


def _ticks_after(instance: dg.DagsterInstance, moment: float) -> list[Any]:
    """The fleet automation sensor's finished ticks that started after `moment`."""
    (state,) = [s for s in instance.all_instigator_state() if s.instigator_name == FLEET_AUTOMATION_SENSOR]
    ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, after=moment)
    return [t for t in ticks if t.end_timestamp is not None]


def _settled(instance: dg.DagsterInstance, summaries: int) -> bool:
    """`summaries` fleet summaries materialized, every run ended and two ticks finished since."""
    found = _summaries(instance)
    running = any(r.dagster_run.status not in FINISHED for r in instance.get_run_records())
    if len(found) < summaries or running:
        return False
    return len(_ticks_after(instance, max(r.timestamp for r in found))) >= 2


def test_a_health_sync_of_three_tables_leads_to_one_fleet_refresh(
    defs: dg.Definitions,
    scoped_settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    dagster_database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lake = catalogs.get("lake")
    tables = [f"lake.{namespace}.t{i}" for i in range(3)]
    for table in tables:
        small_file_table(lake, table.removeprefix("lake."), appends=2)
    home = write_dagster_home(tmp_path)
    env = pg_env(dagster_database)
    for name, value in {**env, "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(PARTITIONS_NAME, tables)
    workspace = write_code_location(tmp_path, "shipped", SHIPPED, code_location_settings(scoped_settings))
    daemon = DagsterDaemon(home, workspace, env, tmp_path / "daemon.log")
    try:
        daemon.start()
        daemon.dagster_cli("sensor", "start", FLEET_AUTOMATION_SENSOR)
        wait_until(lambda: _ticks_after(instance, 0.0), "the sensor's first tick", timeout=300,
                   detail=daemon.tail)
        daemon.stop()

        synced = run_health_sync(defs, instance, tables)
        assert synced.success
        written = synced.asset_materializations_for_node("sync_tables")
        assert sorted(m.partition for m in written if m.asset_key == DEFAULT_NAMES.table_health) == tables
        sync_ended = instance.get_run_record_by_id(synced.run_id).end_time  # type: ignore[union-attr]

        daemon.start()
        wait_until(lambda: _settled(instance, 1), "the refresh after the health sync", timeout=300,
                   detail=daemon.tail)
    finally:
        daemon.stop()
    runs = _refresh_runs(instance)
    assert len(_summaries(instance)) == 1, "one refresh for the three tables' new health, not one per table"
    (run,) = runs
    assert run.create_timestamp.timestamp() > (sync_ended or 0)
    tags = run.dagster_run.tags
    assert tags.get(DEPLOYMENT_TAG) == "icepack" and tags.get(KIND_TAG) == OBSERVATION, tags
