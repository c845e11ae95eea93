"""Issue 15 and 26, every launch path obeys the maintenance cap, on a fresh instance, with no
instance-wide tag or default pool limit: a real `dagster-daemon` and `dagster-webserver` with the
production instance configuration (dagster-postgres, the queued run coordinator, pools at run
granularity, no `default_limit`), and the maintenance pool's limit (two) stored by icepack's start-up
step (`python -m icepack_dagster.defs.maintenance_pool`) before the daemon starts.

Maintenance is launched the ways a person launches it, through the webserver's GraphQL API: a backfill
over every table from the Materialize dialog (`launchPartitionBackfill`; on a fresh demo instance such
a backfill once had three maintenance runs started under a cap of two), then Materialize on one of
them (`launchRun` of `__ASSET_JOB`, only Dagster's own tags). The code location's `icepack` resource
hands out its maintenance engine only once the test opens a gate, so runs stay in progress while the
test watches the queue:
- two of the backfill's three runs start and the third waits in the queue, and so does the Materialize
  run, while two run (the pool's cap);
- once the gate opens, every run ends, never more than two overlapped, the table maintained twice was
  compacted by one of its runs and the other changed nothing (it refused while the first was
  maintaining the table, or found its cadence), every run carries icepack's deployment tag, a
  post-maintenance health sync followed an `__ASSET_JOB` run, and every table's contents are unchanged.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.event_reads import metadata_of
from icepack_dagster.defs.materialization_codec import OUTCOME
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.defs.run_tags import DEPLOYMENT_TAG, PARTITION_TAG, runs_maintaining
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import small_file_table
from tests.platform.platform_testkit import (
    ONLY_COMPACTION,
    code_location_settings,
    pg_env,
    write_code_location,
    write_dagster_home,
)
from tests.platform.webserver import DagsterWebserver
from tests.polling import wait_until
from tests.processes import DagsterDaemon
from tests.tables_testkit import table_fingerprint

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.daemon]

CAP = 2
ASSETS = [DEFAULT_NAMES.maintenance_recommendation.path, DEFAULT_NAMES.maintained_table.path]

GATED = '''
import time
from pathlib import Path

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.definitions import deployment_assets, deployment_jobs
from icepack_dagster.defs.maintenance.post_maintenance_sensor import build_post_maintenance_sensor
from icepack_dagster.defs.resources import IcepackResource, build_resources

GATE = Path({gate!r})


class GatedIcepack(IcepackResource):
    """The real resource; its maintenance engine is handed out once the test opens the gate."""

    def maintenance_engine(self, spark):
        deadline = time.monotonic() + 600
        while not (GATE / "open").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the test never opened the gate")
            time.sleep(0.2)
        return super().maintenance_engine(spark)


PLATFORM = PlatformSettings(health_sync_workers=1, sensors_running_by_default=True,
                            maintenance_interval_seconds=5, max_maintenance_in_flight={cap})
SETTINGS = SETTINGS.model_copy(update={{"platform": PLATFORM}})
defs = dg.Definitions(
    assets=deployment_assets(PLATFORM),
    jobs=deployment_jobs(PLATFORM),
    sensors=[build_post_maintenance_sensor(PLATFORM)],
    resources={{**build_resources(SETTINGS), "icepack": GatedIcepack(settings=SETTINGS, table_workers=1)}},
    executor=dg.in_process_executor,  # one process per run: the queue, not the executor, is under test
)
'''

ACTIVE = {dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED}
DONE = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
EVERY = [*ACTIVE, *DONE, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED]


def _maintenance_runs(instance: dg.DagsterInstance) -> dict[str, dg.DagsterRun]:
    """Runs that need the maintenance pool, whatever their job, by run id: selected in run storage."""
    return {run.run_id: run for run in runs_maintaining(instance, PlatformSettings(), EVERY)}


def _status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    run = instance.get_run_by_id(run_id)
    assert run is not None
    return run.status


def _overlaps(records: list[dg.RunRecord]) -> int:
    """The most runs in progress at one moment, from their start and end times."""
    moments = sorted([(r.start_time or 0, 1) for r in records] + [(r.end_time or 0, -1) for r in records],
                     key=lambda m: (m[0], m[1]))
    most = running = 0
    for _, step in moments:
        running += step
        most = max(most, running)
    return most


def store_pool_limit(home: Path, env: dict[str, str], settings: IcepackSettings, cap: int) -> None:
    """icepack's start-up step, as scripts/demo runs it before the daemon starts."""
    settings_env = {
        "ICEPACK_HOME": str(settings.home), "ICEPACK_PLATFORM_MAX_MAINTENANCE_IN_FLIGHT": str(cap)
    }
    subprocess.run(
        [sys.executable, "-m", "icepack_dagster.defs.maintenance_pool"],
        env={**env, "DAGSTER_HOME": str(home), **settings_env}, check=True, capture_output=True, timeout=120,
    )


