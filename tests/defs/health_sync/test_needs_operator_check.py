"""The `needs_operator` check of `table_health`, written by the health sync with the `healthy` check:
it fails, with the reason in its metadata, for a table quarantined in the history store, passes again
once the quarantine is released (a scheduled sync writes the table for that change alone), fails for a
table whose latest maintenance the Spark's Iceberg runtime refused until a later one is not refused,
and fails for a table whose metadata cannot be read; the table's contents are never touched."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import dagster as dg

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.materialization_codec import NEEDS_OPERATOR_CHECK
from icepack_dagster.domain.actions.maintenance_action import ActionResult, ActionStatus, MaintenanceAction
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.table.key import parse_table_key
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import discover, record_failures, run_health_sync, small_file_table
from tests.tables_testkit import arrow_fingerprint

CHECK = dg.AssetCheckKey(DEFAULT_NAMES.table_health, NEEDS_OPERATOR_CHECK)


def _operator_checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        str(e.partition): e
        for e in result.get_asset_check_evaluations()
        if e.check_name == NEEDS_OPERATOR_CHECK
    }


def _failed_partitions(instance: dg.DagsterInstance, partitions: list[str]) -> set[str]:
    """What the asset page's check shows per table: the latest execution of each partition."""
    infos = instance.event_log_storage.get_asset_check_partition_info([CHECK], partition_keys=partitions)
    return {i.partition_key for i in infos if i.latest_execution_status.value == "FAILED"}


def test_a_quarantined_table_fails_the_check_until_released(
    defs: dg.Definitions, scoped_settings: IcepackSettings, instance: dg.DagsterInstance,
    catalogs: CatalogSet, namespace: str,
) -> None:
    lake = catalogs.get("lake")
    orders = small_file_table(lake, f"{namespace}.orders", appends=1)
    small_file_table(lake, f"{namespace}.quiet", appends=1)
    tables = discover(defs, instance)
    table = f"lake.{namespace}.orders"
    contents = arrow_fingerprint(orders)

    first = _operator_checks(run_health_sync(defs, instance, tables, writes="changes"))
    assert {p: e.passed for p, e in first.items()} == dict.fromkeys(tables, True)

    record_failures(scoped_settings, table, times=3)
    quarantined = run_health_sync(defs, instance, tables, writes="changes")
    check = _operator_checks(quarantined)
    assert set(check) == {table}, "only the table whose verdict changed is written"
    assert not check[table].passed and check[table].severity == dg.AssetCheckSeverity.ERROR
    assert check[table].metadata["reason"].value == "quarantined"
    assert "disk full" in str(check[table].metadata["evidence"].value)
    assert f"icepack quarantine release {table}" in str(check[table].description)
    assert _failed_partitions(instance, tables) == {table}

    Engine(scoped_settings).release_quarantine(parse_table_key(table))
    released = _operator_checks(run_health_sync(defs, instance, tables, writes="changes"))
    assert {p: e.passed for p, e in released.items()} == {table: True}
    assert _failed_partitions(instance, tables) == set()
    assert arrow_fingerprint(lake.load_table(f"{namespace}.orders")) == contents


def _record(settings: IcepackSettings, table: str, status: ActionStatus, reason: str | None = None) -> None:
    result = ActionResult(action=MaintenanceAction.EXPIRE_SNAPSHOTS, status=status, statements=(),
                          duration_seconds=0.0, reason=reason)
    now = datetime.now(UTC)
    report = MaintenanceReport(table=table, started_at=now, finished_at=now, results=(result,))
    Engine(settings).history_store.record(report)


def test_a_runtime_refusal_fails_the_check_until_a_maintenance_is_not_refused(
    defs: dg.Definitions, scoped_settings: IcepackSettings, instance: dg.DagsterInstance,
    catalogs: CatalogSet, namespace: str,
) -> None:
    lake = catalogs.get("lake")
    events = small_file_table(lake, f"{namespace}.events", appends=1)
    tables = discover(defs, instance)
    [table] = tables
    contents = arrow_fingerprint(events)
    run_health_sync(defs, instance, tables, writes="changes")

    why = (f"table {table}: expire_snapshots refused: this Spark runs Iceberg 1.8.1, and option "
           "clean_expired_metadata needs Iceberg 1.10.0 or later")
    _record(scoped_settings, table, "refused", why)
    check = _operator_checks(run_health_sync(defs, instance, tables, writes="changes"))[table]
    assert not check.passed and check.metadata["reason"].value == "runtime_refused"
    assert why in str(check.metadata["evidence"].value)
    assert "icepack spark runtime" in str(check.description)
    assert _failed_partitions(instance, tables) == {table}

    _record(scoped_settings, table, "succeeded")  # run on a Spark that can do it
    assert _operator_checks(run_health_sync(defs, instance, tables, writes="changes"))[table].passed
    assert _failed_partitions(instance, tables) == set()
    assert arrow_fingerprint(lake.load_table(f"{namespace}.events")) == contents


def test_a_table_whose_metadata_cannot_be_read_fails_the_check(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    broken = small_file_table(catalogs.get("lake"), f"{namespace}.broken", appends=2)
    Path(urlparse(broken.current_snapshot().manifest_list).path).unlink()
    tables = discover(defs, instance)
    (check,) = _operator_checks(run_health_sync(defs, instance, tables)).values()
    assert not check.passed and check.metadata["reason"].value == "metadata_unreadable"
    assert "evidence" in check.metadata and _failed_partitions(instance, tables) == set(tables)
