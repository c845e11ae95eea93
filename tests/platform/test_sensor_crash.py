"""Scenario 11, a daemon or sensor crash at any point of a tick, then restart: exactly one run per run
key and no table's maintenance launched twice.

The real `dagster-daemon` (production YAML, PostgreSQL storage) runs the real maintenance sensor over
real tables with real health events; the queue holds every run (`max_concurrent_runs: 0`), so only
submission is under test. The test kills the daemon's whole process group with SIGKILL the moment a
tick's first run appears (mid-submission of that tick), restarts it, and repeats; then it simulates a
crash before the cursor was persisted: the runs are ended, the cursor is deleted with the operator's
CLI, and the restarted sensor re-reads every health event. It asks for the very same run keys
(`maintain:<table>:<health event>`), which the daemon refuses to launch again.

The discovery sensor's own crash window: the daemon adds a tick's partitions before it saves the
cursor and the first-sync runs. A daemon dying in between must neither lose the new tables' first
health sync nor ask for it under a new run key.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.scheduler.instigation import TickStatus

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.defs.run_tags import TABLE_TAG
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    execute_run_request,
    latest_health,
    run_health_sync,
    small_file_table,
)
from tests.platform.platform_testkit import (
    code_location_settings,
    pg_env,
    runs_of,
    write_code_location,
    write_dagster_home,
)
from tests.polling import wait_until
from tests.processes import DagsterDaemon

pytestmark = [pytest.mark.postgres, pytest.mark.daemon]

RUN_KEY_TAG = "dagster/run_key"
TABLES = 7
SENSOR_ONLY = """
import dagster as dg
from dagster._core.scheduler.instigation import TickStatus

from icepack_dagster.definitions import deployment_assets, deployment_jobs
from icepack_dagster.config.platform import PlatformSettings as DefaultPlatform

ASSETS, JOBS = deployment_assets(DefaultPlatform()), deployment_jobs(DefaultPlatform())
from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.resources import build_resources
from icepack_dagster.defs.maintenance.maintenance_sensor import build_maintenance_sensor

PLATFORM = PlatformSettings(
    maintenance_interval_seconds=5, maintenance_runs_per_tick=4, max_maintenance_in_flight=50,
    health_sync_workers=1,
)
defs = dg.Definitions(
    assets=list(ASSETS),
    jobs=list(JOBS),
    sensors=[build_maintenance_sensor(PLATFORM)],
    resources=build_resources(SETTINGS.model_copy(update={"platform": PLATFORM})),
)
"""
SKIPPED = re.compile(
    r"Skipping \d+ runs? for sensor maintenance_sensor already completed with run keys: (\[.*\])"
)


def _runs_by_key(instance: dg.DagsterInstance) -> Counter[str]:
    return Counter(r.dagster_run.tags[RUN_KEY_TAG] for r in runs_of(instance, "maintenance"))


def _runs_by_table(instance: dg.DagsterInstance) -> Counter[str]:
    return Counter(r.dagster_run.tags[TABLE_TAG] for r in runs_of(instance, "maintenance"))


def _last_tick_ended(instance: dg.DagsterInstance) -> bool:
    """True once the maintenance sensor's newest tick ended with nothing to submit. A daemon stopped
    while a tick that asked for runs is still STARTED resumes that tick on restart and then stores the
    tick's own cursor, which would undo the operator's cursor deletion below (Dagster's resume logic,
    not icepack's)."""
    for state in instance.all_instigator_state():
        if state.instigator_name == "maintenance_sensor":
            newest = next(
                iter(instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=1)), None
            )
            return newest is not None and newest.status == TickStatus.SKIPPED
    return False


