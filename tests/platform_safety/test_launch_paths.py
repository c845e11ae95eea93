"""Issue 15, every launch path obeys the same limits, on a real `dagster-daemon` and `dagster-webserver`
with the production instance configuration (dagster-postgres, the queued run coordinator, the
`icepack_maintenance` pool at run granularity, here with a cap of two).

Maintenance is launched the ways a person and the platform launch it: Materialize on one partition of
the asset page (GraphQL `launchRun` of `__ASSET_JOB`, only Dagster's own tags), a backfill of two
partitions from the Materialize dialog (GraphQL `launchPartitionBackfill`), and the maintenance sensor's
request (the `maintenance` job with icepack's tags). The code location's `icepack` resource hands out its
maintenance engine only once the test opens a gate, so runs stay in progress while the test watches the
queue:
- a second maintenance of a table that is being maintained waits in the queue (`dagster/partition`);
- a maintenance of a third table waits while two run (the pool's cap of two);
- once the gate opens, every run completes, no two runs of one table and never more than two
  maintenance runs overlapped, the table that needed compaction was compacted with its contents
  unchanged, and a post-maintenance health sync followed the Materialize run (`__ASSET_JOB`).
"""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.asset_keys import MAINTAINED_TABLE, MAINTENANCE_RECOMMENDATION
from icepack_dagster.defs.event_reads import metadata_of
from icepack_dagster.defs.materialization_codec import OUTCOME
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.defs.run_tags import PARTITION_TAG
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import small_file_table
from tests.platform_safety.platform_testkit import (
    ONLY_COMPACTION,
    code_location_settings,
    pg_env,
    wait_until,
    write_code_location,
    write_dagster_home,
)
from tests.platform_safety.webserver import DagsterWebserver
from tests.processes import DagsterDaemon, set_maintenance_pool
from tests.tables_testkit import table_fingerprint

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

CAP = 2
ASSETS = [MAINTENANCE_RECOMMENDATION.path, MAINTAINED_TABLE.path]

GATED = '''
import time
from pathlib import Path

import dagster as dg

from icepack_dagster.definitions import deployment_assets, deployment_jobs
from icepack_dagster.config.platform import PlatformSettings as DefaultPlatform

ASSETS, JOBS = deployment_assets(DefaultPlatform()), deployment_jobs(DefaultPlatform())
from icepack_dagster.defs.maintenance.job import build_maintenance_job

maintenance_job = build_maintenance_job("icepack")
from icepack_dagster.defs.maintenance.post_maintenance_sensor import build_post_maintenance_sensor
from icepack_dagster.defs.resources import IcepackResource, build_resources
from icepack_dagster.defs.run_tags import maintenance_tags
from icepack_dagster.config.platform import PlatformSettings

GATE = Path({gate!r})
SENSOR_TABLE = {sensor_table!r}


class GatedIcepack(IcepackResource):
    """The real resource; its maintenance engine is handed out once the test opens the gate."""

    def maintenance_engine(self, spark):
        deadline = time.monotonic() + 600
        while not (GATE / "open").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the test never opened the gate")
            time.sleep(0.2)
        return super().maintenance_engine(spark)


@dg.sensor(job=maintenance_job, minimum_interval_seconds=1, default_status=dg.DefaultSensorStatus.RUNNING)
def sensor_trigger(context):
    """The maintenance sensor's request for one table, once the test asks for it."""
    if not (GATE / "sensor").exists():
        return dg.SkipReason("the test has not asked for the sensor's run yet")
    tags = maintenance_tags(SENSOR_TABLE, 1)
    return [dg.RunRequest(run_key="sensor", partition_key=SENSOR_TABLE, tags=tags)]


PLATFORM = PlatformSettings(health_sync_workers=1, sensors_running_by_default=True,
                            maintenance_interval_seconds=5)
SETTINGS = SETTINGS.model_copy(update={{"platform": PLATFORM}})
defs = dg.Definitions(
    assets=list(ASSETS),
    jobs=list(JOBS),
    sensors=[sensor_trigger, build_post_maintenance_sensor(PLATFORM)],
    resources={{**build_resources(SETTINGS), "icepack": GatedIcepack(settings=SETTINGS, table_workers=1)}},
    executor=dg.in_process_executor,  # one process per run: the queue, not the executor, is under test
)
'''

ACTIVE = {dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED}
DONE = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def _maintenance_runs(instance: dg.DagsterInstance) -> dict[str, dg.RunRecord]:
    """Runs that materialize maintained_table (whatever their job), by run id."""
    records = instance.get_run_records()
    return {
        r.dagster_run.run_id: r
        for r in records
        if r.dagster_run.job_name == "maintenance"
        or (r.dagster_run.asset_selection and MAINTAINED_TABLE in r.dagster_run.asset_selection)
    }


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


