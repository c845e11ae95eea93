"""Contract: icepack's decisions read its own state database, never Dagster's runs or event log. After
discovery, syncs and a real maintenance launched by the sensor, deleting every run (as `dagster run
wipe` does, `DagsterInstance.delete_run` for each, events with them) leaves the maintenance sensor's
decisions (run requests, run keys, tags, skip reason, pending tables, from a fresh cursor and from the
last one), the fleet summary and what a scheduled health sync writes (no table is new to it: its last
health and needs_operator verdict are the tables' facts) exactly as they were. On Dagster's SQLite
storage with icepack's SQLite state, and on the production PostgreSQL storage with icepack's state in
PostgreSQL too. The maintained table's contents are unchanged (row count and checksum)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest
from pydantic import SecretStr

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.health_sync.table_sync import SYNC_REASON
from icepack_dagster.defs.materialization_codec import decode_fleet
from icepack_dagster.domain.decisions.sensor_cursors import MaintenanceCursor
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store import state_database
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_database
from tests.defs.dagster_testkit import (
    after_run,
    discover,
    evaluate_sensor,
    execute_run_request,
    materializations_in_run,
    run_health_sync,
    small_file_table,
)
from tests.factories import settings_with_platform
from tests.tables_testkit import table_fingerprint

pytestmark = pytest.mark.spark

SENSOR = "maintenance_sensor"


@pytest.fixture(params=["sqlite", "postgres"])
def storage(
    request: pytest.FixtureRequest, scoped_settings: IcepackSettings
) -> Iterator[tuple[dg.DagsterInstance, IcepackSettings]]:
    """A Dagster instance and icepack settings: SQLite storage and state, or the production YAML's
    PostgreSQL storage with icepack's state database in a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield request.getfixturevalue("instance"), scoped_settings
        return
    pg_instance = request.getfixturevalue("pg_instance")
    with fresh_database("icepack_state") as name:
        url = f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
        yield pg_instance, scoped_settings.model_copy(update={"state_url": SecretStr(url)})
        state_database.dispose_engines()  # before the database is dropped


def _decisions(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None) -> dict[str, Any]:
    """Everything a sensor tick decides: what it requests (keys, tables, tags), why not, what waits."""
    result = evaluate_sensor(defs, SENSOR, instance, cursor=cursor)
    requests = [(r.run_key, r.partition_key, dict(r.tags)) for r in result.run_requests or []]
    skip = result.skip_reason.skip_message if result.skip_reason else None
    cursor = MaintenanceCursor.model_validate_json(result.cursor)
    return {"requests": requests, "skip": skip, "cursor": cursor}


def _fleet(defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, Any]:
    """The fleet summary a refresh writes, without the moment it was written."""
    result = defs.resolve_job_def("fleet_refresh").execute_in_process(instance=instance)
    (materialization,) = result.asset_materializations_for_node("fleet_summary")
    summary = decode_fleet(dict(materialization.metadata))
    assert summary is not None
    return summary.model_dump(exclude={"generated_at_epoch"})


def _wipe_runs(instance: dg.DagsterInstance) -> int:
    """What `dagster run wipe` does: every run deleted with its events."""
    runs = instance.get_runs()
    for run in runs:
        instance.delete_run(run.run_id)
    return len(runs)


def test_deleting_every_run_changes_no_decision(
    storage: tuple[dg.DagsterInstance, IcepackSettings],
    platform: PlatformSettings,
    catalogs: CatalogSet,
    namespace: str,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    instance, settings = storage
    one_per_tick = platform.model_copy(update={"maintenance_runs_per_tick": 1})
    defs = build_definitions(settings_with_platform(settings, one_per_tick))
    lake = catalogs.get("lake")
    for name in ("first", "second"):
        small_file_table(lake, f"{namespace}.{name}", appends=12)
    small_file_table(lake, f"{namespace}.fine", appends=1)
    tables = discover(defs, instance)
    assert run_health_sync(defs, instance, tables).success

    (launch,) = evaluate_sensor(defs, SENSOR, instance).run_requests
    maintained = launch.partition_key
    assert maintained is not None
    contents = table_fingerprint(spark, maintained)
    run = execute_run_request(defs, instance, launch, "maintenance")
    assert run.success, [e.message for e in run.all_events if e.is_failure]
    assert table_fingerprint(spark, maintained) == contents, "maintenance changed the table's contents"
    resync = after_run(defs, "post_maintenance_health_sensor", instance, run)
    assert execute_run_request(defs, instance, resync, "health_sync").success

    fresh = _decisions(defs, instance, None)
    steady = _decisions(defs, instance, fresh["cursor"].encode())
    (other,) = [request[1] for request in fresh["requests"]]
    assert other != maintained, "the maintained table waits for its cadence"
    fleet = _fleet(defs, instance)
    assert fleet["files_reclaimed_total"] > 0 and fleet["tables"] == 3

    assert _wipe_runs(instance) >= 4
    assert not instance.get_runs()
    health = instance.fetch_materializations(DEFAULT_NAMES.table_health, limit=1)
    assert not health.records, "events outlived the wipe"

    assert _decisions(defs, instance, None) == fresh
    assert _decisions(defs, instance, fresh["cursor"].encode()) == steady
    assert _fleet(defs, instance) == fleet
    scheduled = run_health_sync(defs, instance, tables, writes="changes")
    reasons = [m.metadata[SYNC_REASON].value for m in materializations_in_run(scheduled, "sync_tables")]
    assert "first materialization" not in reasons, "the sync took the wiped tables for new ones"
