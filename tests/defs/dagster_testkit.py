"""Helpers for driving the real Dagster definitions in tests: evaluate a sensor or schedule against a
real instance, apply the partition requests it returned (as the daemon would), run a health sync over
a partition range, and build small real Iceberg tables through PyIceberg (no Spark needed)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
import pyarrow as pa
from pyiceberg.catalog import Catalog

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES, DeploymentNames
from icepack_dagster.defs.health_sync.job import health_sync_run_config
from icepack_dagster.defs.materialization_codec import decode_health
from icepack_dagster.defs.run_tags import batch_tags
from icepack_dagster.domain.actions.maintenance_action import ActionResult, MaintenanceAction
from icepack_dagster.domain.health.model import TableHealth
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.outcomes.prediction import ActionFigures, PredictedActual
from icepack_dagster.engine import Engine

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
NO_ACTIONS = {f"icepack.action.{action.value}.enabled": "false" for action in MaintenanceAction}
"""Table properties turning every action off: maintenance has nothing to do, and the table stays as it is."""


def small_file_table(
    catalog: Catalog, identifier: str, appends: int, properties: dict[str, str] | None = None
):  # type: ignore[no-untyped-def]
    """A table of `appends` one-row data files: SMALL_FILES critical once appends >= 8."""
    table = catalog.create_table(identifier, schema=SCHEMA, properties=properties or {})
    for i in range(appends):
        table.append(pa.table({"id": [i], "name": [f"row {i}"]}, schema=SCHEMA))
    return table


def evaluate_sensor(
    defs: dg.Definitions, name: str, instance: dg.DagsterInstance, cursor: str | None = None
) -> Any:
    sensor = defs.resolve_sensor_def(name)
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=defs.resources) as context:
        return sensor(context)


def apply_partition_requests(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """What the daemon does with a sensor's dynamic partition requests."""
    for request in result.dynamic_partitions_requests or []:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)


def record_failures(settings: IcepackSettings, table: str, times: int, days_ago: float = 10) -> None:
    """`times` failed maintenances of `table` in its history, an hour apart, starting `days_ago` days ago
    (what quarantine counts)."""
    history = Engine(settings).history_store
    start = datetime.now(UTC) - timedelta(days=days_ago)
    for i in range(times):
        at = start + timedelta(hours=i)
        failed = ActionResult(
            action=MaintenanceAction.REWRITE_DATA_FILES,
            status="failed",
            statements=(),
            duration_seconds=1.0,
            error=f"{table}: rewrite_data_files: disk full",
        )
        history.record(MaintenanceReport(table=table, started_at=at, finished_at=at, results=(failed,)))


def record_rewrite(settings: IcepackSettings, table: str, bytes_in: int) -> None:
    """A compaction of `table` that read `bytes_in` bytes, recorded a minute ago (what the circuit
    breakers weigh)."""
    at = datetime.now(UTC) - timedelta(minutes=1)
    figures = ActionFigures(files_in=2, files_out=1, bytes_in=bytes_in)
    done = ActionResult(
        action=MaintenanceAction.REWRITE_DATA_FILES, status="succeeded", statements=(), duration_seconds=1.0,
        predicted_actual=PredictedActual(planned=figures, done=figures, exact=True),
    )
    report = MaintenanceReport(table=table, snapshot_id=1, started_at=at, finished_at=at, results=(done,))
    Engine(settings).history_store.record(report)


def discover(defs: dg.Definitions, instance: dg.DagsterInstance) -> list[str]:
    """One discovery tick applied as the daemon would; the partitions it leaves, in Dagster's order."""
    apply_partition_requests(instance, evaluate_sensor(defs, "iceberg_table_discovery", instance))
    return list(instance.get_dynamic_partitions("iceberg_tables"))


def run_health_sync(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    partitions: Sequence[str],
    writes: str = "all",
    names: DeploymentNames = DEFAULT_NAMES,
) -> dg.ExecuteInProcessResult:
    """One health-sync run of deployment `names` over `partitions`, writing every table (as a launch
    from the UI) or only changed ones (`writes="changes"`, as the schedule)."""
    job = defs.resolve_job_def(names.name("health_sync"))
    return job.execute_in_process(
        instance=instance,
        run_config=health_sync_run_config(list(partitions), writes, names),
        tags=batch_tags(partitions),
    )


def sync_request(request: dg.RunRequest) -> tuple[list[str], str]:
    """The tables a health-sync run request covers and what it writes ("changes" or "all")."""
    assert request.job_name in (None, "health_sync"), request.job_name
    config = request.run_config["ops"]["sync_tables"]["config"]
    return list(config["tables"]), config.get("writes", "all")


def run_request_tags(request: dg.RunRequest) -> dict[str, str]:
    return dict(request.tags)


def execute_run_request(
    defs: dg.Definitions, instance: dg.DagsterInstance, request: dg.RunRequest, job_name: str
) -> dg.ExecuteInProcessResult:
    """Execute a sensor's run request in process (so the test's Spark session is reused)."""
    job = defs.resolve_job_def(request.job_name or job_name)
    return job.execute_in_process(
        instance=instance,
        partition_key=request.partition_key,
        run_config=request.run_config,
        tags=dict(request.tags),
        raise_on_error=False,
    )


def latest_health(instance: dg.DagsterInstance, partition: str) -> TableHealth:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=DEFAULT_NAMES.table_health, asset_partitions=[partition]), limit=1
    ).records
    assert records, f"no table_health materialization for {partition}"
    health = decode_health(dict(records[0].asset_materialization.metadata))
    assert health is not None
    return health


def materializations_in_run(result: dg.ExecuteInProcessResult, node: str) -> list[dg.AssetMaterialization]:
    return list(result.asset_materializations_for_node(node))


def after_run(
    defs: dg.Definitions, sensor_name: str, instance: dg.DagsterInstance, run: dg.ExecuteInProcessResult
) -> Any:
    """Evaluate a run status sensor on a finished in-process run, as the daemon would."""
    sensor = defs.resolve_sensor_def(sensor_name)
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor_name,
        dagster_event=run.get_run_success_event(),
        dagster_instance=instance,
        dagster_run=run.dagster_run,
    )
    return sensor(context)
