"""Health sync: the schedule covers every table in runs of at most `health_sync_batch_size` tables
(contiguous partition ranges, never one run per table); each run materializes `table_status` and
`table_health` exactly once per table in it, each with that table's own metadata; a table whose
metadata cannot be read is recorded with the error and health `unknown`, never healthy."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import dagster as dg

from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.assets.table_health import table_health
from icepack_dagster.defs.metadata import STATE, STATUS_ERROR
from icepack_dagster.defs.platform_settings import PlatformSettings
from icepack_dagster.defs.tags import KIND_TAG, OBSERVATION, RANGE_END_TAG, RANGE_START_TAG
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.settings import IcepackSettings
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    latest_health,
    run_health_sync,
    small_file_table,
)

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
    defs = build_definitions(
        scoped_settings, PlatformSettings(health_sync_batch_size=2, health_sync_workers=3)
    )
    apply_partition_requests(instance, evaluate_sensor(defs, "iceberg_table_discovery", instance))
    tables = list(instance.get_dynamic_partitions("iceberg_tables"))
    assert len(tables) == 5

    requests = _schedule_requests(defs, instance)
    assert isinstance(requests, list) and len(requests) == 3
    seen: Counter[str] = Counter()
    for request in requests:
        batch = tables[
            tables.index(request.tags[RANGE_START_TAG]) : tables.index(request.tags[RANGE_END_TAG]) + 1
        ]
        assert 1 <= len(batch) <= 2
        result = run_health_sync(defs, instance, batch)
        assert result.success
        assert result.dagster_run.tags[KIND_TAG] == OBSERVATION
        for node in ("table_status", "table_health"):
            events = result.asset_materializations_for_node(node)
            assert sorted(e.partition for e in events) == sorted(batch), node
        for event in result.asset_materializations_for_node("table_health"):
            assert event.metadata[STATE].value in {"healthy", "warning", "critical", "unknown"}
            assert event.metadata["summary"].value
        seen.update(e.partition for e in result.asset_materializations_for_node("table_health"))
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


def test_health_without_status_is_unknown(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    small_file_table(catalogs.get("lake"), f"{namespace}.fresh", appends=1)
    apply_partition_requests(instance, evaluate_sensor(defs, "iceberg_table_discovery", instance))
    partition = f"lake.{namespace}.fresh"
    result = dg.materialize(
        [table_health], instance=instance, partition_key=partition, resources=defs.resources
    )
    assert result.success
    health = latest_health(instance, partition)
    assert health.state == "unknown" and "materialize table_status" in (health.error or "")
