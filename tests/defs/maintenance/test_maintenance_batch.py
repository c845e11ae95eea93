"""Contract (issue 16): with `maintenance_batch_size` above 1, the maintenance sensor puts tables of the
smallest sizing tier into one `maintenance_batch` run, which maintains them in one Spark application,
`maintenance_batch_workers` at a time (one after the other, or two at once, each worker in a session
of its own). Each table keeps its own `maintained_table` event, its own lease and its own failure
record: a table whose maintenance fails (a data file missing under it) is recorded as failed in its
history and observed with the error, while the tables before and after it in the same run are
compacted with contents unchanged (main and a tag), materialized, and re-measured healthy in the run.
The run itself succeeds; since it recorded its tables' health, no post-maintenance health sync follows
it, and the fleet summary's automation condition asks for a refresh directly. A table of a larger tier
keeps a run of its own, and the tables of a batch in flight wait while the batch counts as one run in
flight. A session setting of the batch that Spark refuses fails the run, and no table is charged.

Each table of a batch is accounted for as a one-table run accounts for it (issue 15): a
`maintenance_recommendation` materialization with the metadata a one-table run writes, and a
`healthy_after_maintenance` result for its partition, read back from the instance as the partitions
view reads it: passed for a table made healthy, failed for a table whose maintenance failed (also
when its previous result had passed), failed with WARN ("still critical") for a table the batch leaves
unhealthy."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlparse

import dagster as dg
import pyarrow as pa
import pytest

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.maintenance import batch_maintenance
from icepack_dagster.defs.maintenance.batch_job import (
    BATCH_JOB,
    BATCH_TABLES_TAG,
    batch_run_config,
    batch_tables,
)
from icepack_dagster.defs.maintenance.health_after_check import HEALTH_AFTER_CHECK
from icepack_dagster.defs.materialization_codec import OUTCOME, decode_recommendation
from icepack_dagster.defs.partitions import table_key
from icepack_dagster.defs.run_tags import KIND_TAG, MAINTENANCE, MAINTENANCE_POOL, PRIORITY_TAG
from icepack_dagster.domain.actions.maintenance_action import ACTION_ORDER
from icepack_dagster.domain.sizing.tiers import SizingTier
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import (
    NO_ACTIONS,
    SCHEMA,
    after_run,
    discover,
    evaluate_sensor,
    execute_run_request,
    latest_health,
    run_health_sync,
    small_file_table,
)
from tests.factories import settings_with_platform
from tests.tables_testkit import arrow_fingerprint, table_fingerprint

pytestmark = pytest.mark.spark


def _batching(settings: IcepackSettings, **knobs: object) -> dg.Definitions:
    platform = PlatformSettings(maintenance_batch_size=5, **knobs)  # type: ignore[arg-type]
    return build_definitions(settings_with_platform(settings, platform))


def _contents(spark, qualified: str) -> tuple[object, object]:  # type: ignore[no-untyped-def]
    tagged = table_fingerprint(spark, f"(SELECT * FROM {qualified} VERSION AS OF 'before')")
    return table_fingerprint(spark, qualified), tagged


def _requests_the_daemon_accepts(defs: dg.Definitions, requests: list[dg.RunRequest]) -> list[str]:
    """The requests' jobs, each one the sensor targets (the daemon refuses a request for any other)."""
    targets = {job.name for job in defs.resolve_sensor_def("maintenance_sensor").jobs}
    assert all(request.job_name in targets for request in requests), (targets, requests)
    return [str(request.job_name) for request in requests]


def _health_after(instance: dg.DagsterInstance, partitions: list[str]) -> dict[str, tuple[str, bool]]:
    """Each table's `healthy_after_maintenance` as the partitions view reads it from the instance: its
    latest execution's status, and whether that execution judges the partition's latest materialization
    (Dagster counts only those)."""
    key = dg.AssetCheckKey(DEFAULT_NAMES.maintained_table, HEALTH_AFTER_CHECK)
    infos = instance.event_log_storage.get_asset_check_partition_info([key], partition_keys=partitions)
    return {str(i.partition_key): (i.latest_execution_status.value, i.is_current) for i in infos}


def _health_after_results(result: dg.ExecuteInProcessResult) -> list[dg.AssetCheckEvaluation]:
    """The run's `healthy_after_maintenance` results (a batch run also logs `table_health`'s `healthy`)."""
    return [e for e in result.get_asset_check_evaluations() if e.check_name == HEALTH_AFTER_CHECK]


