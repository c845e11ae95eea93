"""The discovery sensor keeps the `iceberg_tables` partitions equal to the catalogs' tables: it adds
new tables (and asks for their first health sync, batched), removes dropped ones, is idempotent, and
when any catalog or namespace cannot be listed it changes nothing and says why: an outage never
deletes a partition. It only returns requests; the test applies them as the daemon would."""

from __future__ import annotations

import dagster as dg

from icepack_dagster.config.catalogs import PostgresCatalogSettings
from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.partitions import TABLE_PARTITIONS
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    small_file_table,
    sync_request,
)
from tests.factories import settings_with_platform

SENSOR = "iceberg_table_discovery"


def partitions(instance: dg.DagsterInstance) -> list[str]:
    return list(instance.get_dynamic_partitions(TABLE_PARTITIONS.name))


def test_adds_removes_and_is_idempotent(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    lake = catalogs.get("lake")
    for name in ("a", "b", "c"):
        small_file_table(lake, f"{namespace}.{name}", appends=1)
    result = evaluate_sensor(defs, SENSOR, instance)
    assert isinstance(result, dg.SensorResult)
    apply_partition_requests(instance, result)
    expected = [f"lake.{namespace}.{n}" for n in ("a", "b", "c")]
    assert partitions(instance) == expected
    (first_sync,) = result.run_requests
    assert first_sync.job_name == "health_sync"
    assert sync_request(first_sync) == (expected, "changes")

    again = evaluate_sensor(defs, SENSOR, instance, cursor=result.cursor)
    assert isinstance(again, dg.SkipReason)
    assert "already match" in (again.skip_message or "")

    lake.drop_table(f"{namespace}.b")
    small_file_table(lake, f"{namespace}.d", appends=1)
    changed = evaluate_sensor(defs, SENSOR, instance, cursor=result.cursor)
    requests = {type(r).__name__: list(r.partition_keys) for r in changed.dynamic_partitions_requests}
    assert requests == {
        "AddDynamicPartitionsRequest": [f"lake.{namespace}.d"],
        "DeleteDynamicPartitionsRequest": [f"lake.{namespace}.b"],
    }
    apply_partition_requests(instance, changed)
    assert sorted(partitions(instance)) == [f"lake.{namespace}.{n}" for n in ("a", "c", "d")]
    (new_sync,) = changed.run_requests
    assert sync_request(new_sync) == ([f"lake.{namespace}.d"], "changes")
    assert new_sync.run_key != first_sync.run_key


def test_new_tables_are_synced_in_batches(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    for i in range(5):
        small_file_table(catalogs.get("lake"), f"{namespace}.t{i}", appends=1)
    platform = PlatformSettings(health_sync_batch_size=2)
    defs = build_definitions(settings_with_platform(scoped_settings, platform))
    result = evaluate_sensor(defs, SENSOR, instance)
    apply_partition_requests(instance, result)
    keys = partitions(instance)
    batches = [sync_request(r)[0] for r in result.run_requests]
    assert batches == [keys[0:2], keys[2:4], keys[4:5]]


def test_a_mass_drop_is_removed_over_several_ticks(
    scoped_settings: IcepackSettings, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    lake = catalogs.get("lake")
    for i in range(5):
        small_file_table(lake, f"{namespace}.t{i}", appends=1)
    platform = PlatformSettings(partition_removals_per_tick=2)
    defs = build_definitions(settings_with_platform(scoped_settings, platform))
    first = evaluate_sensor(defs, SENSOR, instance)
    apply_partition_requests(instance, first)
    for i in range(4):
        lake.drop_table(f"{namespace}.t{i}")

    cursor = first.cursor
    for left in (3, 1):  # at most 2 removed per tick
        result = evaluate_sensor(defs, SENSOR, instance, cursor=cursor)
        apply_partition_requests(instance, result)
        cursor = result.cursor
        assert len(partitions(instance)) == left
        assert not result.run_requests, "no health sync is owed to a kept table"
    assert partitions(instance) == [f"lake.{namespace}.t4"]
    assert isinstance(evaluate_sensor(defs, SENSOR, instance, cursor=cursor), dg.SkipReason)


def test_a_failing_catalog_changes_nothing(
    defs: dg.Definitions,
    scoped_settings: IcepackSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
) -> None:
    small_file_table(catalogs.get("lake"), f"{namespace}.kept", appends=1)
    apply_partition_requests(instance, evaluate_sensor(defs, SENSOR, instance))
    before = partitions(instance)
    assert before == [f"lake.{namespace}.kept"]

    unreachable = PostgresCatalogSettings(
        host="127.0.0.1", port=1, database="nowhere", user="nobody", warehouse="/nonexistent"
    )
    broken = scoped_settings.model_copy(
        update={
            "catalogs": {**scoped_settings.catalogs, "down": unreachable},
            "include": [*scoped_settings.include, "down.*"],
        }
    )
    catalogs.get("lake").drop_table(f"{namespace}.kept")
    defs = build_definitions(settings_with_platform(broken, PlatformSettings()))
    result = evaluate_sensor(defs, SENSOR, instance)
    assert isinstance(result, dg.SkipReason)
    assert "incomplete" in result.skip_message and "down" in result.skip_message
    assert "left unchanged" in result.skip_message
    assert partitions(instance) == before
