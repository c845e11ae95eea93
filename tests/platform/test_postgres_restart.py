"""Scenario 13, PostgreSQL restart during operation: the platform reconnects and loses no run record
and no materialization.

Dagster's storage is a private PostgreSQL 15 cluster (never the machine's shared server), configured by
the production YAML. The platform discovers and measures a real table; the server is then crashed
(`pg_ctl stop -m immediate`) and started again, once between two operations and once in the middle of
a run. The same instance object keeps working: every run record and materialization from before is
still there, the interrupted run finishes with its events after the restart, new health
materializations land, the sensors read them, and the maintenance they launch runs on real Spark with
the table's contents unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import pytest

from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    execute_run_request,
    latest_health,
    run_health_sync,
    small_file_table,
)
from tests.platform.platform_testkit import pg_env, prod_instance_config
from tests.private_postgres import PrivatePostgres
from tests.tables_testkit import table_fingerprint

pytestmark = [pytest.mark.postgres, pytest.mark.spark]


@pytest.fixture
def server() -> Iterator[PrivatePostgres]:
    cluster = PrivatePostgres()
    try:
        cluster.start()
        cluster.create_database("dagster")
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def instance(server: PrivatePostgres, monkeypatch: pytest.MonkeyPatch) -> Iterator[dg.DagsterInstance]:
    for name, value in pg_env("dagster", host="127.0.0.1", port=server.port).items():
        monkeypatch.setenv(name, value)
    with dg.instance_for_test(overrides=prod_instance_config()) as test_instance:
        yield test_instance


def _materialization_ids(instance: dg.DagsterInstance, asset_key: dg.AssetKey) -> set[int]:
    return {r.storage_id for r in instance.fetch_materializations(asset_key, limit=1000).records}


def _runs(instance: dg.DagsterInstance) -> dict[str, dg.DagsterRunStatus]:
    return {r.dagster_run.run_id: r.dagster_run.status for r in instance.get_run_records()}


def test_platform_survives_a_postgres_restart(
    spark,  # type: ignore[no-untyped-def]
    defs: dg.Definitions,
    catalogs: CatalogSet,
    namespace: str,
    server: PrivatePostgres,
    instance: dg.DagsterInstance,
) -> None:
    table = f"lake.{namespace}.events"
    small_file_table(catalogs.get("lake"), f"{namespace}.events", appends=10)
    before = table_fingerprint(spark, table)
    discovered = evaluate_sensor(defs, "iceberg_table_discovery", instance)
    apply_partition_requests(instance, discovered)
    assert execute_run_request(defs, instance, discovered.run_requests[0], "health_sync").success
    runs_before = _runs(instance)
    status_before = _materialization_ids(instance, DEFAULT_NAMES.table_status)
    health_before = _materialization_ids(instance, DEFAULT_NAMES.table_health)
    assert len(runs_before) == 1 and status_before and health_before

    server.restart("immediate")  # between two operations: the same instance object goes on

    @dg.asset
    def across_a_restart(context) -> dg.MaterializeResult:  # type: ignore[no-untyped-def]
        context.log.info("before the database restart")
        server.restart("immediate")
        context.log.info("after the database restart")
        return dg.MaterializeResult(metadata={"survived": dg.MetadataValue.bool(True)})

    interrupted = dg.materialize([across_a_restart], instance=instance)
    assert interrupted.success
    messages = [e.user_message for e in instance.all_logs(interrupted.run_id)]
    assert "after the database restart" in messages
    assert instance.get_run_by_id(interrupted.run_id).status == dg.DagsterRunStatus.SUCCESS

    assert list(instance.get_dynamic_partitions(PARTITIONS_NAME)) == [table]
    assert run_health_sync(defs, instance, [table]).success
    assert latest_health(instance, table).state == "critical"
    again = evaluate_sensor(defs, "iceberg_table_discovery", instance, cursor=discovered.cursor)
    assert isinstance(again, dg.SkipReason) and "already match" in again.skip_message
    (request,) = evaluate_sensor(defs, "maintenance_sensor", instance).run_requests
    maintenance = execute_run_request(defs, instance, request, "maintenance")
    assert maintenance.success

    runs_after = _runs(instance)
    assert {run_id: runs_after.get(run_id) for run_id in runs_before} == runs_before, "a run record was lost"
    assert len(runs_after) == len(runs_before) + 3
    status_after = _materialization_ids(instance, DEFAULT_NAMES.table_status)
    health_after = _materialization_ids(instance, DEFAULT_NAMES.table_health)
    assert status_before < status_after, "status materializations lost"
    assert health_before < health_after, "health materializations lost"
    assert instance.fetch_materializations(across_a_restart.key, limit=1).records
    assert table_fingerprint(spark, table) == before
