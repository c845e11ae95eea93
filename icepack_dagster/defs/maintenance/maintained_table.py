"""`maintained_table`: the table after its recommended maintenance ran on Spark."""

import dagster as dg

from icepack_dagster.defs.asset_keys import MAINTAINED_TABLE, MAINTENANCE_RECOMMENDATION
from icepack_dagster.defs.event_reads import latest_of, metadata_of
from icepack_dagster.defs.maintenance.exclusivity import refuse_concurrent_maintenance
from icepack_dagster.defs.maintenance.maintenance_recommendation import maintenance_recommendation
from icepack_dagster.defs.maintenance.unreferenced_report import unreferenced_metadata
from icepack_dagster.defs.materialization_codec import decode_recommendation, maintenance_metadata
from icepack_dagster.defs.partitions import ICEBERG_TABLES, table_key
from icepack_dagster.defs.resources import IcepackResource, SparkResource
from icepack_dagster.domain.health_model import HealthState, state_rank
from icepack_dagster.domain.history import TableHistory
from icepack_dagster.domain.maintenance_report import MaintenanceReport
from icepack_dagster.domain.recommendation_model import Recommendation
from icepack_dagster.engine import TABLE_GONE
from icepack_dagster.exceptions import TableNotFoundError

HEALTH_AFTER_CHECK = "healthy_after_maintenance"


def _this_runs_recommendation(context: dg.AssetExecutionContext) -> Recommendation | None:
    """The recommendation materialized earlier in this run; a stale one from another run is not reused."""
    record = latest_of(context.instance, MAINTENANCE_RECOMMENDATION, context.partition_key)
    if record is None or record.run_id != context.run.run_id:
        return None
    return decode_recommendation(metadata_of(record))


@dg.asset(
    partitions_def=ICEBERG_TABLES,
    deps=[maintenance_recommendation],
    group_name="iceberg_tables",
    kinds={"iceberg", "spark"},
    check_specs=[
        dg.AssetCheckSpec(
            HEALTH_AFTER_CHECK,
            asset=MAINTAINED_TABLE,
            partitions_def=ICEBERG_TABLES,  # one result per table, not one overwriting the last
            description="Health measured right after maintenance; warns when the table is still unhealthy",
        )
    ],
)
def maintained_table(
    context: dg.AssetExecutionContext, icepack: IcepackResource, spark: SparkResource
) -> dg.MaterializeResult:
    """Runs the recommended Iceberg procedures (compaction, delete rewrite, manifest rewrite, snapshot
    expiry, orphan removal) for one table and reports what changed: files and bytes before and after,
    snapshots expired, orphans removed, duration, the exact SQL.

    Grain: one materialization per maintenance run of the table (one table per run; the run tag
    `icepack/table` keeps two maintenances of a table from overlapping; a run that bypassed the queue
    refuses while another run maintains the table). A failed action fails the run,
    is recorded in history, and after `quarantine_after_failures` failures in a row the table is
    quarantined.
    """
    key = table_key(context.partition_key)
    refuse_concurrent_maintenance(context, context.partition_key)
    engine = icepack.maintenance_engine(spark)
    recommendation = _this_runs_recommendation(context)
    report = engine.maintain(key, recommendation=recommendation, on_progress=context.log.info)
    if report.outcome == "deferred":  # the catalog kept failing, or another maintenance holds the table
        reason = next((r.reason for r in report.results if r.reason), "deferred")
        return _nothing_ran(context, report, engine.history(key), "deferred", reason)
    try:
        status_after = engine.status(key)
    except TableNotFoundError as error:
        return _nothing_ran(context, report, engine.history(key), "table_gone", f"{TABLE_GONE}: {error}")
    health_after = engine.health(status_after)
    history = engine.history(key, engine.policy(key, status_after.properties).policy)
    metadata = maintenance_metadata(report, history)
    metadata |= unreferenced_metadata(engine, key, report)  # after orphan removal: what it left
    metadata |= {
        "health_after": dg.MetadataValue.text(health_after.state.value),
        "health_after_rank": dg.MetadataValue.int(state_rank(health_after.state)),
        "recommendation": dg.MetadataValue.asset(MAINTENANCE_RECOMMENDATION),
    }
    if report.outcome == "failed":
        raise dg.Failure(
            description=f"maintenance of {key.text} failed: {report.first_error}",
            metadata=metadata,
            allow_retries=False,
        )
    healthy = health_after.state is HealthState.HEALTHY
    check = dg.AssetCheckResult(
        check_name=HEALTH_AFTER_CHECK,
        passed=healthy,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"state": dg.MetadataValue.text(health_after.state.value)},
        description=None if healthy else f"still {health_after.state.value}: "
        + "; ".join(issue.message for issue in health_after.issues),
    )
    return dg.MaterializeResult(metadata=metadata, check_results=[check])


def _nothing_ran(
    context: dg.AssetExecutionContext,
    report: MaintenanceReport,
    history: TableHistory,
    outcome: str,
    reason: str,
) -> dg.MaterializeResult:
    """A maintenance that ran nothing through no fault of the table ends cleanly and says why:
    `table_gone` (dropped after it was recommended; discovery removes the partition on its next tick)
    or `deferred` (its catalog kept failing, or another maintenance holds it; the sensor tries again).
    Neither is recorded, so neither counts towards quarantine."""
    context.log.warning(f"{context.partition_key}: {reason}")
    metadata = maintenance_metadata(report, history) | {outcome: dg.MetadataValue.text(reason)}
    check = dg.AssetCheckResult(
        check_name=HEALTH_AFTER_CHECK,
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"state": dg.MetadataValue.text(outcome)},
        description=reason,
    )
    return dg.MaterializeResult(metadata=metadata, check_results=[check])