def test_killed_and_rewound_daemon_launches_each_maintenance_once(
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
    for table in tables:  # cadence 0: only run keys stand between a re-read and a second launch
        small_file_table(
            lake, table.removeprefix("lake."), appends=8, properties={"icepack.cadence-hours": "0"}
        )

    home = write_dagster_home(tmp_path, max_concurrent_runs=0)
    env = pg_env(dagster_database)
    for name, value in {**env, "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(PARTITIONS_NAME, tables)
    assert run_health_sync(defs, instance, tables).success
    workspace = write_code_location(
        tmp_path, "sensor_only", SENSOR_ONLY, code_location_settings(scoped_settings)
    )
    daemon = DagsterDaemon(home, workspace, env, tmp_path / "daemon.log")
    kills = 0
    try:
        daemon.start()
        seen = 0
        while seen < TABLES and kills < 2:
            count = wait_until(
                lambda seen=seen: (n := sum(_runs_by_key(instance).values())) > seen and n,
                "the maintenance sensor to submit more runs",
                timeout=120,
                every=0.05,
            )
            daemon.kill()  # mid-tick when the tick's later runs are still being submitted
            kills += 1
            seen = count
            daemon.start()
        wait_until(lambda: set(_runs_by_table(instance)) == set(tables), "a run for every table", 120)
        assert max(_runs_by_key(instance).values()) == 1, _runs_by_key(instance)
        assert _runs_by_table(instance) == Counter(tables), "a table's maintenance was launched twice"
        wait_until(lambda: _last_tick_ended(instance), "a tick with nothing left to submit", 120)
        daemon.stop()

        keys = set(_runs_by_key(instance))
        for record in runs_of(instance, "maintenance"):  # the runs ended while the daemon was down
            assert instance.run_coordinator.cancel_run(record.dagster_run.run_id)
        daemon.dagster_cli("sensor", "cursor", "maintenance_sensor", "--delete")
        daemon.start()

        def skipped_keys() -> set[str] | None:
            # Only this start's output: a tick resumed after a kill above logs the same refusal.
            found = {k for match in SKIPPED.findall(daemon.output_of_last_start()) for k in json.loads(match)}
            return found if found >= keys else None

        assert wait_until(skipped_keys, "the re-read sensor's run keys to be refused", 120) >= keys
    except AssertionError as error:
        raise AssertionError(f"{error}\ndaemon log tail:\n{daemon.tail()}") from None
    finally:
        daemon.stop()

    assert kills == 2
    by_key = _runs_by_key(instance)
    assert set(by_key) == keys and max(by_key.values()) == 1, by_key
    assert _runs_by_table(instance) == Counter(tables)


def test_discovery_crash_between_partitions_and_cursor_keeps_the_first_sync(
    defs: dg.Definitions, catalogs: CatalogSet, namespace: str, pg_instance: dg.DagsterInstance
) -> None:
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.old", appends=1)
    previous = evaluate_sensor(defs, "iceberg_table_discovery", pg_instance)
    apply_partition_requests(pg_instance, previous)
    for name in ("new_a", "new_b"):
        small_file_table(lake, f"{namespace}.{name}", appends=9)

    crashed = evaluate_sensor(defs, "iceberg_table_discovery", pg_instance, cursor=previous.cursor)
    apply_partition_requests(pg_instance, crashed)  # ...and the daemon died before saving the rest
    restarted = evaluate_sensor(defs, "iceberg_table_discovery", pg_instance, cursor=previous.cursor)
    assert isinstance(restarted, dg.SensorResult), restarted
    assert not restarted.dynamic_partitions_requests
    assert [(r.run_key, dict(r.tags)) for r in restarted.run_requests] == [
        (r.run_key, dict(r.tags)) for r in crashed.run_requests
    ]
    (first_sync,) = restarted.run_requests
    assert execute_run_request(defs, pg_instance, first_sync, "health_sync").success
    for name in ("new_a", "new_b"):
        assert latest_health(pg_instance, f"lake.{namespace}.{name}").state == "critical"
    settled = evaluate_sensor(defs, "iceberg_table_discovery", pg_instance, cursor=restarted.cursor)
    assert isinstance(settled, dg.SkipReason) and "already match" in settled.skip_message
