"""Contract (issue 15, manual maintenance with intent): a person materializing `maintained_table` (the
implicit asset job, as Materialize, the launchpad and a backfill launch it) can ask for a dry run, force
and a subset of actions through run config.

- A dry run lists exactly what would run, with its SQL, and changes nothing: same snapshot, same
  contents, nothing in the maintenance history; no post-maintenance health sync follows it.
- A run that does nothing says why at the top of its metadata (`outcome`, then `why`) and on the run
  (`icepack/outcome` tag): cadence not elapsed, outside the maintenance window.
- `force` runs past the cadence and the window on a freshly maintained table; `actions` limits the run.
  Every run leaves the table's contents unchanged; a post-maintenance health sync follows the forced run.
- A partition key that is not a discovered table ("Add partition" in the Materialize dialog) is refused
  with a message naming it, before anything is read.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.materialization_codec import OUTCOME, decode_report
from icepack_dagster.defs.partitions import PARTITIONS_NAME, table_key
from icepack_dagster.defs.run_tags import OUTCOME_TAG
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import (
    SCHEMA,
    after_run,
    discover,
    run_health_sync,
    small_file_table,
    sync_request,
)
from tests.platform.platform_testkit import ONLY_COMPACTION
from tests.tables_testkit import table_fingerprint

pytestmark = pytest.mark.spark


def _materialize(
    defs: dg.Definitions, instance: dg.DagsterInstance, table: str, config: dict[str, Any]
) -> dg.ExecuteInProcessResult:
    """Materialize of the table's recommendation and maintenance from the asset graph, with run config."""
    return defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance,
        partition_key=table,
        asset_selection=[DEFAULT_NAMES.maintenance_recommendation, DEFAULT_NAMES.maintained_table],
        run_config={"ops": {"maintained_table": {"config": config}}},
        raise_on_error=False,
    )


def _ended(instance: dg.DagsterInstance, result: dg.ExecuteInProcessResult) -> tuple[dict[str, Any], str]:
    """The run's `maintained_table` metadata and its `icepack/outcome` tag."""
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    (materialization,) = result.asset_materializations_for_node("maintained_table")
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    return dict(materialization.metadata), run.tags[OUTCOME_TAG]


def _snapshot(catalogs: CatalogSet, table: str) -> int | None:
    key = table_key(table)
    return catalogs.get("lake").load_table(key.identifier).metadata.current_snapshot_id


