"""The maintenance sensor's decisions, on real tables, a real instance and real health events: it
launches only warning/critical tables (never unknown or healthy), one table per run, with run keys
naming the table and the health event (identical when a restarted daemon re-reads from an old cursor,
so no duplicate); it reads health incrementally through its versioned cursor; it honours cadence
(since the table's last maintenance run), the global cap on maintenance runs in flight, a table
already in flight, maintenance windows, disabled policy and quarantine (which never uses up the
tick's budget); and it picks the highest recommendation priority first."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

import dagster as dg
import pytest

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.maintenance_pool import ensure_pool_limit, pool_limit_problem, stored_pool_limit
from icepack_dagster.defs.partitions import TABLE_PARTITIONS
from icepack_dagster.defs.run_tags import (
    KIND_TAG,
    MAINTENANCE,
    MAINTENANCE_POOL,
    PRIORITY_TAG,
    TABLE_TAG,
    maintenance_tags,
)
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.decisions.maintenance_selection import order_candidates
from icepack_dagster.domain.decisions.sensor_cursors import MaintenanceCursor
from icepack_dagster.domain.table.key import parse_table_key
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.conftest import pg_table_count
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    record_failures,
    run_health_sync,
    small_file_table,
)
from tests.factories import settings_with_platform

SENSOR = "maintenance_sensor"


def sync_all(defs: dg.Definitions, instance: dg.DagsterInstance) -> list[str]:
    """Discovery, then one health sync over every table: what the platform does on its own."""
    apply_partition_requests(instance, evaluate_sensor(defs, "iceberg_table_discovery", instance))
    tables = list(instance.get_dynamic_partitions("iceberg_tables"))
    assert run_health_sync(defs, instance, tables).success
    return tables


def launched(result: dg.SensorResult) -> list[str]:
    return [r.partition_key for r in result.run_requests or []]


def key(namespace: str, name: str) -> str:
    return f"lake.{namespace}.{name}"


def definitions_with(settings: IcepackSettings, **knobs: object) -> dg.Definitions:
    return build_definitions(settings_with_platform(settings, PlatformSettings(**knobs)))  # type: ignore[arg-type]


def fail_maintenance(settings: IcepackSettings, partition: str, times: int) -> None:
    record_failures(settings, partition, times)


def evaluate_inside_a_run(
    defs: dg.Definitions, instance: dg.DagsterInstance, tags: dict[str, str]
) -> dg.SensorResult:
    """Evaluate the sensor while a real maintenance run with `tags` is in progress (it needs the
    maintenance pool, as every maintenance run does, so it counts as in flight)."""
    seen: list[dg.SensorResult] = []

    @dg.asset(pool=MAINTENANCE_POOL)
    def busy_run() -> None:
        seen.append(evaluate_sensor(defs, SENSOR, instance))

    assert dg.materialize([busy_run], instance=instance, tags=tags).success
    return seen[0]


def test_launches_unhealthy_tables_once_with_deterministic_keys(
    defs: dg.Definitions,
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
) -> None:
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.small", appends=12)
    small_file_table(lake, f"{namespace}.fine", appends=1)
    broken = small_file_table(lake, f"{namespace}.broken", appends=12)
    Path(urlparse(broken.current_snapshot().manifest_list).path).unlink()
    sync_all(defs, instance)

    first = evaluate_sensor(defs, SENSOR, instance)
    assert launched(first) == [key(namespace, "small")]
    (request,) = first.run_requests
    health_event = Engine(scoped_settings).facts.measured([key(namespace, "small")])[key(namespace, "small")]
    assert request.run_key == f"maintain:{key(namespace, 'small')}:health-{health_event.health_event}"
    assert request.tags[TABLE_TAG] == key(namespace, "small")
    assert request.tags[KIND_TAG] == MAINTENANCE
    assert request.tags[PRIORITY_TAG] == "2", "a critical table's run is dequeued first"
    assert request.job_name in (None, "maintenance")

    cursor = MaintenanceCursor.model_validate_json(first.cursor)
    assert cursor.version == 2 and cursor.after_health_event >= health_event.health_event
    assert cursor.pending == {}

    restarted = evaluate_sensor(defs, SENSOR, instance, cursor=None)
    assert [r.run_key for r in restarted.run_requests] == [request.run_key]

    quiet = evaluate_sensor(defs, SENSOR, instance, cursor=first.cursor)
    assert not quiet.run_requests
    assert "no table needs maintenance (0 new health event(s) read)" in quiet.skip_reason.skip_message


def test_a_broken_cursor_starts_over_without_duplicates(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    small_file_table(catalogs.get("lake"), f"{namespace}.small", appends=12)
    sync_all(defs, instance)
    first = evaluate_sensor(defs, SENSOR, instance)
    for stale in ("not json", json.dumps({"version": 1, "after_storage_id": 5})):
        again = evaluate_sensor(defs, SENSOR, instance, cursor=stale)
        assert [r.run_key for r in again.run_requests] == [r.run_key for r in first.run_requests]


def test_cadence_since_the_last_maintenance_outcome(
    defs: dg.Definitions,
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
) -> None:
    """A maintenance that did nothing is in the table's facts, not in its history: it still counts."""
    small_file_table(catalogs.get("lake"), f"{namespace}.small", appends=12)
    sync_all(defs, instance)
    Engine(scoped_settings).facts.record_outcome(key(namespace, "small"), "nothing_to_do", utc_now(), 0, 0)
    result = evaluate_sensor(defs, SENSOR, instance)
    assert not result.run_requests
    assert (
        "cadence not elapsed" in result.skip_reason.skip_message
        and "cadence 24 h" in result.skip_reason.skip_message
    )
    assert MaintenanceCursor.model_validate_json(result.cursor).pending == {}