def test_a_backfill_of_every_table_and_materialize_wait_for_the_cap_on_a_fresh_instance(
    spark,  # type: ignore[no-untyped-def]
    scoped_settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    dagster_database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.clicks", appends=12, properties=ONLY_COMPACTION)
    for name in ("orders", "users"):
        small_file_table(lake, f"{namespace}.{name}", appends=1, properties=ONLY_COMPACTION)
    tables = [f"lake.{namespace}.{name}" for name in ("clicks", "orders", "users")]
    clicks = tables[0]
    before = {table: table_fingerprint(spark, table) for table in tables}

    home = write_dagster_home(tmp_path)
    env = pg_env(dagster_database)
    for name, value in {**env, "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()
    store_pool_limit(home, env, scoped_settings, CAP)
    instance.add_dynamic_partitions(PARTITIONS_NAME, tables)
    gate = tmp_path / "gate"
    gate.mkdir()
    source = GATED.format(gate=str(gate), cap=CAP)
    workspace = write_code_location(tmp_path, "launch_paths", source, code_location_settings(scoped_settings))
    daemon = DagsterDaemon(home, workspace, env, tmp_path / "daemon.log")
    webserver = DagsterWebserver(home, workspace, env, tmp_path / "webserver.log")
    daemon.start()
    try:
        webserver.start()
        webserver.backfill(ASSETS, tables)

        def backfill_runs() -> dict[str, str] | None:
            runs = {r.tags.get(PARTITION_TAG): i for i, r in _maintenance_runs(instance).items()}
            submitted = all(_status(instance, i) != dg.DagsterRunStatus.NOT_STARTED for i in runs.values())
            started = sum(_status(instance, i) in ACTIVE for i in runs.values())
            return runs if len(runs) == 3 and submitted and started == CAP else None

        backfilled = wait_until(backfill_runs, "the backfill's runs, two of them started", timeout=300)
        clicks_backfill = backfilled[clicks]
        materialized = webserver.launch_assets(ASSETS, clicks)
        queued = dg.DagsterRunStatus.QUEUED
        wait_until(lambda: _status(instance, materialized) == queued, "the Materialize run queued")

        watch_until = time.monotonic() + 10  # ten dequeue intervals: the queue keeps holding them
        while time.monotonic() < watch_until:
            statuses = [_status(instance, i) for i in [*backfilled.values(), materialized]]
            assert sum(s in ACTIVE for s in statuses) <= CAP, f"more maintenances than the cap: {statuses}"
            assert statuses.count(dg.DagsterRunStatus.QUEUED) == 2, f"two runs should wait: {statuses}"
            time.sleep(1)

        (gate / "open").touch()
        everyone = [*backfilled.values(), materialized]
        wait_until(lambda: all(_status(instance, i) in DONE for i in everyone), "the end", timeout=600)
        followed = wait_until(
            lambda: instance.get_run_records(dg.RunsFilter(tags={"dagster/sensor_name":
                                                                  "post_maintenance_health_sensor"})),
            "the post-maintenance health sync", timeout=180,
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\ndaemon log tail:\n{daemon.tail()}") from None
    finally:
        webserver.stop()
        daemon.stop()

    records = [r for r in (instance.get_run_record_by_id(i) for i in everyone) if r is not None]
    assert len(records) == len(everyone)
    assert _overlaps(records) <= CAP, "more maintenance runs overlapped than the cap"
    for record in records:
        assert record.dagster_run.tags.get(DEPLOYMENT_TAG) == "icepack", "a run without icepack's tag"
    outcomes = {
        (r.run_id, r.partition_key): metadata_of(r)[OUTCOME].value
        for r in instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=DEFAULT_NAMES.maintained_table), 9
        ).records
    }
    twice = {run_id: instance.get_run_record_by_id(run_id) for run_id in (clicks_backfill, materialized)}
    succeeded = [i for i in twice if outcomes.get((i, clicks)) == "succeeded"]
    assert len(succeeded) == 1, f"clicks was compacted {len(succeeded)} times: {outcomes}"
    (other,) = set(twice) - set(succeeded)
    other_record = twice[other]
    assert other_record is not None
    if other_record.dagster_run.status == dg.DagsterRunStatus.FAILURE:  # it overlapped the first: refused
        assert (other, clicks) not in outcomes
    else:  # it started once the first had ended
        assert outcomes[(other, clicks)] == "nothing_to_do", "the second run of clicks found its cadence"
    run_keys = {r.dagster_run.tags.get("dagster/run_key") for r in followed}
    assert f"post-maintenance:{succeeded[0]}" in run_keys
    for table, fingerprint in before.items():
        assert table_fingerprint(spark, table) == fingerprint, f"contents of {table} changed"