def test_dry_run_force_and_actions_from_the_asset_graph(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
    scoped_settings: IcepackSettings,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    table = f"lake.{namespace}.events"
    lake = catalogs.get("lake")
    iceberg = small_file_table(lake, f"{namespace}.events", appends=12, properties=ONLY_COMPACTION)
    assert discover(defs, instance) == [table]
    assert run_health_sync(defs, instance, [table]).success
    contents, snapshot = table_fingerprint(spark, table), _snapshot(catalogs, table)
    history = Engine(scoped_settings).history_store

    dry = _materialize(defs, instance, table, {"dry_run": True, "actions": ["rewrite_data_files"]})
    metadata, tag = _ended(instance, dry)
    assert list(metadata)[:2] == [OUTCOME, "why"] and metadata[OUTCOME].value == "dry_run"
    assert tag.startswith("dry_run: 1 action(s) would run (rewrite_data_files)")
    report = decode_report(metadata)
    assert report is not None and [r.action for r in report.results] == ["rewrite_data_files"]
    assert any("CALL" in s and "rewrite_data_files" in s for s in report.results[0].statements)
    assert "rewrite_data_files" in metadata["sql"].value, "the SQL is shown"
    assert (table_fingerprint(spark, table), _snapshot(catalogs, table)) == (contents, snapshot)
    assert history.history(table, 3).last_run_at is None, "a dry run was recorded"
    assert isinstance(after_run(defs, "post_maintenance_health_sensor", instance, dry), dg.SkipReason)

    first = _materialize(defs, instance, table, {})
    metadata, tag = _ended(instance, first)
    assert (metadata[OUTCOME].value, tag) == ("succeeded", "succeeded")
    assert metadata["data_files_after"].value < 12
    assert table_fingerprint(spark, table) == contents

    for i in range(12, 20):  # more small files at once: compaction is due again, its cadence is not
        iceberg.append(pa.table({"id": [i], "name": [f"row {i}"]}, schema=SCHEMA))
    contents = table_fingerprint(spark, table)
    again = _materialize(defs, instance, table, {})
    metadata, tag = _ended(instance, again)
    assert list(metadata)[:2] == [OUTCOME, "why"] and metadata[OUTCOME].value == "nothing_to_do"
    assert "cadence not elapsed" in metadata["why"].value and tag.startswith("nothing_to_do: ")
    assert "cadence not elapsed" in tag

    forced = _materialize(defs, instance, table, {"force": True, "actions": ["rewrite_data_files"]})
    metadata, tag = _ended(instance, forced)
    assert (metadata[OUTCOME].value, tag) == ("succeeded", "succeeded")
    assert metadata["data_files_before"].value > metadata["data_files_after"].value
    assert table_fingerprint(spark, table) == contents
    remeasure = after_run(defs, "post_maintenance_health_sensor", instance, forced)
    assert sync_request(remeasure) == ([table], "all"), "no health sync followed a manual maintenance"


def test_force_runs_outside_the_maintenance_window(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    # two days on: still not today if midnight passes while the test runs
    later_day = (datetime.now(UTC) + timedelta(days=2)).strftime("%a").lower()
    table = f"lake.{namespace}.nightly"
    properties = {**ONLY_COMPACTION, "icepack.window": later_day}
    small_file_table(catalogs.get("lake"), f"{namespace}.nightly", appends=10, properties=properties)
    assert discover(defs, instance) == [table]
    contents, snapshot = table_fingerprint(spark, table), _snapshot(catalogs, table)

    waiting = _materialize(defs, instance, table, {"dry_run": True})
    metadata, tag = _ended(instance, waiting)
    assert metadata[OUTCOME].value == "nothing_to_do"
    assert f"outside its maintenance window ({later_day}" in metadata["why"].value
    assert "force: true runs it anyway" in tag

    forced = _materialize(defs, instance, table, {"dry_run": True, "force": True})
    metadata, _ = _ended(instance, forced)
    assert metadata[OUTCOME].value == "dry_run"
    assert (table_fingerprint(spark, table), _snapshot(catalogs, table)) == (contents, snapshot)


def test_a_partition_that_is_not_a_discovered_table_is_refused(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    small_file_table(catalogs.get("lake"), f"{namespace}.real", appends=1)
    assert discover(defs, instance) == [f"lake.{namespace}.real"]
    typed = {
        f"lake.{namespace}.reel": "catalog 'lake' has no such table, and icepack never measured it",
        "lake.elsewhere.real": "matches no include pattern",
        f"warehouse.{namespace}.real": "no catalog named 'warehouse' is configured",
    }
    instance.add_dynamic_partitions(PARTITIONS_NAME, list(typed))  # what "Add partition" does
    for partition, reason in typed.items():
        maintained, recommendation = DEFAULT_NAMES.maintained_table, DEFAULT_NAMES.maintenance_recommendation
        for assets in ([recommendation, maintained], [maintained]):
            result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
                instance=instance, partition_key=partition, asset_selection=assets, raise_on_error=False
            )
            assert not result.success
            (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
            message = failure.step_failure_data.user_failure_data.description
            assert f"partition {partition!r} is not a discovered table" in message and reason in message
            assert not [e for e in result.all_events if e.is_step_materialization]


def test_an_unknown_action_is_refused_naming_the_field(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    table = f"lake.{namespace}.real"
    small_file_table(catalogs.get("lake"), f"{namespace}.real", appends=1)
    assert discover(defs, instance) == [table]
    result = _materialize(defs, instance, table, {"actions": ["compact"]})
    assert not result.success
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failures and "actions: 'compact' not one of" in str(failures[0].step_failure_data.error)
    assert not result.asset_materializations_for_node("maintained_table")