def test_a_table_created_again_under_its_name_is_not_held_by_its_predecessor(
    defs: dg.Definitions,
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
) -> None:
    """Dropped and created again (a new Iceberg UUID): the health sync sets the former table's history
    aside, and neither its maintenance an hour ago (cadence) nor its failures (quarantine) hold the new
    table back; the former history stays readable under its set-aside name."""
    lake, table = catalogs.get("lake"), key(namespace, "small")
    former = small_file_table(lake, f"{namespace}.small", appends=12)
    sync_all(defs, instance)
    engine = Engine(scoped_settings)
    record_failures(scoped_settings, table, times=3)
    engine.facts.record_outcome(table, "succeeded", utc_now() - timedelta(hours=1), 0, 0)
    held = evaluate_sensor(defs, SENSOR, instance)
    assert not held.run_requests and "cadence not elapsed" in held.skip_reason.skip_message

    lake.drop_table(f"{namespace}.small")
    again = small_file_table(lake, f"{namespace}.small", appends=12)
    assert again.metadata.table_uuid != former.metadata.table_uuid
    synced = run_health_sync(defs, instance, [table])
    assert synced.success
    said = [e.user_message for e in instance.all_logs(synced.run_id) if "created again" in e.user_message]
    assert said == [f"{table}: created again under its name (the former table's UUID was "
                    f"{former.metadata.table_uuid}); it starts a history of its own, the former one is kept "
                    f"as {table}@{former.metadata.table_uuid}"]

    assert launched(evaluate_sensor(defs, SENSOR, instance, cursor=held.cursor)) == [table]
    fresh = engine.history(parse_table_key(table))
    assert (fresh.consecutive_failures, fresh.last_run_at) == (0, None)
    aside = engine.history_store.history(f"{table}@{former.metadata.table_uuid}", quarantine_after_failures=3)
    assert aside.quarantined and aside.consecutive_failures == 3