def _recommended(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetMaterialization]:
    return {e.partition: e for e in result.asset_materializations_for_node("maintain_tables")
            if e.asset_key == DEFAULT_NAMES.maintenance_recommendation}


def _remove_one_data_file(catalogs: CatalogSet, identifier: str) -> None:
    table = catalogs.get("lake").load_table(identifier)
    data_file = next(iter(table.scan().plan_files())).file.file_path
    Path(urlparse(data_file).path).unlink()


@pytest.mark.parametrize("workers", [1, 2], ids=["one-at-a-time", "two-at-once"])
def test_a_batch_run_maintains_each_table_and_a_failure_stays_with_its_table(
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
    spark,  # type: ignore[no-untyped-def]
    workers: int,
) -> None:
    defs = _batching(scoped_settings, maintenance_batch_workers=workers)
    lake = catalogs.get("lake")
    names = ["first", "broken", "last"]
    for name in names:
        small_file_table(lake, f"{namespace}.{name}", appends=10)
        spark.sql(f"ALTER TABLE lake.{namespace}.{name} CREATE TAG before")
    partitions = discover(defs, instance)
    assert run_health_sync(defs, instance, partitions).success
    healthy = [f"lake.{namespace}.first", f"lake.{namespace}.last"]
    broken = f"lake.{namespace}.broken"
    before = {p: _contents(spark, p) for p in healthy}
    _remove_one_data_file(catalogs, f"{namespace}.broken")

    decided = evaluate_sensor(defs, "maintenance_sensor", instance)
    (request,) = decided.run_requests
    assert request.job_name == BATCH_JOB and request.tags[KIND_TAG] == MAINTENANCE
    assert request.tags[PRIORITY_TAG] == "2", "its most urgent table is critical"
    assert _requests_the_daemon_accepts(defs, decided.run_requests) == [BATCH_JOB]
    assert sorted(batch_tables(request.tags)) == sorted(partitions)
    fleet_before = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    result = execute_run_request(defs, instance, request, BATCH_JOB)

    assert result.success, "one table's failure does not fail the run"
    maintained = {e.partition: e for e in result.asset_materializations_for_node("maintain_tables")
                  if e.asset_key == DEFAULT_NAMES.maintained_table}
    assert set(maintained) == set(healthy)
    for partition in healthy:
        assert maintained[partition].metadata[OUTCOME].value == "succeeded"
        assert maintained[partition].metadata["data_files_after"].value < 10
        assert _contents(spark, partition) == before[partition]
        assert latest_health(instance, partition).state == "healthy", "re-measured in the batch run"
    (failed,) = [
        e
        for e in result.asset_observations_for_node("maintain_tables")
        if e.asset_key == DEFAULT_NAMES.maintained_table
    ]
    assert failed.partition == broken and failed.metadata[OUTCOME].value == "failed"
    engine = Engine(scoped_settings)
    history = engine.history(table_key(broken))
    assert history.consecutive_failures == 1 and history.last_error
    assert all(engine.history(table_key(p)).consecutive_failures == 0 for p in healthy)

    # the run's log: per table one line per action, ending with Spark's progress (a line saying the
    # action runs only if it outlived the first poll, a second); what was recommended is the
    # materialization's to say, not a line (in a batch every line is an event the run stores)
    messages = [e.user_message for e in instance.all_logs(result.run_id) if not e.is_dagster_event]
    for partition in healthy:
        ended = [m for m in messages if m.startswith(f"table {partition}: ") and " succeeded in " in m]
        records = maintained[partition].metadata["actions"].value.records
        assert ended and len(ended) == sum(r.data["status"] == "succeeded" for r in records), messages
        assert all(re.search(r"\(Spark application \S+: jobs \d+/\d+ done, .*\)$", m) for m in ended), ended
    assert not [m for m in messages if "action(s)" in m], messages

    recommended = _recommended(result)
    assert set(recommended) == set(partitions), "the recommendation each table's maintenance acted on"
    for partition in partitions:
        recommendation = decode_recommendation(recommended[partition].metadata)
        assert recommendation is not None and recommendation.needs_work, partition
    results = _health_after_results(result)
    checks = {e.partition: e for e in results}
    assert len(results) == len(checks) == len(partitions) and set(checks) == set(partitions)
    assert all(checks[p].passed for p in healthy)
    assert not checks[broken].passed and "maintenance failed" in (checks[broken].description or "")
    expected = {p: ("SUCCEEDED", True) for p in healthy} | {broken: ("FAILED", True)}
    assert _health_after(instance, partitions) == expected
    # the run recorded its tables' health itself (above): no second health sync follows it, the fleet
    # refresh follows it directly
    skipped = after_run(defs, "post_maintenance_health_sensor", instance, result)
    assert isinstance(skipped, dg.SkipReason) and "maintenance batch" in (skipped.skip_message or "")
    refresh = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=fleet_before.cursor)
    assert refresh.get_num_requested(DEFAULT_NAMES.fleet_summary) == 1

    again = evaluate_sensor(defs, "maintenance_sensor", instance, cursor=decided.cursor)
    launched = [t for r in again.run_requests or [] for t in batch_tables(r.tags) or [r.partition_key]]
    assert not set(launched) & set(healthy), "maintained tables are not launched again"


