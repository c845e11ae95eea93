"""Scenario 18, quarantine, with real failing maintenance runs on a real instance with PostgreSQL
storage: two tables whose `icepack.spark.sql.*` override is invalid fail their maintenance for real
(the runner refuses the override and reports failed) each time the maintenance sensor launches them;
after `quarantine_after_failures` consecutive failures the sensor stops launching them and says why,
while the other tables' maintenance goes on in the same ticks. Fixing the cause does not release a
table; the release is explicit, once through the `release_quarantine_job` and once through
`icepack quarantine release`, after which the next health event makes the table a candidate again and
its maintenance succeeds. Every table keeps its contents (row count and checksum)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.materialization_codec import OUTCOME
from icepack_dagster.defs.run_tags import TABLE_TAG
from icepack_dagster.domain.decisions.sensor_cursors import MaintenanceCursor
from icepack_dagster.domain.table.key import parse_table_key
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    execute_run_request,
    run_health_sync,
    small_file_table,
)
from tests.factories import settings_with_platform
from tests.platform.platform_testkit import ONLY_COMPACTION
from tests.tables_testkit import table_fingerprint

pytestmark = [pytest.mark.postgres, pytest.mark.spark]

ICEPACK = str(Path(sys.executable).parent / "icepack")
BAD_OVERRIDE = "icepack.spark.sql.shuffle.partitions"
BROKEN = {
    **ONLY_COMPACTION,
    BAD_OVERRIDE: "lots",
    "icepack.cadence-hours": "0",
    "icepack.quarantine-after-failures": "2",
}
SENSOR = "maintenance_sensor"


def _run_all(defs: dg.Definitions, instance: dg.DagsterInstance, result: dg.SensorResult) -> dict[str, bool]:
    """Execute every maintenance run the sensor asked for; {table: succeeded}."""
    outcomes = {}
    for request in result.run_requests or []:
        run = execute_run_request(defs, instance, request, "maintenance")
        table = run.dagster_run.tags[TABLE_TAG]
        outcomes[table] = run.success
        if not run.success:
            (failure,) = [e for e in run.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
            data = failure.step_failure_data.user_failure_data
            assert "Spark SQL override" in data.description, data.description
            assert data.metadata[OUTCOME].value == "failed"
        else:
            (event,) = run.asset_materializations_for_node("maintained_table")
            assert event.metadata[OUTCOME].value == "succeeded"
    return outcomes


def _launched(result: dg.SensorResult) -> set[str]:
    return {r.partition_key for r in result.run_requests or []}


def _release_with_the_cli(settings: IcepackSettings, table: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")} | {
        "ICEPACK_HOME": str(settings.home)
    }
    done = subprocess.run(
        [ICEPACK, "quarantine", "release", table], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "released from quarantine" in done.stdout


def test_failures_quarantine_a_table_until_an_explicit_release(
    spark,  # type: ignore[no-untyped-def]
    scoped_settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    pg_instance: dg.DagsterInstance,
) -> None:
    lake = catalogs.get("lake")
    a, b, steady, late = (f"lake.{namespace}.{n}" for n in ("broken_a", "broken_b", "steady", "late"))
    for table, properties in ((a, BROKEN), (b, BROKEN), (steady, ONLY_COMPACTION)):
        small_file_table(lake, table.removeprefix("lake."), appends=10, properties=properties)
    before = {t: table_fingerprint(spark, t) for t in (a, b, steady)}
    defs = build_definitions(
        settings_with_platform(
            scoped_settings, PlatformSettings(maintenance_runs_per_tick=3, max_maintenance_in_flight=4)
        )
    )
    instance = pg_instance
    engine = Engine(scoped_settings)

    def quarantined(table: str) -> bool:
        key = parse_table_key(table)
        policy = engine.policy(key, dict(lake.load_table(key.identifier).properties)).policy
        return engine.history(key, policy).quarantined

    discovered = evaluate_sensor(defs, "iceberg_table_discovery", instance)
    apply_partition_requests(instance, discovered)
    assert execute_run_request(defs, instance, discovered.run_requests[0], "health_sync").success
    first = evaluate_sensor(defs, SENSOR, instance)
    assert _launched(first) == {a, b, steady}
    assert _run_all(defs, instance, first) == {a: False, b: False, steady: True}
    assert not quarantined(a) and not quarantined(b)

    assert run_health_sync(defs, instance, [a, b]).success
    second = evaluate_sensor(defs, SENSOR, instance, cursor=first.cursor)
    assert _run_all(defs, instance, second) == {a: False, b: False}
    assert quarantined(a) and quarantined(b)

    small_file_table(lake, late.removeprefix("lake."), appends=10, properties=ONLY_COMPACTION)
    before[late] = table_fingerprint(spark, late)
    more = evaluate_sensor(defs, "iceberg_table_discovery", instance, cursor=discovered.cursor)
    apply_partition_requests(instance, more)
    assert execute_run_request(defs, instance, more.run_requests[0], "health_sync").success
    assert run_health_sync(defs, instance, [a, b]).success
    third = evaluate_sensor(defs, SENSOR, instance, cursor=second.cursor)
    assert _launched(third) == {late}, "the quarantined tables were launched, or held the others back"
    assert not {a, b} & set(MaintenanceCursor.model_validate_json(third.cursor).pending)
    assert _run_all(defs, instance, third) == {late: True}

    for table in (a, b):  # fixing the cause alone does not release the table
        with lake.load_table(parse_table_key(table).identifier).transaction() as transaction:
            transaction.remove_properties(BAD_OVERRIDE)
    assert run_health_sync(defs, instance, [a, b]).success
    held = evaluate_sensor(defs, SENSOR, instance, cursor=third.cursor)
    assert not held.run_requests
    for table in (a, b):
        assert f"{table}: quarantined after 2 consecutive failures" in held.skip_reason.skip_message
    assert "Spark SQL override" in held.skip_reason.skip_message

    release = defs.resolve_job_def("release_quarantine_job").execute_in_process(
        instance=instance, run_config={"ops": {"release_quarantine": {"config": {"table": a}}}}
    )
    assert release.success
    _release_with_the_cli(scoped_settings, b)
    assert not quarantined(a) and not quarantined(b)
    assert run_health_sync(defs, instance, [a, b]).success
    after = evaluate_sensor(defs, SENSOR, instance, cursor=held.cursor)
    assert _run_all(defs, instance, after) == {a: True, b: True}

    for table, fingerprint in before.items():
        assert table_fingerprint(spark, table) == fingerprint, f"{table} changed"