def test_cap_in_flight_and_busy_table(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    small_file_table(catalogs.get("lake"), f"{namespace}.small", appends=12)
    capped = definitions_with(scoped_settings, max_maintenance_in_flight=1)
    sync_all(capped, instance)
    elsewhere = maintenance_tags("lake.other.table")
    result = evaluate_inside_a_run(capped, instance, elsewhere)
    assert not result.run_requests
    assert "1 maintenance run(s) in flight, the cap is 1; 1 table(s) wait" in result.skip_reason.skip_message
    assert key(namespace, "small") in MaintenanceCursor.model_validate_json(result.cursor).pending

    roomy = definitions_with(scoped_settings, max_maintenance_in_flight=5)
    busy = evaluate_inside_a_run(roomy, instance, maintenance_tags(key(namespace, "small")))
    assert not busy.run_requests
    assert "already queued or running" in busy.skip_reason.skip_message


def test_a_materialize_of_maintained_table_counts_in_flight_and_holds_its_table(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    """A run launched from the asset page (any job selecting maintained_table, with only Dagster's own
    tags) is a maintenance in flight for the sensor: it takes a slot and its table is busy."""
    small_file_table(catalogs.get("lake"), f"{namespace}.small", appends=12)
    roomy = definitions_with(scoped_settings, max_maintenance_in_flight=5)
    capped = definitions_with(scoped_settings, max_maintenance_in_flight=1)
    sync_all(roomy, instance)
    table = key(namespace, "small")
    seen: dict[str, dg.SensorResult] = {}

    @dg.asset(key=DEFAULT_NAMES.maintained_table, partitions_def=TABLE_PARTITIONS, pool=MAINTENANCE_POOL)
    def manual_maintenance() -> None:  # stands in for the real asset: the run is what is judged
        seen["roomy"] = evaluate_sensor(roomy, SENSOR, instance)
        seen["capped"] = evaluate_sensor(capped, SENSOR, instance)

    asset_job = dg.Definitions(assets=[manual_maintenance]).resolve_implicit_global_asset_job_def()
    run = asset_job.execute_in_process(
        instance=instance, partition_key=table, asset_selection=[DEFAULT_NAMES.maintained_table]
    )
    assert run.success and run.dagster_run.job_name == "__ASSET_JOB"
    assert MAINTENANCE not in run.dagster_run.tags.values(), "the run carries only Dagster's tags"
    assert not seen["roomy"].run_requests
    assert "already queued or running" in seen["roomy"].skip_reason.skip_message
    assert not seen["capped"].run_requests
    assert "1 maintenance run(s) in flight, the cap is 1" in seen["capped"].skip_reason.skip_message


def test_window_waits_and_disabled_policy_drops(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    # two days on: still not today if midnight passes while the test runs
    later_day = (datetime.now(UTC) + timedelta(days=2)).strftime("%a").lower()
    lake = catalogs.get("lake")
    small_file_table(
        lake, f"{namespace}.later", appends=12, properties={"icepack.window": f"{later_day} 00-24"}
    )
    small_file_table(lake, f"{namespace}.off", appends=12, properties={"icepack.enabled": "false"})
    sync_all(defs, instance)
    result = evaluate_sensor(defs, SENSOR, instance)
    assert not result.run_requests
    message = result.skip_reason.skip_message
    assert f"{key(namespace, 'later')}: outside its maintenance window" in message
    assert f"{key(namespace, 'off')}: disabled by policy" in message
    assert set(MaintenanceCursor.model_validate_json(result.cursor).pending) == {key(namespace, "later")}


def test_priority_first_within_the_tick_budget(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    lake = catalogs.get("lake")
    for name, appends in (("few", 9), ("many", 30), ("some", 15)):
        small_file_table(lake, f"{namespace}.{name}", appends=appends)
    defs = definitions_with(scoped_settings, maintenance_runs_per_tick=1, max_maintenance_in_flight=5)
    sync_all(defs, instance)
    engine = Engine(scoped_settings)
    priorities = {
        p: engine.recommend(parse_table_key(p)).priority
        for p in (key(namespace, n) for n in ("few", "many", "some"))
    }
    best = max(priorities, key=priorities.__getitem__)
    assert len(set(priorities.values())) == 3, priorities
    result = evaluate_sensor(defs, SENSOR, instance)
    assert launched(result) == [best]
    waiting = MaintenanceCursor.model_validate_json(result.cursor).pending
    assert set(waiting) == set(priorities) - {best}
    second = evaluate_sensor(defs, SENSOR, instance, cursor=result.cursor)
    assert launched(second) == [max(waiting, key=priorities.__getitem__)]


def test_the_cursor_remembers_the_most_urgent_pending_tables_only(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    lake = catalogs.get("lake")
    for i in range(12):
        small_file_table(lake, f"{namespace}.t{i:02d}", appends=9 + 3 * i)
    unbounded = definitions_with(scoped_settings, maintenance_runs_per_tick=1)
    sync_all(unbounded, instance)
    everything = MaintenanceCursor.model_validate_json(evaluate_sensor(unbounded, SENSOR, instance).cursor)
    assert len(everything.pending) == 11  # 12 critical tables, one launched

    bounded = definitions_with(scoped_settings, max_pending_tables=10, maintenance_runs_per_tick=1)
    result = evaluate_sensor(bounded, SENSOR, instance)
    pending = MaintenanceCursor.model_validate_json(result.cursor).pending
    assert set(pending) == set(order_candidates(everything.pending)[:10])


def test_quarantined_tables_are_skipped_without_using_the_budget(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.broken", appends=40)
    small_file_table(lake, f"{namespace}.other", appends=10)
    fail_maintenance(scoped_settings, key(namespace, "broken"), times=3)
    defs = definitions_with(scoped_settings, maintenance_candidates_per_tick=1)
    sync_all(defs, instance)
    result = evaluate_sensor(defs, SENSOR, instance)
    assert launched(result) == [key(namespace, "other")]
    assert key(namespace, "broken") not in MaintenanceCursor.model_validate_json(result.cursor).pending

    release = defs.resolve_job_def("release_quarantine_job").execute_in_process(
        instance=instance,
        run_config={"ops": {"release_quarantine": {"config": {"table": key(namespace, "broken")}}}},
    )
    assert release.success
    assert not Engine(scoped_settings).history(parse_table_key(key(namespace, "broken"))).quarantined
    run_health_sync(defs, instance, [key(namespace, "broken")])
    after = evaluate_sensor(defs, SENSOR, instance, cursor=result.cursor)
    assert launched(after) == [key(namespace, "broken")]


@pytest.mark.postgres
def test_decisions_on_postgres_storage(
    defs: dg.Definitions,
    pg_instance: dg.DagsterInstance,
    dagster_pg_database: str,
    catalogs: CatalogSet,
    namespace: str,
) -> None:
    """The same loop on the production instance configuration (dagster-postgres)."""
    small_file_table(catalogs.get("lake"), f"{namespace}.small", appends=12)
    small_file_table(catalogs.get("lake"), f"{namespace}.fine", appends=1)
    sync_all(defs, pg_instance)
    assert pg_table_count(dagster_pg_database) > 0
    result = evaluate_sensor(defs, SENSOR, pg_instance)
    assert launched(result) == [key(namespace, "small")]
    again = evaluate_sensor(defs, SENSOR, pg_instance, cursor=result.cursor)
    assert not again.run_requests


def test_run_sizing_tags_reach_the_run_and_size_its_spark(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    """With run sizing on, a launched run carries the dagster-k8s pod config and the Spark settings
    for its table's tier, and the Spark resource of that run builds its session from them."""
    from icepack_dagster.defs.resources import sized_settings
    from icepack_dagster.domain.sizing.run_sizing import K8S_CONFIG_TAG, SIZE_TAG, SPARK_CONF_TAG

    small_file_table(catalogs.get("lake"), f"{namespace}.sized", appends=12)
    defs = definitions_with(scoped_settings, run_sizing=True)
    sync_all(defs, instance)
    (request,) = [
        r for r in evaluate_sensor(defs, SENSOR, instance).run_requests or []
        if r.partition_key == key(namespace, "sized")
    ]
    assert request.tags[SIZE_TAG] == "small"
    pod = json.loads(request.tags[K8S_CONFIG_TAG])
    assert pod["container_config"]["resources"]["requests"]["cpu"]
    sized = sized_settings(scoped_settings, request.tags, key(namespace, "sized"))
    assert sized.spark.master == json.loads(request.tags[SPARK_CONF_TAG])["spark.master"] == "local[2]"
    assert sized.catalogs == scoped_settings.catalogs
    assert sized_settings(scoped_settings, {}, "t") is scoped_settings


def test_configured_sizing_tiers_size_the_run(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    """Tiers from the settings' platform section (docs/KUBERNETES.md), not the built-in ones, size a run."""
    from icepack_dagster.domain.sizing.run_sizing import SIZE_TAG, SPARK_CONF_TAG
    from icepack_dagster.domain.sizing.tiers import SizingTier

    only = SizingTier(name="only", cpu="1", memory="2Gi", spark_master="local[1]", driver_memory="1g")
    small_file_table(catalogs.get("lake"), f"{namespace}.tiered", appends=12)
    defs = definitions_with(scoped_settings, run_sizing=True, sizing_tiers=(only,))
    sync_all(defs, instance)
    (request,) = [
        r for r in evaluate_sensor(defs, SENSOR, instance).run_requests or []
        if r.partition_key == key(namespace, "tiered")
    ]
    assert request.tags[SIZE_TAG] == "only"
    assert json.loads(request.tags[SPARK_CONF_TAG])["spark.master"] == "local[1]"


def test_orphan_sweeps_take_only_the_slots_unhealthy_tables_leave(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.crowded", appends=12)
    small_file_table(lake, f"{namespace}.quiet", appends=2)
    one_slot = definitions_with(scoped_settings, orphan_sweep=True, maintenance_runs_per_tick=1,
                             max_maintenance_in_flight=5)
    sync_all(one_slot, instance)

    first = evaluate_sensor(one_slot, SENSOR, instance)
    assert launched(first) == [key(namespace, "crowded")], "the unhealthy table goes first"
    assert first.run_requests[0].tags[PRIORITY_TAG] == "2"
    waited = MaintenanceCursor.model_validate_json(first.cursor)
    assert waited.sweep_waiting == [], "no slot was left, so no sweep was even judged"

    second = evaluate_sensor(one_slot, SENSOR, instance, cursor=first.cursor)
    assert launched(second) == [key(namespace, "quiet")], "the healthy table's orphan sweep is due"
    assert second.run_requests[0].tags[TABLE_TAG] == key(namespace, "quiet")
    assert second.run_requests[0].tags[PRIORITY_TAG] == "0", "a healthy table's sweep: default priority"

    two_slots = definitions_with(scoped_settings, orphan_sweep=True, maintenance_runs_per_tick=2,
                              max_maintenance_in_flight=5)
    fresh = dg.instance_for_test()
    with fresh as other:
        sync_all(two_slots, other)
        both = evaluate_sensor(two_slots, SENSOR, other)
        assert launched(both) == [key(namespace, "crowded"), key(namespace, "quiet")]


def test_the_first_tick_stores_the_pools_missing_limit_and_keeps_an_operators(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance
) -> None:
    """A component added to a project starts no start-up step: on a fresh instance the pool has no
    limit, so manual and backfilled maintenance runs would not be capped until the sensor stores it.
    A limit someone stored is theirs: the sensor keeps it (and says it differs)."""
    defs = definitions_with(scoped_settings, max_maintenance_in_flight=3)
    assert stored_pool_limit(instance, MAINTENANCE_POOL) is None
    evaluate_sensor(defs, SENSOR, instance)
    assert stored_pool_limit(instance, MAINTENANCE_POOL) == 3

    instance.event_log_storage.set_concurrency_slots(MAINTENANCE_POOL, 1)
    evaluate_sensor(defs, SENSOR, instance)
    assert stored_pool_limit(instance, MAINTENANCE_POOL) == 1
    platform = PlatformSettings(max_maintenance_in_flight=3)  # what definitions_with built
    assert ensure_pool_limit(instance, platform) == (pool_limit_problem(instance, platform), True)