def test_materialize_backfill_and_sensor_wait_for_their_table_and_the_cap(
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
    clicks, orders, users = (f"lake.{namespace}.{name}" for name in ("clicks", "orders", "users"))
    before = {table: table_fingerprint(spark, table) for table in (clicks, orders, users)}

    home = write_dagster_home(tmp_path)
    config = yaml.safe_load((home / "dagster.yaml").read_text())
    config["concurrency"]["pools"]["default_limit"] = CAP
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    env = pg_env(dagster_database)
    for name, value in {**env, "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()
    set_maintenance_pool(home, CAP)
    instance.add_dynamic_partitions(PARTITIONS_NAME, [clicks, orders, users])
    gate = tmp_path / "gate"
    gate.mkdir()
    source = GATED.format(gate=str(gate), sensor_table=users)
    workspace = write_code_location(tmp_path, "launch_paths", source, code_location_settings(scoped_settings))
    daemon = DagsterDaemon(home, workspace, env, tmp_path / "daemon.log")
    webserver = DagsterWebserver(home, workspace, env, tmp_path / "webserver.log")
    daemon.start()
    try:
        webserver.start()
        materialized = webserver.launch_assets(ASSETS, clicks)
        wait_until(lambda: _status(instance, materialized) in ACTIVE, "the Materialize run to start")

        webserver.backfill(ASSETS, [clicks, orders])
        def backfill_runs() -> dict[str, str] | None:
            runs = {r.dagster_run.tags.get(PARTITION_TAG): i for i, r in _maintenance_runs(instance).items()
                    if i != materialized}
            submitted = all(_status(instance, i) != dg.DagsterRunStatus.NOT_STARTED for i in runs.values())
            return runs if len(runs) == 2 and submitted else None
        backfilled = wait_until(backfill_runs, "the backfill's two runs", timeout=300)
        wait_until(lambda: _status(instance, backfilled[orders]) in ACTIVE, "the backfill's run of orders")

        (gate / "sensor").touch()
        def sensor_run() -> str | None:
            runs = _maintenance_runs(instance)
            return next((i for i, r in runs.items() if r.dagster_run.job_name == "maintenance"
                         and r.dagster_run.status != dg.DagsterRunStatus.NOT_STARTED), None)
        sensed = wait_until(sensor_run, "the sensor's run")

        watch_until = time.monotonic() + 10  # ten dequeue intervals: they keep waiting
        while time.monotonic() < watch_until:
            assert _status(instance, backfilled[clicks]) == dg.DagsterRunStatus.QUEUED, (
                "a second maintenance of a table being maintained left the queue"
            )
            assert _status(instance, sensed) == dg.DagsterRunStatus.QUEUED, "a third run beyond the cap"
            assert {_status(instance, materialized), _status(instance, backfilled[orders])} <= ACTIVE
            time.sleep(1)

        (gate / "open").touch()
        everyone = [materialized, *backfilled.values(), sensed]
        wait_until(lambda: all(_status(instance, i) in DONE for i in everyone), "the end", timeout=480)
        followed = wait_until(
            lambda: instance.get_run_records(dg.RunsFilter(tags={"dagster/sensor_name":
                                                                  "post_maintenance_health_sensor"})),
            "the post-maintenance health sync", timeout=120,
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\ndaemon log tail:\n{daemon.tail()}") from None
    finally:
        webserver.stop()
        daemon.stop()

    records = [instance.get_run_record_by_id(i) for i in everyone]
    assert all(r is not None and r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in records)
    runs = [r for r in records if r is not None]
    assert _overlaps(runs) <= CAP, "more maintenance runs overlapped than the cap"
    first, second = sorted((r for r in runs if r.dagster_run.tags[PARTITION_TAG] == clicks),
                           key=lambda r: r.start_time or 0)
    assert (first.end_time or 0) <= (second.start_time or 0), "two maintenances of one table overlapped"
    assert first.dagster_run.run_id == materialized
    outcomes = {
        r.run_id: metadata_of(r)[OUTCOME].value
        for r in instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=MAINTAINED_TABLE), 9).records
    }
    assert outcomes[materialized] == "succeeded"
    assert outcomes[backfilled[clicks]] == "nothing_to_do", "the second run of clicks found its cadence"
    (health_sync,) = followed
    assert health_sync.dagster_run.tags.get("dagster/run_key") == f"post-maintenance:{materialized}"
    for table, fingerprint in before.items():
        assert table_fingerprint(spark, table) == fingerprint, f"contents of {table} changed"
