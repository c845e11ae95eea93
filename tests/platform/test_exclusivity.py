"""Scenario 10, per-table exclusivity on a real instance with PostgreSQL storage: two triggers for
one table at once never give two concurrent maintenances of it.

- Through the queue: a real `dagster-daemon` (production YAML, dagster-postgres, no limit on
  `dagster/partition`) receives, in one tick, the maintenance sensor's run request and an
  operator-style request without any icepack tag. Both may start; one compacts the table with real
  Spark in its run worker, and the other changes nothing: it refuses while the first is inside
  `maintained_table`, finds the table's lease held, or finds its cadence once the first has ended. The
  operator's run carries icepack's tags once it started, and the contents are unchanged.
- Around the queue: a run executed in process while another run is inside `maintained_table` for the
  same table refuses before touching Spark, records nothing in the maintenance history, and the first
  run completes its real maintenance with identical contents.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import deployment_assets, deployment_jobs
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.event_reads import metadata_of
from icepack_dagster.defs.materialization_codec import OUTCOME
from icepack_dagster.defs.partitions import PARTITIONS_NAME, table_key
from icepack_dagster.defs.resources import SparkResource, build_resources
from icepack_dagster.defs.run_tags import DEPLOYMENT_TAG, KIND_TAG, MAINTENANCE, TABLE_TAG
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import small_file_table
from tests.factories import settings_with_platform
from tests.platform.platform_testkit import (
    ONLY_COMPACTION,
    code_location_settings,
    pg_env,
    runs_of,
    write_code_location,
    write_dagster_home,
)
from tests.polling import wait_until
from tests.processes import DagsterDaemon
from tests.tables_testkit import table_fingerprint

ASSETS, JOBS = deployment_assets(PlatformSettings()), deployment_jobs(PlatformSettings())

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.daemon]

TWO_TRIGGERS = '''
import dagster as dg

from icepack_dagster.definitions import deployment_assets, deployment_jobs
from icepack_dagster.defs.maintenance.job import build_maintenance_job
from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.resources import build_resources
from icepack_dagster.defs.run_tags import maintenance_tags

ASSETS, JOBS = deployment_assets(PlatformSettings()), deployment_jobs(PlatformSettings())
maintenance_job = build_maintenance_job("icepack")

TABLE = {table!r}


@dg.sensor(job=maintenance_job, minimum_interval_seconds=5, default_status=dg.DefaultSensorStatus.RUNNING)
def two_triggers(context: dg.SensorEvaluationContext) -> list[dg.RunRequest]:
    """The maintenance sensor's request and an operator's launch of the same table, at once."""
    return [
        dg.RunRequest(run_key="sensor", partition_key=TABLE,
                      tags={{**maintenance_tags(TABLE, 1), "test/trigger": "sensor"}}),
        dg.RunRequest(run_key="operator", partition_key=TABLE, tags={{"test/trigger": "operator"}}),
    ]


defs = dg.Definitions(
    assets=list(ASSETS),
    jobs=list(JOBS),
    sensors=[two_triggers],
    resources=build_resources(
        SETTINGS.model_copy(update={{"platform": PlatformSettings(health_sync_workers=1)}})
    ),
)
'''

DONE = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def test_two_triggers_run_one_at_a_time_through_the_queue(
    spark,  # type: ignore[no-untyped-def]
    scoped_settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    dagster_database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = f"lake.{namespace}.events"
    small_file_table(catalogs.get("lake"), f"{namespace}.events", appends=12, properties=ONLY_COMPACTION)
    before = table_fingerprint(spark, table)

    home = write_dagster_home(tmp_path)
    env = pg_env(dagster_database)
    for name, value in {**env, "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()  # creates the schema before the daemon's processes start
    instance.add_dynamic_partitions(PARTITIONS_NAME, [table])
    source = TWO_TRIGGERS.format(table=table)
    workspace = write_code_location(tmp_path, "two_triggers", source, code_location_settings(scoped_settings))
    daemon = DagsterDaemon(home, workspace, env, tmp_path / "daemon.log")
    daemon.start()
    try:
        def finished() -> list[dg.RunRecord] | None:
            records = runs_of(instance, "maintenance")
            done = len(records) == 2 and all(r.dagster_run.status in DONE for r in records)
            return records if done else None

        records = wait_until(finished, "both maintenance runs to finish", timeout=900, every=0.3)
    except AssertionError as error:
        raise AssertionError(f"{error}\ndaemon log tail:\n{daemon.tail()}") from None
    finally:
        daemon.stop()

    by_trigger = {r.dagster_run.tags["test/trigger"]: r for r in records}
    assert set(by_trigger) == {"sensor", "operator"}
    for record in records:
        assert record.dagster_run.tags[TABLE_TAG] == table, "a maintenance run without its table tag"
        assert record.dagster_run.tags[KIND_TAG] == MAINTENANCE
        assert record.dagster_run.tags[DEPLOYMENT_TAG] == "icepack"
    maintained = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=DEFAULT_NAMES.maintained_table, asset_partitions=[table]), limit=10
    ).records
    outcomes = {r.run_id: metadata_of(r)[OUTCOME].value for r in maintained}
    compacted = [i for i, outcome in outcomes.items() if outcome == "succeeded"]
    assert len(compacted) == 1, f"{table} was compacted {len(compacted)} times: {outcomes}"
    first = next(r for r in records if r.dagster_run.run_id == compacted[0])
    (second,) = [r for r in records if r is not first]
    assert first.dagster_run.status == dg.DagsterRunStatus.SUCCESS, daemon.tail()
    if second.dagster_run.status == dg.DagsterRunStatus.FAILURE:
        assert second.dagster_run.run_id not in outcomes, "a refused run wrote a materialization"
    else:
        assert outcomes[second.dagster_run.run_id] in {"nothing_to_do", "deferred"}
    assert (
        metadata_of(next(r for r in maintained if r.run_id == first.dagster_run.run_id))[
            "data_files_after"
        ].value
        < 12
    )
    assert table_fingerprint(spark, table) == before


class _HeldSpark(SparkResource):
    """The real Spark resource; before it hands out its session (the run is inside
    `maintained_table`), it lets the test act while this run maintains the table."""

    @property
    def spark_session(self):  # type: ignore[no-untyped-def]
        while _WHILE_MAINTAINING:
            _WHILE_MAINTAINING.pop()()
        return super().spark_session


_WHILE_MAINTAINING: list[Callable[[], None]] = []


def _bypass_while_maintaining(
    settings: IcepackSettings, instance: dg.DagsterInstance, maintained: str, bypassing: str
) -> tuple[dg.ExecuteInProcessResult, str]:
    """Maintain `maintained` through the maintenance job; while that run is inside `maintained_table`,
    an operator's `dagster asset materialize` of `bypassing` runs in process (no queue). Returns the
    first run's result and the in-process run's step failure message (it must have failed)."""
    plain = build_resources(settings)
    held = dg.Definitions(
        assets=list(ASSETS), jobs=list(JOBS), resources={**plain, "spark": _HeldSpark(settings=settings)}
    )
    results: list[dg.ExecuteInProcessResult] = []

    def materialize() -> None:
        results.append(
            dg.materialize(
                list(ASSETS[2:4]), instance=instance, partition_key=bypassing, resources=plain,
                raise_on_error=False,
            )
        )

    def run_in_thread() -> None:
        thread = threading.Thread(target=materialize)
        thread.start()
        thread.join(timeout=300)

    _WHILE_MAINTAINING.append(run_in_thread)
    first = held.resolve_job_def("maintenance").execute_in_process(
        instance=instance, partition_key=maintained, raise_on_error=False
    )
    (second,) = results
    assert not second.success
    (failure,) = [e for e in second.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    return first, failure.step_failure_data.user_failure_data.description


def test_a_run_that_bypasses_the_queue_refuses(
    spark,  # type: ignore[no-untyped-def]
    scoped_settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    pg_instance: dg.DagsterInstance,
) -> None:
    table = f"lake.{namespace}.orders"
    small_file_table(catalogs.get("lake"), f"{namespace}.orders", appends=12, properties=ONLY_COMPACTION)
    before = table_fingerprint(spark, table)
    pg_instance.add_dynamic_partitions(PARTITIONS_NAME, [table])

    first, message = _bypass_while_maintaining(scoped_settings, pg_instance, table, table)

    assert f"maintenance of {table} refused" in message and first.run_id in message
    assert first.success, "the run that was maintaining the table first did not complete"
    (report,) = first.asset_materializations_for_node("maintained_table")
    assert report.metadata[OUTCOME].value == "succeeded"
    history = Engine(scoped_settings).history(table_key(table))
    assert history.consecutive_failures == 0, "a refused run counted as a failed maintenance"
    assert table_fingerprint(spark, table) == before


def test_a_run_that_bypasses_the_queue_refuses_beyond_the_cap(
    spark,  # type: ignore[no-untyped-def]
    scoped_settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    pg_instance: dg.DagsterInstance,
) -> None:
    """With a cap of one, a `dagster asset materialize` of another table while a maintenance runs
    refuses (it cannot wait in the queue), and the running maintenance completes."""
    capped = settings_with_platform(scoped_settings, PlatformSettings(max_maintenance_in_flight=1))
    lake = catalogs.get("lake")
    first_table, other_table = f"lake.{namespace}.first", f"lake.{namespace}.other"
    for name in ("first", "other"):
        small_file_table(lake, f"{namespace}.{name}", appends=12, properties=ONLY_COMPACTION)
    before = {table: table_fingerprint(spark, table) for table in (first_table, other_table)}
    pg_instance.add_dynamic_partitions(PARTITIONS_NAME, [first_table, other_table])

    first, message = _bypass_while_maintaining(capped, pg_instance, first_table, other_table)

    assert f"maintenance of {other_table} refused" in message and "the cap is 1" in message
    assert first.run_id in message
    assert first.success
    assert Engine(capped).history(table_key(other_table)).last_run_at is None, "the refusal was recorded"
    assert {table: table_fingerprint(spark, table) for table in before} == before
