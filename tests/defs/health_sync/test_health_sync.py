"""Health sync: the schedule covers every table in runs of at most `health_sync_batch_size` tables
(unset: 1,000, more in a fleet over 20,000; contiguous partition ranges, never one run per table). A
table's first sync writes its `table_status` and `table_health` pair; a scheduled sync after that
writes a pair only for tables whose metadata or health changed (or are due a rewrite), while any other
run (a click, post-maintenance) writes every table it covers. A table whose metadata cannot be read is
recorded with the error and health `unknown`, never healthy."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import dagster as dg
import pyarrow as pa
from dagster_graphql.test.utils import define_out_of_process_context

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.health_sync.job import health_sync_requests, health_sync_run_config
from icepack_dagster.defs.health_sync.table_status_and_health import build_table_status_and_health
from icepack_dagster.defs.health_sync.table_sync import SYNC_REASON
from icepack_dagster.defs.materialization_codec import STATE, STATUS_ERROR, decode_status
from icepack_dagster.defs.run_tags import BATCH_TAG, KIND_TAG, OBSERVATION, SCHEDULE_NAME_TAG, deployment_tags
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.table_facts import Measurement
from tests.defs.dagster_testkit import (
    SCHEMA,
    discover,
    execute_run_request,
    latest_health,
    run_health_sync,
    small_file_table,
)
from tests.factories import make_health, make_status, settings_with_platform

NODE = "sync_tables"

TICK = datetime(2025, 3, 14, 12, 15, tzinfo=UTC)


def _schedule_requests(
    defs: dg.Definitions, instance: dg.DagsterInstance
) -> list[dg.RunRequest] | dg.SkipReason:
    schedule = defs.resolve_schedule_def("health_sync_schedule")
    with dg.build_schedule_context(instance=instance, scheduled_execution_time=TICK) as context:
        return schedule.evaluate_tick(context).run_requests or dg.SkipReason("no requests")


def test_no_tables_no_runs(defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    schedule = defs.resolve_schedule_def("health_sync_schedule")
    with dg.build_schedule_context(instance=instance) as context:
        data = schedule.evaluate_tick(context)
    assert not data.run_requests
    assert "no tables yet" in (data.skip_message or "")


def test_batched_sync_one_materialization_per_table_per_run(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.a_small", appends=12)
    small_file_table(lake, f"{namespace}.b_fine", appends=1)
    broken = small_file_table(lake, f"{namespace}.c_broken", appends=2)
    Path(urlparse(broken.current_snapshot().manifest_list).path).unlink()
    small_file_table(lake, f"{namespace}.d_fine", appends=1)
    small_file_table(lake, f"{namespace}.e_fine", appends=1)
    platform = PlatformSettings(health_sync_batch_size=2, health_sync_workers=3)
    defs = build_definitions(settings_with_platform(scoped_settings, platform))
    tables = discover(defs, instance)
    assert len(tables) == 5

    requests = _schedule_requests(defs, instance)
    assert isinstance(requests, list) and len(requests) == 3
    seen: Counter[str] = Counter()
    for request in requests:
        config = request.run_config["ops"]["sync_tables"]["config"]
        batch = config["tables"]
        assert 1 <= len(batch) <= 2 and config["writes"] == "changes"
        assert batch == tables[tables.index(batch[0]) : tables.index(batch[0]) + len(batch)]
        assert request.tags[BATCH_TAG].startswith(f"{len(batch)} table(s): {batch[0]}")
        result = execute_run_request(defs, instance, request, "health_sync")
        assert result.success
        assert result.dagster_run.tags[KIND_TAG] == OBSERVATION
        events = result.asset_materializations_for_node(NODE)
        for asset_key in (DEFAULT_NAMES.table_status, DEFAULT_NAMES.table_health):
            mine = [e for e in events if e.asset_key == asset_key]
            assert sorted(e.partition for e in mine) == sorted(batch), asset_key
            assert {e.metadata[SYNC_REASON].value for e in mine} == {"first materialization"}
        health_events = [e for e in events if e.asset_key == DEFAULT_NAMES.table_health]
        for event in health_events:
            assert event.metadata[STATE].value in {"healthy", "warning", "critical", "unknown"}
            assert event.metadata["summary"].value
        seen.update(e.partition for e in health_events)
    assert seen == Counter(tables)

    states = {t.rsplit(".", 1)[1]: latest_health(instance, t) for t in tables}
    assert states["a_small"].state == "critical"
    assert {i.code for i in states["a_small"].issues} == {"SMALL_FILES"}
    assert states["b_fine"].state == "healthy"
    assert states["c_broken"].state == "unknown"
    assert f"{namespace}" in (states["c_broken"].error or "")
    status_events = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=dg.AssetKey("table_status"), asset_partitions=[f"lake.{namespace}.c_broken"]
        ),
        limit=5,
    ).records
    assert len(status_events) == 1
    assert STATUS_ERROR in status_events[0].asset_materialization.metadata


def _written(result: dg.ExecuteInProcessResult) -> dict[str, str]:
    """Partition -> why its pair was written, checking status and health were written together."""
    events = result.asset_materializations_for_node(NODE)
    reasons = {(e.asset_key, e.partition): e.metadata[SYNC_REASON].value for e in events}
    status = {p: r for (key, p), r in reasons.items() if key == DEFAULT_NAMES.table_status}
    health = {p: r for (key, p), r in reasons.items() if key == DEFAULT_NAMES.table_health}
    assert status == health
    return status


def test_scheduled_sync_writes_only_what_changed(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    lake = catalogs.get("lake")
    growing = small_file_table(lake, f"{namespace}.growing", appends=1)
    small_file_table(lake, f"{namespace}.quiet", appends=1)
    small_file_table(lake, f"{namespace}.crowded", appends=9)
    tables = discover(defs, instance)

    first = _written(run_health_sync(defs, instance, tables, writes="changes"))
    assert set(first) == set(tables)

    unchanged = run_health_sync(defs, instance, tables, writes="changes")
    assert unchanged.success and _written(unchanged) == {}, "nothing changed, nothing is written"

    growing.append(pa.table({"id": [99], "name": ["late"]}, schema=SCHEMA))
    third = run_health_sync(defs, instance, tables, writes="changes")
    grown = f"lake.{namespace}.growing"
    assert _written(third) == {grown: "metadata changed"}
    status = decode_status(dict(third.asset_materializations_for_node(NODE)[0].metadata))
    assert status is not None and status.total_records == 2
    assert status.metadata_location == lake.load_table(f"{namespace}.growing").metadata_location

    everything = run_health_sync(defs, instance, tables)  # a launch from the UI: writes defaults to all
    assert _written(everything) == dict.fromkeys(tables, "every table of this run")
    assert latest_health(instance, f"lake.{namespace}.crowded").state == "critical"


def test_health_change_without_metadata_change_is_written(
    scoped_settings: IcepackSettings,
    platform: PlatformSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
) -> None:
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.few", appends=3)
    small_file_table(lake, f"{namespace}.crowded", appends=9)
    defs = build_definitions(settings_with_platform(scoped_settings, platform))
    tables = discover(defs, instance)
    assert set(_written(run_health_sync(defs, instance, tables, writes="changes"))) == set(tables)
    few = f"lake.{namespace}.few"
    assert latest_health(instance, few).state == "healthy"  # 3 small files: under the minimum count

    # The operator lowers the minimum count: no table changed, but `few` is now unhealthy. Its status
    # is not read again (the file-size limits are the same), its health is judged anew and written.
    stricter = scoped_settings.model_copy(
        update={"thresholds": scoped_settings.thresholds.model_copy(update={"small_file_min_count": 2})}
    )
    defs = build_definitions(settings_with_platform(stricter, platform))
    result = run_health_sync(defs, instance, tables, writes="changes")
    assert _written(result) == {few: "health changed"}
    assert latest_health(instance, few).state == "critical"


def test_a_table_that_cannot_be_measured_is_rewritten_only_when_due(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    broken = small_file_table(catalogs.get("lake"), f"{namespace}.broken", appends=2)
    Path(urlparse(broken.current_snapshot().manifest_list).path).unlink()
    tables = discover(defs, instance)

    first = _written(run_health_sync(defs, instance, tables, writes="changes"))
    assert first == {tables[0]: "first materialization"}
    assert latest_health(instance, tables[0]).state == "unknown"
    again = run_health_sync(defs, instance, tables, writes="changes")
    assert _written(again) == {}, "the same error is not rewritten"


def _planned_events(instance: dg.DagsterInstance, run_id: str) -> int:
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED, limit=10_000
    ).records
    return len(records)


def test_sync_runs_plan_no_materialization_per_table_and_a_click_writes_both_assets(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    """The health-sync job records materializations without planning one per table (one stored event
    per table and asset in Dagster's open-source storages) and a `healthy` check result per table; a
    click on the assets in the UI runs the multi-asset, which plans them as usual and writes every
    selected table with its check result."""
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.a", appends=1)
    small_file_table(lake, f"{namespace}.b", appends=9)
    tables = discover(defs, instance)

    sync = run_health_sync(defs, instance, tables)
    assert _planned_events(instance, sync.run_id) == 0 and len(_written(sync)) == 2
    evaluations = sync.get_asset_check_evaluations()
    checks = {(c.partition, c.passed, c.severity) for c in evaluations if c.check_name == "healthy"}
    warn, error = dg.AssetCheckSeverity.WARN, dg.AssetCheckSeverity.ERROR
    assert checks == {(tables[0], True, warn), (tables[1], False, error)}

    clicked = dg.materialize(
        [build_table_status_and_health("icepack")], instance=instance, partition_key=tables[1],
        resources=defs.resources,
    )
    assert clicked.success and _planned_events(instance, clicked.run_id) == 2
    events = clicked.asset_materializations_for_node("table_status_and_health")
    assert sorted((e.asset_key.to_user_string(), e.partition) for e in events) == [
        ("table_health", tables[1]), ("table_status", tables[1])
    ]
    assert latest_health(instance, tables[1]).state == "critical"
    checks = {c.check_name: (c.partition, c.passed) for c in clicked.get_asset_check_evaluations()}
    assert checks == {"healthy": (tables[1], False), "needs_operator": (tables[1], True)}


def test_a_sync_of_unknown_tables_names_them(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    small_file_table(catalogs.get("lake"), f"{namespace}.real", appends=1)
    discover(defs, instance)
    real = f"lake.{namespace}.real"
    typo = f"lake.{namespace}.reel"

    partly = run_health_sync(defs, instance, [typo, real])
    assert partly.success and _written(partly) == {real: "every table of this run"}
    job = defs.resolve_job_def("health_sync")
    failed = job.execute_in_process(
        instance=instance, run_config=health_sync_run_config([typo], "all"), raise_on_error=False
    )
    assert not failed.success
    failure = failed.failure_data_for_node("sync_tables")
    assert failure is not None and "none of the tables of this run" in failure.error.message
    assert not instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=DEFAULT_NAMES.table_status, asset_partitions=[typo]), limit=1
    ).records


def test_a_result_stored_after_a_sync_began_is_not_overwritten(
    scoped_settings: IcepackSettings, namespace: str
) -> None:
    """A scheduled sync measuring the old metadata file must not bury the post-maintenance refresh that
    stored a newer result while it ran: `sync_tables` leaves out tables written since it began."""
    from icepack_dagster.defs.health_sync.table_sync import _written_since

    engine = Engine(scoped_settings)
    a, b = f"lake.{namespace}.a", f"lake.{namespace}.b"
    began = datetime.now(UTC)
    engine.facts.record_measurements(
        [Measurement(a, make_status(), None, make_health(HealthState.HEALTHY, table=a))], datetime.now(UTC)
    )
    assert _written_since(engine, [a, b], began) == {a}
    assert _written_since(engine, [a, b], datetime.now(UTC)) == set()



CreateRun = Callable[..., dg.DagsterRun]


@contextmanager
def _sync_runs(tmp_path: Path, instance: dg.DagsterInstance) -> Iterator[tuple[dg.Definitions, CreateRun]]:
    """Definitions whose health-sync batches hold 2 tables, and `create(request, status, tags=None)`,
    which creates a health-sync run as Dagster's daemons create them: from a run request, with the
    request's tags (or `tags`) and the job's origin from a code server loading the code location, which
    a queued run must have."""
    location = tmp_path / "location.py"
    location.write_text(
        "from icepack_dagster.definitions import build_definitions\n"
        "from icepack_dagster.config.platform import PlatformSettings\n"
        "from icepack_dagster.config.settings import load_settings\n"
        "from tests.factories import make_health, make_status, settings_with_platform\n\n"
        f"settings = load_settings(home={str(tmp_path / 'home')!r})\n"
        "platform = PlatformSettings(health_sync_batch_size=2)\n"
        "defs = build_definitions(settings_with_platform(settings, platform))\n"
    )
    platform = PlatformSettings(health_sync_batch_size=2)
    defs = build_definitions(settings_with_platform(load_settings(home=tmp_path / "home"), platform))
    job = defs.resolve_job_def("health_sync")
    with define_out_of_process_context(str(location), "defs", instance) as context:
        (name,) = context.code_location_names
        origin = context.get_code_location(name).get_repository("__repository__").get_full_job(
            job.name
        ).get_remote_origin()

        def create(
            request: dg.RunRequest, status: dg.DagsterRunStatus, tags: Mapping[str, str] | None = None
        ) -> dg.DagsterRun:
            return instance.create_run_for_job(
                job, run_config=request.run_config, tags=request.tags if tags is None else tags,
                status=status, remote_job_origin=origin,
            )

        yield defs, create


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance, at: datetime) -> dg.ScheduleExecutionData:
    schedule = defs.resolve_schedule_def("health_sync_schedule")
    with dg.build_schedule_context(instance=instance, scheduled_execution_time=at) as context:
        return schedule.evaluate_tick(context)


def _batches(data: dg.ScheduleExecutionData) -> list[list[str]]:
    return [r.run_config["ops"][NODE]["config"]["tables"] for r in data.run_requests or []]


def test_a_tick_holds_back_a_batch_while_an_earlier_ticks_run_of_it_has_not_ended(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    """A sync longer than the schedule's interval must not pile up in the queue: a tick requests no
    batch whose run from an earlier tick is still queued or running, says which it held back and what
    to change, and requests it again once that run ended. Runs the schedule did not request (a
    post-maintenance refresh) hold nothing back."""
    tables = [f"lake.ns.t{index}" for index in range(5)]
    instance.add_dynamic_partitions("iceberg_tables", tables)
    with _sync_runs(tmp_path, instance) as (defs, create):
        first = _tick(defs, instance, TICK)
        assert _batches(first) == [tables[0:2], tables[2:4], tables[4:5]]
        requests = first.run_requests or []
        assert all(r.tags[SCHEDULE_NAME_TAG] == "health_sync_schedule" for r in requests)
        queued = create(requests[0], dg.DagsterRunStatus.QUEUED)
        started = create(requests[1], dg.DagsterRunStatus.STARTED)
        create(requests[2], dg.DagsterRunStatus.SUCCESS)
        refresh = {key: value for key, value in requests[2].tags.items() if key != SCHEDULE_NAME_TAG}
        create(requests[2], dg.DagsterRunStatus.QUEUED, refresh)

        second = _tick(defs, instance, TICK.replace(minute=30))
        assert _batches(second) == [tables[4:5]], "a batch whose earlier run is unfinished was requested"
        resent = create((second.run_requests or [])[0], dg.DagsterRunStatus.STARTING)

        third = _tick(defs, instance, TICK.replace(minute=45))
        assert not third.run_requests
        assert (third.skip_message or "").startswith(
            "3 of 3 health-sync batches not requested: 3 run(s) of earlier ticks still queued or running "
            "cover 5 of their tables"
        )
        assert "health_sync_cron" in (third.skip_message or "")

        instance.report_run_canceled(queued)
        instance.report_run_failed(started)
        instance.report_run_failed(resent)
        fourth = _tick(defs, instance, TICK.replace(hour=13, minute=0))
        assert _batches(fourth) == [tables[0:2], tables[2:4], tables[4:5]]


def test_a_tick_leaves_out_the_tables_whose_first_sync_is_still_queued_or_running(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    """On a first deployment the discovery sensor requests every table's first sync at once; a schedule
    tick while those runs wait in the queue must not request the same tables again (the fleet would be
    synced twice at once). It batches the other tables, says how many it left out, and covers them once
    their first sync ended (here: failed or canceled). The discovery runs carry Dagster's own sensor tag, as
    its sensor daemon tags every run a sensor requests."""
    tables = [f"lake.ns.t{index}" for index in range(5)]
    instance.add_dynamic_partitions("iceberg_tables", tables)
    with _sync_runs(tmp_path, instance) as (defs, create):
        discovery = defs.resolve_sensor_def("iceberg_table_discovery")
        assert discovery.job_name == "health_sync"  # its runs are the schedule's job's runs
        sensor = dg.DagsterRun.tags_for_sensor(discovery)
        tags = deployment_tags(PlatformSettings(health_sync_batch_size=2))
        discovered = health_sync_requests(DEFAULT_NAMES, tables, 2, "discovered:1", tags=tags)
        queued, started, starting = (
            create(request, status, {**request.tags, **sensor})
            for request, status in zip(
                discovered,
                [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING],
                strict=True,
            )
        )

        first = _tick(defs, instance, TICK)
        assert not first.run_requests, "a table in its first sync was requested again"
        assert first.skip_message == (
            "5 table(s) left out: their first sync (a discovery run) is still queued or running"
        )

        instance.report_run_failed(started)
        instance.report_run_canceled(starting)
        second = _tick(defs, instance, TICK.replace(minute=30))
        assert _batches(second) == [tables[2:4], tables[4:5]]

        instance.report_run_canceled(queued)
        third = _tick(defs, instance, TICK.replace(minute=45))
        assert _batches(third) == [tables[0:2], tables[2:4], tables[4:5]]


def test_a_large_fleet_is_synced_in_at_most_twenty_runs_unless_the_batch_size_is_set(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    """Unset, `health_sync_batch_size` is 1,000 up to 20,000 tables and grows beyond, so that a sync
    starts at most 20 runs (each a process or pod that costs seconds to start whatever it does) until
    5,000 tables per run; set, it is the batch whatever the fleet. Every table is in exactly one run,
    in contiguous partition ranges. (Discovery asks the same `health_sync_batch` for its first syncs:
    tests/defs/discovery, with the setting.)"""
    tables = [f"lake.ns.t{index:05d}" for index in range(25_001)]
    instance.add_dynamic_partitions("iceberg_tables", tables)
    home = load_settings(home=tmp_path / "home")
    unset, set_ = PlatformSettings(), PlatformSettings(health_sync_batch_size=2_000)
    for platform, batch, runs in ((unset, 1_251, 20), (set_, 2_000, 13)):
        defs = build_definitions(settings_with_platform(home, platform))
        requests = _schedule_requests(defs, instance)
        assert isinstance(requests, list)
        batches = [r.run_config["ops"][NODE]["config"]["tables"] for r in requests]
        assert len(batches) == runs, platform
        assert [len(b) for b in batches[:-1]] == [batch] * (runs - 1), platform
        assert [t for b in batches for t in b] == sorted(tables)
    sizes = {n: PlatformSettings().health_sync_batch(n) for n in (1, 20_000, 20_001, 100_000, 1_000_000)}
    assert sizes == {1: 1_000, 20_000: 1_000, 20_001: 1_001, 100_000: 5_000, 1_000_000: 5_000}
