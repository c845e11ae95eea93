"""Issue 26, icepack on a Dagster instance it shares, on a real `dagster-daemon` with the production
instance configuration (dagster-postgres, the queued run coordinator, no instance-wide tag or pool limit
of icepack's).

Three code locations run on one instance: another team's (a partitioned asset, its own pool with its
own limit, and an old finished run) and two icepack deployments for two lakes (the embedded `lake`
catalog as the default deployment `icepack`, the PostgreSQL `pg` catalog as `lake_b`), each with its
maintenance pool's limit stored by icepack's start-up step. After discovery, the first health syncs, a
maintenance launched by the default deployment's sensor and the default deployment's housekeeping
(deleting runs on):
- the neighbour's partitions, its pool's limit and its old run with its events are unchanged, and two
  of its one-partition runs for the same partition key run at the same time (no limit on
  `dagster/partition`);
- each icepack deployment has exactly its own tables as partitions of its own partitions definition,
  and as its table facts in the state database both share (one home), and every run each started
  carries its deployment's tag;
- housekeeping deleted the default deployment's old run and nothing else;
- the maintained table was compacted with its contents unchanged.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import time_machine

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES, DeploymentNames
from icepack_dagster.defs.event_reads import metadata_of
from icepack_dagster.defs.materialization_codec import OUTCOME
from icepack_dagster.defs.run_tags import DEPLOYMENT_TAG
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import small_file_table
from tests.platform.platform_testkit import (
    ONLY_COMPACTION,
    pg_env,
    write_dagster_home,
    write_workspace,
)
from tests.polling import wait_until
from tests.processes import DagsterDaemon
from tests.tables_testkit import table_fingerprint

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.daemon]

DAY = "2026-11-25"
NEIGHBOUR_POOL, NEIGHBOUR_LIMIT = "neighbour_pool", 1
CAPS = {"icepack": 2, "lake_b": 1}

NEIGHBOUR = '''
import time
from pathlib import Path

import dagster as dg

GATE = Path({gate!r})
DAYS = dg.DynamicPartitionsDefinition(name="neighbour_days")


@dg.asset(partitions_def=DAYS)
def neighbour_daily(context: dg.AssetExecutionContext) -> None:
    """Runs until the test opens the gate (bounded, so nothing outlives the test)."""
    deadline = time.monotonic() + 300
    while not (GATE / "open").exists():
        if time.monotonic() > deadline:
            raise dg.Failure("never released")
        time.sleep(0.2)


daily_job = dg.define_asset_job("neighbour_daily_job", selection=[neighbour_daily], partitions_def=DAYS)


@dg.op(pool="neighbour_pool")
def pooled() -> None:
    """A step of the neighbour's own pool."""


@dg.job
def neighbour_pooled_job() -> None:
    pooled()


@dg.sensor(job=daily_job, minimum_interval_seconds=1, default_status=dg.DefaultSensorStatus.RUNNING)
def two_runs_of_one_day(context: dg.SensorEvaluationContext):
    """Two runs of the same partition, once the test asks for them."""
    if not (GATE / "launch").exists():
        return dg.SkipReason("the test has not asked yet")
    return [dg.RunRequest(run_key=f"day-{{i}}", partition_key={day!r}) for i in (1, 2)]


defs = dg.Definitions(assets=[neighbour_daily], jobs=[daily_job, neighbour_pooled_job],
                      sensors=[two_runs_of_one_day])
'''

ICEPACK = '''
from icepack_dagster.definitions import build_definitions

