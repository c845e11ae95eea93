"""Contract: a `dagster run wipe` changes none of the maintenance sensor's decisions, under the real
`dagster-daemon` on PostgreSQL storage (production YAML). The queue holds every run
(`max_concurrent_runs: 0`), so only the sensor's decisions are under test: after a health sync it asks
for one maintenance per unhealthy table; every run is then deleted with its events (as `dagster run
wipe` does), the sensor's cursor is deleted with the operator's CLI, and the restarted daemon's sensor,
reading the healths again from icepack's state database, asks for exactly the same runs (tables, run
keys, health events). Before icepack kept its own facts, the re-read found no health event at all and
asked for nothing."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.defs.run_tags import HEALTH_EVENT_TAG, TABLE_TAG
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import run_health_sync, small_file_table
from tests.platform.platform_testkit import (
    code_location_settings,
    pg_env,
    runs_of,
    write_code_location,
    write_dagster_home,
)
from tests.platform.test_sensor_crash import RUN_KEY_TAG, SENSOR_ONLY
from tests.polling import wait_until
from tests.processes import DagsterDaemon

pytestmark = [pytest.mark.postgres, pytest.mark.daemon]

TABLES = 3


def _requested(instance: dg.DagsterInstance) -> set[tuple[str, str, str]]:
    """(table, run key, health event) of every maintenance run the sensor submitted."""
    return {
        (r.dagster_run.tags[TABLE_TAG], r.dagster_run.tags[RUN_KEY_TAG], r.dagster_run.tags[HEALTH_EVENT_TAG])
        for r in runs_of(instance, "maintenance")
    }


def test_a_run_wipe_changes_no_maintenance_decision(
    defs: dg.Definitions,
    scoped_settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    dagster_database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lake = catalogs.get("lake")
    tables = [f"lake.{namespace}.t{i}" for i in range(TABLES)]
    for table in tables:
        small_file_table(lake, table.removeprefix("lake."), appends=8)
    home = write_dagster_home(tmp_path, max_concurrent_runs=0)
    env = pg_env(dagster_database)
    for name, value in {**env, "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(PARTITIONS_NAME, tables)
    assert run_health_sync(defs, instance, tables).success
    location = code_location_settings(scoped_settings)
    workspace = write_code_location(tmp_path, "sensor_only", SENSOR_ONLY, location)
    daemon = DagsterDaemon(home, workspace, env, tmp_path / "daemon.log")
    try:
        daemon.start()
        def every_table() -> set[tuple[str, str, str]] | None:
            found = _requested(instance)
            return found if {table for table, _, _ in found} == set(tables) else None

        before = wait_until(every_table, "a maintenance run for every table", timeout=120)
        daemon.stop()

        for run in instance.get_runs():  # what `dagster run wipe` does
            instance.delete_run(run.run_id)
        assert not instance.get_runs()
        assert not instance.fetch_materializations(DEFAULT_NAMES.table_health, limit=1).records
        daemon.dagster_cli("sensor", "cursor", "maintenance_sensor", "--delete")

        daemon.start()
        def as_many_again() -> set[tuple[str, str, str]] | None:
            found = _requested(instance)
            return found if len(found) >= len(before) else None

        after = wait_until(as_many_again, "the restarted sensor to ask for maintenance again", timeout=120)
    except AssertionError as error:
        raise AssertionError(f"{error}\ndaemon log tail:\n{daemon.tail()}") from None
    finally:
        daemon.stop()
    assert after == before
