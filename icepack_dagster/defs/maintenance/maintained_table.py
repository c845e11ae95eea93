"""`maintained_table`: the table after its recommended maintenance ran on Spark."""

import functools
import inspect

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.event_reads import latest_of, metadata_of
from icepack_dagster.defs.maintenance.exclusivity import refuse_beyond_the_cap, refuse_concurrent_maintenance
from icepack_dagster.defs.maintenance.health_after_check import (
    HEALTH_AFTER_CHECK,
    health_after_check,
    nothing_ran_check,
)
from icepack_dagster.defs.maintenance.maintenance_config import MaintenanceConfig
from icepack_dagster.defs.maintenance.table_guard import discovered_table
from icepack_dagster.defs.maintenance.unreferenced_report import unreferenced_metadata
from icepack_dagster.defs.materialization_codec import OUTCOME, decode_recommendation, maintenance_metadata
from icepack_dagster.defs.partitions import tables_partitions
from icepack_dagster.defs.resources import IcepackResource, SparkResource, icepack_of, spark_of
from icepack_dagster.defs.run_tags import MAINTENANCE, OUTCOME_TAG, claim_run
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.recommendation.model import Recommendation

_MAX_TAG = 250  # run tags are for the runs list; the whole reason is in the metadata


def _this_runs_recommendation(
    context: dg.AssetExecutionContext, names: DeploymentNames
) -> Recommendation | None:
    """The recommendation materialized earlier in this run; a stale one from another run is not reused."""
    record = latest_of(context.instance, names.maintenance_recommendation, context.partition_key)
    if record is None or record.run_id != context.run.run_id:
        return None
    return decode_recommendation(metadata_of(record))


@functools.cache
def build_maintained_table(deployment_name: str) -> dg.AssetsDefinition:
    """The asset over the deployment's partitions, holding a slot of its maintenance pool (one
    definition per deployment name)."""
    platform = PlatformSettings(deployment_name=deployment_name)
    names = DeploymentNames(deployment_name)
    tables = tables_partitions(platform)

    @dg.asset(
        key=names.maintained_table,
        partitions_def=tables,
        deps=[names.maintenance_recommendation],
        group_name="iceberg_tables",
        kinds={"iceberg", "spark"},
        pool=platform.maintenance_pool,
        check_specs=[
            dg.AssetCheckSpec(
                HEALTH_AFTER_CHECK,
                asset=names.maintained_table,
                partitions_def=tables,  # one result per table, not one overwriting the last
                description="Health measured right after maintenance; warns when the table is still "
                "unhealthy",
            )
        ],
        required_resource_keys={names.icepack_resource, names.spark_resource},
        description=inspect.getdoc(maintained_table),
    )
    def maintained_table_asset(
        context: dg.AssetExecutionContext, config: MaintenanceConfig
    ) -> dg.MaterializeResult:
        return maintained_table(context, config, icepack_of(context, names), spark_of(context, names))

    return maintained_table_asset


