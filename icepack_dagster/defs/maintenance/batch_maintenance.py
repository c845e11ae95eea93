"""What a `maintenance_batch` run does: maintain its tables one after the other in one Spark session.

Each table is handled as its own maintenance run would handle it: the engine takes the table's lease
(another maintenance holding it defers the table, never both at once), plans on fresh status, runs
the actions and records the outcome in the table's history, where quarantine counts failures. Each
table gets its own `maintained_table` event: a materialization when maintenance ran (or had nothing
to do, or found the table gone or held), an observation with the error when it failed, so a failed
table is never shown as maintained. A failure is the table's alone: the run goes on with the next
table and ends successfully; the tables already maintained keep their commits. Last, the run
re-measures the tables it changed and records their status and health, as the post-maintenance sync
does for a one-table run, without another run.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from icepack_dagster.defs.asset_keys import MAINTAINED_TABLE
from icepack_dagster.defs.health_sync.table_sync import sync_tables
from icepack_dagster.defs.materialization_codec import OUTCOME, maintenance_metadata
from icepack_dagster.defs.partitions import PARTITIONS_NAME, table_key
from icepack_dagster.defs.resources import IcepackResource, SparkResource
from icepack_dagster.domain.maintenance_report import MaintenanceReport
from icepack_dagster.engine import Engine, utc_now
from icepack_dagster.exceptions import IcepackError

_CHANGED = ("succeeded", "no_effect", "failed")  # outcomes after which the table is measured again


def maintain_batch(
    context: dg.OpExecutionContext, icepack: IcepackResource, spark: SparkResource, tables: Sequence[str]
) -> dict[str, str]:
    """Maintain `tables` in order; returns each table's outcome."""
    current = set(context.instance.get_dynamic_partitions(PARTITIONS_NAME))
    engine = icepack.maintenance_engine(spark)
    outcomes: dict[str, str] = {}
    for partition in tables:
        if partition not in current:
            context.log.warning(f"{partition}: not an iceberg_tables partition (dropped since the run was "
                                "requested), skipped")
            outcomes[partition] = "not a partition"
            continue
        outcomes[partition] = maintain_one(context, engine, partition)
    changed = [p for p, outcome in outcomes.items() if outcome in _CHANGED]
    if changed:
        sync_tables(context, icepack, changed, only_changes=False)
    counts: dict[str, int] = {}
    for outcome in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    context.log.info(f"batch of {len(tables)} tables: " + ", ".join(f"{n} {o}" for o, n in counts.items()))
    return outcomes


def maintain_one(context: dg.OpExecutionContext, engine: Engine, partition: str) -> str:
    """One table's maintenance and its `maintained_table` event; returns the outcome."""
    key = table_key(partition)
    started = utc_now()
    try:
        report = engine.maintain(key, on_progress=context.log.info)
    except IcepackError as error:  # anything the engine did not record itself is recorded here
        report = MaintenanceReport(
            table=key.text, started_at=started, finished_at=utc_now(), interrupted=str(error)
        )
        engine.history_store.record(report)
    metadata = maintenance_metadata(report, engine.history(key))
    outcome = report.outcome
    if outcome == "failed":
        context.log.warning(f"{partition}: maintenance failed: {report.first_error}")
        metadata["error"] = dg.MetadataValue.text(report.first_error or "failed")
        context.log_event(dg.AssetObservation(asset_key=MAINTAINED_TABLE, partition=partition,
                                              metadata=metadata))
        return outcome
    if outcome in ("deferred", "table_gone"):
        reason = next((r.reason for r in report.results if r.reason), outcome)
        context.log.warning(f"{partition}: {reason}")
        metadata[outcome] = dg.MetadataValue.text(reason)
    metadata[OUTCOME] = dg.MetadataValue.text(outcome)
    context.log_event(dg.AssetMaterialization(asset_key=MAINTAINED_TABLE, partition=partition,
                                              metadata=metadata))
    return outcome
