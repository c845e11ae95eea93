"""Contract (issue 5, scenario 14 on the platform): a table dropped between its recommendation and its
maintenance run ends the run cleanly, says the table no longer exists, runs nothing and records no
failure (so it never counts towards quarantine); the other tables are untouched. A run whose table is
held by another maintenance (its lease) likewise runs nothing and ends `deferred`."""

from __future__ import annotations

import dagster as dg
import pytest

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.run_tags import maintenance_tags
from icepack_dagster.engine import TABLE_GONE, Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    run_health_sync,
    small_file_table,
)
from tests.tables_testkit import table_fingerprint

pytestmark = pytest.mark.spark


def test_dropped_table_ends_the_maintenance_run_cleanly(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
    scoped_settings: IcepackSettings,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.doomed", appends=10)
    small_file_table(lake, f"{namespace}.bystander", appends=10)
    apply_partition_requests(instance, evaluate_sensor(defs, "iceberg_table_discovery", instance))
    partitions = list(instance.get_dynamic_partitions("iceberg_tables"))
    assert run_health_sync(defs, instance, partitions).success
    bystander = table_fingerprint(spark, f"lake.{namespace}.bystander")

    doomed = f"lake.{namespace}.doomed"
    lake.drop_table((namespace, "doomed"))
    result = defs.resolve_job_def("maintenance").execute_in_process(
        instance=instance, partition_key=doomed, tags=maintenance_tags(doomed), raise_on_error=False
    )

    assert result.success
    (materialization,) = result.asset_materializations_for_node("maintained_table")
    assert TABLE_GONE in str(materialization.metadata["table_gone"].value)
    assert materialization.metadata["outcome"].value == "table_gone"
    history = Engine(scoped_settings).history_store.history(doomed, quarantine_after_failures=3)
    assert history.consecutive_failures == 0 and history.last_run_at is None
    assert table_fingerprint(spark, f"lake.{namespace}.bystander") == bystander


def test_a_table_another_maintenance_holds_is_deferred_cleanly(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
    scoped_settings: IcepackSettings,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    """A CLI maintenance holds the table's lease: the platform run runs nothing, ends cleanly with the
    outcome `deferred` naming the holder, and records nothing."""
    small_file_table(catalogs.get("lake"), f"{namespace}.held", appends=10)
    apply_partition_requests(instance, evaluate_sensor(defs, "iceberg_table_discovery", instance))
    held = f"lake.{namespace}.held"
    assert run_health_sync(defs, instance, [held]).success
    before = table_fingerprint(spark, held)
    leases = Engine(scoped_settings).leases
    token = leases.acquire(held, "icepack maintain in a shell")
    try:
        result = defs.resolve_job_def("maintenance").execute_in_process(
            instance=instance, partition_key=held, tags=maintenance_tags(held), raise_on_error=False
        )
    finally:
        leases.release(held, token)

    assert result.success
    (materialization,) = result.asset_materializations_for_node("maintained_table")
    assert materialization.metadata["outcome"].value == "deferred"
    assert "icepack maintain in a shell" in str(materialization.metadata["deferred"].value)
    history = Engine(scoped_settings).history_store.history(held, quarantine_after_failures=3)
    assert history.consecutive_failures == 0 and history.last_run_at is None
    assert table_fingerprint(spark, held) == before