defs = build_definitions(SETTINGS)
'''

ACTIVE = {dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED}
DONE = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


@dg.op
def neighbour_history_op() -> None:
    """Another team's work, long ago."""


@dg.job
def neighbour_history() -> None:
    neighbour_history_op()


def _deployment(settings: IcepackSettings, name: str, catalog: str, namespace: str) -> dict[str, Any]:
    """`load_settings` arguments of one icepack deployment managing `catalog`'s test namespace."""
    return {
        "home": str(settings.home),
        "catalogs": {catalog: settings.catalogs[catalog].model_dump(mode="json")},
        "include": [f"{catalog}.{namespace}.*"],
        "spark": {"master": "local[1]", "driver_memory": "1g"},
        "platform": {
            "deployment_name": name,
            "max_maintenance_in_flight": CAPS[name],
            "sensors_running_by_default": True,
            "discovery_interval_seconds": 5,
            "maintenance_interval_seconds": 5,
            "health_sync_workers": 1,
            "health_sync_cron": "0 0 1 1 *",  # the test's syncs are discovery's first ones
            "housekeeping_cron": "0 0 1 1 *",
            "delete_old_runs": True,
        },
    }


def _store_pool_limit(env: dict[str, str], deployment: dict[str, Any]) -> None:
    """icepack's start-up step, as scripts/demo runs it: the deployment's settings in ICEPACK_*."""
    platform = deployment["platform"]
    settings_env = {
        "ICEPACK_HOME": deployment["home"],
        "ICEPACK_PLATFORM_DEPLOYMENT_NAME": platform["deployment_name"],
        "ICEPACK_PLATFORM_MAX_MAINTENANCE_IN_FLIGHT": str(platform["max_maintenance_in_flight"]),
    }
    subprocess.run(
        [sys.executable, "-m", "icepack_dagster.defs.maintenance_pool"],
        env={**env, **settings_env}, check=True, capture_output=True, timeout=120,
    )


def _runs(instance: dg.DagsterInstance, location: str) -> list[dg.RunRecord]:
    return list(instance.get_run_records(dg.RunsFilter(tags={"dagster/code_location": location})))


def _status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    run = instance.get_run_by_id(run_id)
    assert run is not None
    return run.status


def test_two_icepack_deployments_beside_a_neighbour_change_nothing_of_the_neighbours(
    spark,  # type: ignore[no-untyped-def]
    settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    dagster_database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalogs.get("pg").create_namespace_if_not_exists(namespace)
    small_file_table(catalogs.get("lake"), f"{namespace}.clicks", appends=12, properties=ONLY_COMPACTION)
    small_file_table(catalogs.get("pg"), f"{namespace}.events", appends=1, properties=ONLY_COMPACTION)
    clicks, events = f"lake.{namespace}.clicks", f"pg.{namespace}.events"
    before = table_fingerprint(spark, clicks)
    deployments = {
        "icepack": _deployment(settings, "icepack", "lake", namespace),
        "lake_b": _deployment(settings, "lake_b", "pg", namespace),
    }
    platforms = {name: load_settings(**d).platform for name, d in deployments.items()}

    home = write_dagster_home(tmp_path)
    env = {**pg_env(dagster_database), "DAGSTER_HOME": str(home)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()  # creates the schema before the daemon's processes start
    instance.add_dynamic_partitions("neighbour_days", [DAY])
    instance.event_log_storage.set_concurrency_slots(NEIGHBOUR_POOL, NEIGHBOUR_LIMIT)
    own_defs = {name: build_definitions(load_settings(**d)) for name, d in deployments.items()}
    with time_machine.travel(datetime.now(UTC) - timedelta(days=45), tick=True):
        old_neighbour = neighbour_history.execute_in_process(instance=instance).run_id
        old_own = {
            name: d.resolve_job_def(DeploymentNames(name).name("housekeeping"))
            .execute_in_process(instance=instance)
            .run_id
            for name, d in own_defs.items()
        }
    for deployment in deployments.values():
        _store_pool_limit(env, deployment)

    gate = tmp_path / "gate"
    gate.mkdir()
    workspace = write_workspace(tmp_path, {
        "neighbour": (NEIGHBOUR.format(gate=str(gate), day=DAY), None),
        "icepack_lake": (ICEPACK, deployments["icepack"]),
        "icepack_lake_b": (ICEPACK, deployments["lake_b"]),
    })
    daemon = DagsterDaemon(home, workspace, {k: v for k, v in env.items() if k != "DAGSTER_HOME"},
                           tmp_path / "daemon.log")
    daemon.start()
    try:
        def maintained() -> dg.RunRecord | None:
            runs = [r for r in _runs(instance, "icepack_lake") if r.dagster_run.job_name == "maintenance"]
            return next((r for r in runs if r.dagster_run.status in DONE), None)

        # A Spark maintenance run on a busy 2-core machine takes minutes.
        maintenance = wait_until(maintained, "the default deployment's maintenance of clicks", timeout=900)
        wait_until(lambda: any(r.dagster_run.job_name == "lake_b_health_sync" and r.dagster_run.status in DONE
                               for r in _runs(instance, "icepack_lake_b")), "lake_b's first health sync")

        (gate / "launch").touch()
        def both_running() -> list[dg.RunRecord] | None:
            runs = [r for r in _runs(instance, "neighbour")
                    if r.dagster_run.job_name == "neighbour_daily_job"]
            return runs if len(runs) == 2 and all(r.dagster_run.status in ACTIVE for r in runs) else None

        neighbour_runs = wait_until(both_running, "the neighbour's two runs of one partition at once",
                                    timeout=300)
        (gate / "open").touch()
        wait_until(lambda: all(_status(instance, r.dagster_run.run_id) in DONE for r in neighbour_runs),
                   "the neighbour's runs to end")
        everyone_done = lambda: all(r.dagster_run.status in DONE  # noqa: E731
                                    for location in ("icepack_lake", "icepack_lake_b")
                                    for r in _runs(instance, location))
        wait_until(everyone_done, "icepack's runs to end", timeout=600)
    except AssertionError as error:
        raise AssertionError(f"{error}\ndaemon log tail:\n{daemon.tail()}") from None
    finally:
        daemon.stop()

    own_defs["icepack"].resolve_job_def("housekeeping").execute_in_process(instance=instance)

    assert maintenance.dagster_run.status == dg.DagsterRunStatus.SUCCESS, daemon.tail()
    outcome = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=DEFAULT_NAMES.maintained_table, asset_partitions=[clicks]), limit=1
    ).records
    assert metadata_of(outcome[0])[OUTCOME].value == "succeeded"
    assert table_fingerprint(spark, clicks) == before, f"contents of {clicks} changed"

    assert list(instance.get_dynamic_partitions("neighbour_days")) == [DAY]
    assert list(instance.get_dynamic_partitions(platforms["icepack"].partitions_name)) == [clicks]
    assert list(instance.get_dynamic_partitions(platforms["lake_b"].partitions_name)) == [events]
    for name, table in (("icepack", clicks), ("lake_b", events)):
        facts = Engine(load_settings(**deployments[name])).facts
        assert set(facts.measured([clicks, events])) == {table}, f"{name}'s facts hold another's table"

    limits = {pool.name: pool.limit for pool in instance.event_log_storage.get_pool_limits()}
    assert limits == {NEIGHBOUR_POOL: NEIGHBOUR_LIMIT, "icepack_maintenance": 2, "lake_b_maintenance": 1}
    for record in neighbour_runs:
        assert _status(instance, record.dagster_run.run_id) == dg.DagsterRunStatus.SUCCESS

    for location, name in (("icepack_lake", "icepack"), ("icepack_lake_b", "lake_b")):
        runs = _runs(instance, location)
        assert runs, f"{location} started no run"
        untagged = [r.dagster_run.job_name for r in runs if r.dagster_run.tags.get(DEPLOYMENT_TAG) != name]
        assert not untagged, f"runs of {location} without {DEPLOYMENT_TAG}={name}: {untagged}"

    assert instance.get_run_by_id(old_own["icepack"]) is None, "housekeeping kept its own old run"
    assert instance.get_run_by_id(old_own["lake_b"]) is not None, "another deployment's run was deleted"
    assert instance.get_run_by_id(old_neighbour) is not None, "the neighbour's run was deleted"
    assert instance.all_logs(old_neighbour), "the neighbour's run lost its events"
