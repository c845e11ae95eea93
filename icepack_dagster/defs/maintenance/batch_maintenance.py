"""What a `maintenance_batch` run does: maintain its tables in one Spark application, one after the other
on each of `maintenance_batch_workers` threads (two tables at once keep a 2-core Spark busy while a
table's own bookkeeping runs). Each thread keeps one Spark session for its tables, with each table's
overrides undone after it (`spark/table_sessions.py`); on a Spark Connect server those sessions run
without generated code, which such a server compiles again for every statement (`connect_batch_conf`).

Each table is handled as its own maintenance run would handle it: a `maintenance_recommendation`
materialization says what the table gets and why (the recommendation its maintenance then runs), the
engine takes the table's lease (another maintenance holding it defers the table, never both at once),
runs the actions and records the outcome in the table's history, where quarantine counts failures.
Each table gets its own `maintained_table` event: a materialization when maintenance ran (or had
nothing to do, or found the table gone or held), an observation with the error when it failed, so a
failed table is never shown as maintained. A failure is the table's alone: the run goes on with the
next table and ends successfully; the tables already maintained keep their commits. A setting Spark
refuses is the deployment's: the run fails naming it, and no table's history counts it. Last, the run
re-measures the tables it changed and records their status and health, as the post-maintenance sync
does for a one-table run, without another run; then each table's `healthy_after_maintenance` check
judges that health, as a one-table run's does (a failed table's check fails, judging its latest
materialization, so no earlier pass stands for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import dagster as dg

from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.event_reads import latest_per_partition, metadata_of
from icepack_dagster.defs.health_sync.table_sync import sync_tables
from icepack_dagster.defs.maintenance.health_after_check import (
    as_evaluation,
    health_after_check,
    nothing_ran_check,
)
from icepack_dagster.defs.maintenance.maintenance_recommendation import recommend_now
from icepack_dagster.defs.materialization_codec import OUTCOME, decode_health, maintenance_metadata
from icepack_dagster.defs.partitions import table_key
from icepack_dagster.defs.resources import IcepackResource, SparkResource
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.recommendation.model import Recommendation
from icepack_dagster.engine import Engine, JudgedMaintenance
from icepack_dagster.exceptions import ConfigurationError, IcepackError
from icepack_dagster.spark.session import connect_batch_conf

# outcomes after which the table is measured again
_CHANGED = ("succeeded", "no_effect", "failed", "conflict", "violated")
# outcomes whose check fails with the reason
_UNRUN = ("failed", "violated", "deferred", "table_gone", "refused")
NOT_A_PARTITION = "not a partition"

Outcome = tuple[str, str | None]  # the table's outcome, and why when nothing (or a failure) ran


def maintain_batch(
    context: dg.OpExecutionContext, icepack: IcepackResource, spark: SparkResource, tables: Sequence[str]
) -> dict[str, str]:
    """Maintain `tables` in order; returns each table's outcome."""
    current = set(context.instance.get_dynamic_partitions(icepack.settings.platform.partitions_name))
    engine = icepack.maintenance_engine(spark)
    workers = min(icepack.settings.platform.maintenance_batch_workers, len(tables))
    names = DeploymentNames.of(icepack.settings.platform)

    def one(partition: str) -> Outcome:
        if partition not in current:
            context.log.warning(f"{partition}: not an iceberg_tables partition (dropped since the run was "
                                "requested), skipped")
            return NOT_A_PARTITION, None
        return maintain_one(context, engine, names, partition)

    with engine.table_sessions.shared(connect_batch_conf(spark.run_settings)):
        if workers > 1:  # Spark starts with the first table that needs it (never if none does)
            with ThreadPoolExecutor(workers, thread_name_prefix="icepack-batch") as pool:
                outcomes = dict(zip(tables, pool.map(one, tables), strict=True))
        else:
            outcomes = {partition: one(partition) for partition in tables}
    changed = [p for p, (outcome, _) in outcomes.items() if outcome in _CHANGED]
    if changed:
        sync_tables(context, icepack, changed, only_changes=False)
    log_health_after(context, names, {p: o for p, o in outcomes.items() if o[0] != NOT_A_PARTITION})
    counts: dict[str, int] = {}
    for outcome, _ in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    context.log.info(f"batch of {len(tables)} tables: " + ", ".join(f"{n} {o}" for o, n in counts.items()))
    return {partition: outcome for partition, (outcome, _) in outcomes.items()}