def test_a_batch_whose_session_setting_spark_refuses_fails_and_charges_no_table(
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch's session settings (`connect_batch_conf`: on a Spark Connect server, code generation off)
    are the deployment's, not a table's: when Spark refuses one, the run fails naming it and no table's
    history counts a failure, so quarantine never follows. Here the batch is given a setting this
    local Spark really refuses (a static one), since a real Spark accepts the Connect settings."""
    defs = _batching(scoped_settings)
    lake = catalogs.get("lake")
    for name in ("a", "b"):
        small_file_table(lake, f"{namespace}.{name}", appends=10)
    partitions = discover(defs, instance)
    assert run_health_sync(defs, instance, partitions).success
    before = {p: arrow_fingerprint(lake.load_table(p.split(".", 1)[1])) for p in partitions}
    refused = {"spark.sql.catalogImplementation": "hive"}
    monkeypatch.setattr(batch_maintenance, "connect_batch_conf", lambda settings: refused)
    (request,) = evaluate_sensor(defs, "maintenance_sensor", instance).run_requests
    assert request.job_name == BATCH_JOB

    result = execute_run_request(defs, instance, request, BATCH_JOB)

    assert not result.success
    failures = [str(event.event_specific_data) for event in result.all_events if event.is_failure]
    assert any("batch session setting spark.sql.catalogImplementation=hive" in text for text in failures)
    engine = Engine(scoped_settings)
    for partition in partitions:
        history = engine.history(table_key(partition))
        assert history.consecutive_failures == 0 and not history.last_error, partition
        assert arrow_fingerprint(lake.load_table(partition.split(".", 1)[1])) == before[partition]


def test_a_table_above_the_smallest_tier_keeps_its_own_run(
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
) -> None:
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.small", appends=10)
    big = small_file_table(lake, f"{namespace}.big", appends=10)
    rows = 200_000  # one data file of a few hundred kB: past the first tier's 100 kB, unlike `small`
    big.append(pa.table({"id": range(rows), "name": [f"row {i}" for i in range(rows)]}, schema=SCHEMA))
    tiers = (
        SizingTier(name="tiny", below_bytes=100_000, cpu="1", memory="2Gi", spark_master="local[1]",
                   driver_memory="1g", shuffle_partitions=2, max_runtime_seconds=600),
        SizingTier(name="rest", cpu="2", memory="4Gi", spark_master="local[2]", driver_memory="2g",
                   shuffle_partitions=4, max_runtime_seconds=600),
    )
    defs = _batching(scoped_settings, sizing_tiers=tiers)
    partitions = discover(defs, instance)
    assert run_health_sync(defs, instance, partitions).success

    decided = evaluate_sensor(defs, "maintenance_sensor", instance)
    by_job = {r.job_name: r for r in decided.run_requests}
    assert set(by_job) == {BATCH_JOB, "maintenance"}, decided.run_requests
    assert sorted(_requests_the_daemon_accepts(defs, decided.run_requests)) == sorted(by_job)
    assert batch_tables(by_job[BATCH_JOB].tags) == [f"lake.{namespace}.small"]
    assert by_job["maintenance"].partition_key == f"lake.{namespace}.big"


def test_tables_of_a_batch_in_flight_wait_and_count_as_one_run_in_flight(
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
) -> None:
    defs = _batching(scoped_settings, max_maintenance_in_flight=2)
    lake = catalogs.get("lake")
    for name in ("busy", "free"):
        small_file_table(lake, f"{namespace}.{name}", appends=10)
    partitions = discover(defs, instance)
    assert run_health_sync(defs, instance, partitions).success
    busy, free = f"lake.{namespace}.busy", f"lake.{namespace}.free"
    seen: list[dg.SensorResult] = []

    @dg.asset(pool=MAINTENANCE_POOL)  # a batch run's op needs the maintenance pool
    def batch_in_flight() -> None:
        seen.append(evaluate_sensor(defs, "maintenance_sensor", instance))

    tags = {KIND_TAG: MAINTENANCE, BATCH_TABLES_TAG: json.dumps([busy])}
    assert dg.materialize([batch_in_flight], instance=instance, tags=tags).success
    (request,) = seen[0].run_requests
    assert batch_tables(request.tags) == [free], "the table of the batch in flight waits"


def test_a_table_a_batch_leaves_unhealthy_fails_its_check_with_a_warning(
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
) -> None:
    defs = _batching(scoped_settings)
    stuck = small_file_table(catalogs.get("lake"), f"{namespace}.stuck", appends=10, properties=NO_ACTIONS)
    (partition,) = discover(defs, instance)
    assert run_health_sync(defs, instance, [partition]).success
    assert latest_health(instance, partition).state == "critical"
    before = arrow_fingerprint(stuck)

    tags = {KIND_TAG: MAINTENANCE, BATCH_TABLES_TAG: json.dumps([partition])}
    result = defs.resolve_job_def(BATCH_JOB).execute_in_process(
        instance=instance, run_config=batch_run_config([partition]), tags=tags
    )

    assert result.success
    (maintained,) = [e for e in result.asset_materializations_for_node("maintain_tables")
                     if e.asset_key == DEFAULT_NAMES.maintained_table]
    assert maintained.metadata[OUTCOME].value == "nothing_to_do"
    recommended = _recommended(result)[partition]
    recommendation = decode_recommendation(recommended.metadata)
    assert recommendation is not None and not recommendation.needs_work
    assert {s.action for s in recommendation.skipped} == set(ACTION_ORDER)
    one_table = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance, partition_key=partition, asset_selection=[DEFAULT_NAMES.maintenance_recommendation]
    )
    (alone,) = one_table.asset_materializations_for_node("maintenance_recommendation")
    assert list(recommended.metadata) == list(alone.metadata), "the metadata a one-table run writes"
    (check,) = _health_after_results(result)
    assert check.partition == partition and not check.passed
    assert check.severity == dg.AssetCheckSeverity.WARN
    assert (check.description or "").startswith("still critical: ")
    assert _health_after(instance, [partition]) == {partition: ("FAILED", True)}
    assert arrow_fingerprint(catalogs.get("lake").load_table(f"{namespace}.stuck")) == before


def test_a_failed_table_no_longer_shows_its_earlier_passed_check(
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
) -> None:
    defs = _batching(scoped_settings)
    tidy = small_file_table(catalogs.get("lake"), f"{namespace}.tidy", appends=1, properties=NO_ACTIONS)
    (partition,) = discover(defs, instance)
    assert run_health_sync(defs, instance, [partition]).success
    before = arrow_fingerprint(tidy)
    batch = defs.resolve_job_def(BATCH_JOB)
    tags = {KIND_TAG: MAINTENANCE, BATCH_TABLES_TAG: json.dumps([partition])}
    config = batch_run_config([partition])
    assert batch.execute_in_process(instance=instance, run_config=config, tags=tags).success
    assert _health_after(instance, [partition]) == {partition: ("SUCCEEDED", True)}

    with tidy.transaction() as transaction:  # an invalid policy: this table's maintenance fails
        transaction.set_properties({"icepack.cadence-hours": "soon"})
    failed = batch.execute_in_process(instance=instance, run_config=config, tags=tags)

    assert failed.success, "the failure is the table's, not the run's"
    assert not _recommended(failed), "no recommendation under an invalid policy"
    (check,) = _health_after_results(failed)
    assert not check.passed and "icepack.cadence-hours" in (check.description or "")
    assert _health_after(instance, [partition]) == {partition: ("FAILED", True)}
    assert Engine(scoped_settings).history(table_key(partition)).consecutive_failures == 1
    assert arrow_fingerprint(catalogs.get("lake").load_table(f"{namespace}.tidy")) == before
