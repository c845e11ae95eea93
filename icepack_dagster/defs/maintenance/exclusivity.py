"""One maintenance per table, also for runs that never pass the run queue.

The queued run coordinator's `dagster/partition` limit is the guard for every queued run (Dagster
tags each one-partition run with its partition, whoever launches it). A run executed in process
(`dagster asset materialize`, `execute_in_process`) or an instance without the queued coordinator is
not held by it; so `maintained_table` checks the
instance before it touches Spark: when another run of the same table is inside its own
`maintained_table` step and entered it first (lower event storage id), this run refuses. Of two
overlapping runs, the later one refuses; the queue stays the guard that never lets both start.
"""

from __future__ import annotations

import dagster as dg

from icepack_dagster.defs.run_tags import PARTITION_TAG, TABLE_TAG

MAINTAINED_STEP = "maintained_table"
_STEP_EVENTS = {
    dg.DagsterEventType.STEP_START,
    dg.DagsterEventType.STEP_SUCCESS,
    dg.DagsterEventType.STEP_FAILURE,
}


def _open_step_start(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """Storage id of the run's `maintained_table` step start while that step has not ended."""
    opened = None
    for record in instance.get_records_for_run(run_id, of_type=_STEP_EVENTS).records:
        event = record.event_log_entry.dagster_event
        if event is None or event.step_key != MAINTAINED_STEP:
            continue
        opened = record.storage_id if event.event_type == dg.DagsterEventType.STEP_START else None
    return opened


def earlier_maintenance(instance: dg.DagsterInstance, run_id: str, partition: str) -> str | None:
    """The id of another run that is maintaining `partition` right now and began before `run_id`."""
    mine = _open_step_start(instance, run_id)
    if mine is None:
        return None
    others: set[str] = set()
    for tags in ({TABLE_TAG: partition}, {PARTITION_TAG: partition}):
        filters = dg.RunsFilter(tags=tags, statuses=[dg.DagsterRunStatus.STARTED])
        others |= {r.dagster_run.run_id for r in instance.get_run_records(filters=filters)}
    others.discard(run_id)
    earlier = []
    for other in sorted(others):
        opened = _open_step_start(instance, other)
        if opened is not None and opened < mine:
            earlier.append((opened, other))
    return min(earlier)[1] if earlier else None


def refuse_concurrent_maintenance(context: dg.AssetExecutionContext, partition: str) -> None:
    """Raises `dg.Failure` (no retry, nothing recorded in the maintenance history) when another run is
    maintaining the table: two maintenances of one table never run at once."""
    other = earlier_maintenance(context.instance, context.run.run_id, partition)
    if other is None:
        return
    raise dg.Failure(
        description=f"maintenance of {partition} refused: run {other} is maintaining this table right "
        "now; two maintenances of one table never run at once. Nothing was changed.",
        metadata={"concurrent_run": dg.MetadataValue.dagster_run(other)},
        allow_retries=False,
    )