def maintain_one(
    context: dg.OpExecutionContext, engine: Engine, names: DeploymentNames, partition: str
) -> Outcome:
    """One table's recommendation, maintenance and `maintained_table` event; returns the outcome."""
    key = table_key(partition)
    started = utc_now()
    recommendation = _recommendation(context, engine, names, partition)
    try:  # the batch re-measures all its tables at once, after the last (`maintain_batch`)
        judged = engine.maintain_and_judge(
            key, recommendation=recommendation, on_progress=context.log.info, remeasure=False
        )
    except ConfigurationError:  # the deployment's (a setting Spark refuses), not the table's: the run fails
        raise
    except IcepackError as error:  # anything the engine did not record itself is recorded here
        report = MaintenanceReport(
            table=key.text, started_at=started, finished_at=utc_now(), interrupted=str(error)
        )
        engine.record(report)
        judged = JudgedMaintenance(report, engine.history(key))
    report, outcome = judged.report, judged.outcome
    engine.facts.record_maintenance(report, outcome, utc_now())
    metadata = maintenance_metadata(report, judged.history)
    if outcome in ("failed", "violated"):
        context.log.warning(f"{partition}: maintenance {outcome}: {report.first_error}")
        metadata["error"] = dg.MetadataValue.text(report.first_error or "failed")
        context.log_event(dg.AssetObservation(asset_key=names.maintained_table, partition=partition,
                                              metadata=metadata))
        return outcome, f"maintenance {outcome}: {report.first_error or outcome}"
    reason = None
    if judged.unrun is not None:  # deferred, or gone
        reason = judged.unrun[1]
    elif outcome == "conflict":
        reason = report.conflict
    elif outcome == "refused":  # the Spark's Iceberg runtime cannot do it: a person must act
        reason = next((r.reason for r in report.results if r.status == "refused" and r.reason), outcome)
    if reason is not None:
        context.log.warning(f"{partition}: {reason}")
        metadata[outcome] = dg.MetadataValue.text(reason)
    metadata[OUTCOME] = dg.MetadataValue.text(outcome)
    context.log_event(dg.AssetMaterialization(asset_key=names.maintained_table, partition=partition,
                                              metadata=metadata))
    return outcome, reason


def _recommendation(
    context: dg.OpExecutionContext, engine: Engine, names: DeploymentNames, partition: str
) -> Recommendation | None:
    """The table's `maintenance_recommendation` materialization, as a one-table run writes it, and the
    recommendation its maintenance runs; None when there is none to log (the table is gone, or its
    policy or metadata cannot be read: the engine then records or defers the table itself)."""
    try:
        recommendation, metadata = recommend_now(engine, table_key(partition), context.log, names)
    except IcepackError as error:
        context.log.warning(f"{partition}: no recommendation: {error}")
        return None
    context.log_event(dg.AssetMaterialization(asset_key=names.maintenance_recommendation, partition=partition,
                                              metadata=metadata))
    return recommendation


def log_health_after(
    context: dg.OpExecutionContext, names: DeploymentNames, outcomes: dict[str, Outcome]
) -> None:
    """Each table's `healthy_after_maintenance` result, judging its latest `maintained_table`
    materialization (this run's; for a failed table, which has none in this run, the one before): on
    the table's latest health, re-measured in this run when maintenance changed it."""
    partitions = list(outcomes)
    materializations = latest_per_partition(context.instance, names.maintained_table, partitions)
    healths = latest_per_partition(context.instance, names.table_health, partitions)
    for partition, (outcome, reason) in outcomes.items():
        health = decode_health(metadata_of(healths[partition])) if partition in healths else None
        if outcome in _UNRUN:
            result = nothing_ran_check(outcome, reason or outcome)
        elif health is None:
            result = nothing_ran_check("unknown", "no health was measured after maintenance")
        else:
            result = health_after_check(health)
        evaluation = as_evaluation(names.maintained_table, result, partition, materializations.get(partition))
        # log_event stores an AssetCheckEvaluation like any event; its type annotation omits it.
        context.log_event(evaluation)  # type: ignore[arg-type]