def maintained_table(
    context: dg.AssetExecutionContext,
    config: MaintenanceConfig,
    icepack: IcepackResource,
    spark: SparkResource,
) -> dg.MaterializeResult:
    """Runs the recommended Iceberg procedures (compaction, delete rewrite, manifest rewrite, snapshot
    expiry, orphan removal) for one table and reports what changed: files and bytes before and after,
    snapshots expired, orphans removed, duration, the exact SQL. Run config: `dry_run`, `force`,
    `actions`.

    Grain: one materialization per maintenance run of the table (one table per run). Whoever launches
    it, the run queue holds it while the deployment's maintenance pool is full; while another run
    maintains the table, it refuses, or ends `deferred` when the table's lease is held. A partition key
    that is not a discovered table is refused. A failed action fails the run, is recorded in history,
    and after `quarantine_after_failures` failures in a row the table is quarantined. The outcome, and
    why nothing ran when nothing did, heads the metadata and is the run's `icepack/outcome` tag.
    """
    platform = icepack.settings.platform
    names = DeploymentNames.of(platform)
    claim_run(context, platform, MAINTENANCE, context.partition_key)
    key = discovered_table(context, icepack.engine)
    refuse_concurrent_maintenance(context, platform, context.partition_key)
    refuse_beyond_the_cap(context, platform, context.partition_key)
    engine = icepack.maintenance_engine(spark)
    judged = engine.maintain_and_judge(
        key,
        recommendation=None if config.force else _this_runs_recommendation(context, names),
        dry_run=config.dry_run,
        only=config.only,
        on_progress=context.log.info,
        force=config.force,
        respect_window=True,
    )
    report, history, health_after = judged.report, judged.history, judged.health_after
    # The table's facts record every outcome (nothing ran included): the sensor's cadence reads it.
    engine.facts.record_maintenance(report, judged.unrun[0] if judged.unrun else report.outcome, utc_now())
    if judged.unrun is not None:  # outside its window, deferred or gone
        outcome, why = judged.unrun
        why += "; force: true runs it anyway" if judged.outside_window else ""
        return _nothing_ran(context, report, history, outcome, why)
    assert health_after is not None  # re-measured whenever it was not unrun
    reason = why_nothing_changed(report, config)
    _tag_outcome(context, report.outcome, reason)
    metadata = _headed(report.outcome, reason) | maintenance_metadata(report, history)
    metadata |= unreferenced_metadata(engine, key, report)  # after orphan removal: what it left
    metadata |= {
        "health_after": dg.MetadataValue.text(health_after.state.value),
        "health_after_rank": dg.MetadataValue.int(health_after.state.plot_value),
        "recommendation": dg.MetadataValue.asset(names.maintenance_recommendation),
    }
    if report.outcome in ("failed", "violated"):
        ended = "failed" if report.outcome == "failed" else "broke an invariant and paused the table"
        raise dg.Failure(
            description=f"maintenance of {key.text} {ended}: {report.first_error}",
            metadata=metadata,
            allow_retries=False,
        )
    if reason is not None:
        context.log.warning(f"{key.text}: {report.outcome}: {reason}")
    return dg.MaterializeResult(metadata=metadata, check_results=[health_after_check(health_after)])


def why_nothing_changed(report: MaintenanceReport, config: MaintenanceConfig) -> str | None:
    """For a run that changed nothing, the reason in one line; None when it changed the table."""
    if report.outcome == "dry_run":
        planned = [r for r in report.results if r.status == "dry_run"]
        return (f"{len(planned)} action(s) would run ({', '.join(r.action for r in planned)}); their SQL "
                "is in `sql`; nothing was changed")
    if report.outcome == "refused":  # a person must give the table a Spark whose runtime can do it
        return "; ".join(r.reason or "" for r in report.results if r.status == "refused")
    if report.outcome == "conflict":
        return (f"{report.conflict}; not a failure: the next attempt waits for a quieter moment "
                "(see the recommendation)")
    if report.outcome != "nothing_to_do":
        return None
    reasons = [f"{r.action}: {r.reason}" for r in report.results if r.reason]
    asked = f" (actions asked: {', '.join(config.actions)})" if config.actions else ""
    return ("; ".join(reasons) or "no action recommended") + asked


def _headed(outcome: str, reason: str | None) -> dict[str, dg.MetadataValue]:
    """The first metadata entries, which the UI lists first: the outcome, and why nothing changed."""
    head: dict[str, dg.MetadataValue] = {OUTCOME: dg.MetadataValue.text(outcome)}
    if reason is not None:
        head["why"] = dg.MetadataValue.text(reason)
    return head


def _tag_outcome(context: dg.AssetExecutionContext, outcome: str, reason: str | None) -> None:
    """`icepack/outcome` on the run, so the runs list says what a maintenance did without opening it."""
    text = outcome if reason is None else f"{outcome}: {reason}"
    context.instance.add_run_tags(context.run.run_id, {OUTCOME_TAG: text[:_MAX_TAG]})


def _nothing_ran(
    context: dg.AssetExecutionContext,
    report: MaintenanceReport,
    history: TableHistory,
    outcome: str,
    reason: str,
) -> dg.MaterializeResult:
    """A maintenance that ran nothing through no fault of the table ends cleanly and says why:
    `table_gone` (dropped after it was recommended; discovery removes the partition on its next tick),
    `deferred` (its catalog kept failing, or another maintenance holds it; the sensor tries again) or
    `nothing_to_do` (outside its maintenance window). None is recorded, so none counts towards
    quarantine."""
    context.log.warning(f"{context.partition_key}: {outcome}: {reason}")
    _tag_outcome(context, outcome, reason)
    metadata = _headed(outcome, reason) | maintenance_metadata(report, history)
    metadata |= {outcome: dg.MetadataValue.text(reason)}
    return dg.MaterializeResult(metadata=metadata, check_results=[nothing_ran_check(outcome, reason)])
