"""One maintenance per table, whoever launched it, without any instance-wide tag limit.

icepack asks nothing of the run queue for this (a limit on `dagster/partition` would hold every other
team's one-partition runs too). The table's lease in icepack's state database is the guard: a
maintenance holds it while it plans and runs (`store/table_lease.py`), and a second one ends
`deferred`. Before that, `maintained_table` checks the instance: when another run of this
deployment (found by the maintenance pool's tag, `run_tags.pool_runs`) is inside its own
`maintained_table` step for the same table and entered it first (lower event storage id), this run
refuses, so of two overlapping runs the later one refuses before it reads anything.

The maintenance cap is the deployment's pool: it holds queued runs, but a run that never passed the
queue (no `RUN_ENQUEUED` event: `dagster asset materialize`, `execute_in_process`) is counted here,
and refuses when `max_maintenance_in_flight` other maintenances are already inside their step.
"""

from __future__ import annotations

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.maintenance.batch_job import BATCH_TABLES_TAG
from icepack_dagster.defs.run_tags import PARTITION_TAG, TABLE_TAG, pool_runs, runs_maintaining

_STEP_EVENTS = {
    dg.DagsterEventType.STEP_START,
    dg.DagsterEventType.STEP_SUCCESS,
    dg.DagsterEventType.STEP_FAILURE,
}


def _open_step_start(instance: dg.DagsterInstance, step: str, run_id: str) -> int | None:
    """Storage id of the run's `maintained_table` step start while that step has not ended."""
    opened = None
    for record in instance.get_records_for_run(run_id, of_type=_STEP_EVENTS).records:
        event = record.event_log_entry.dagster_event
        if event is None or event.step_key != step:
            continue
        opened = record.storage_id if event.event_type == dg.DagsterEventType.STEP_START else None
    return opened


def earlier_maintenance(
    instance: dg.DagsterInstance, platform: PlatformSettings, run_id: str, partition: str
) -> str | None:
    """The id of another run of this deployment that is maintaining `partition` right now and began
    before `run_id`."""
    step = DeploymentNames.of(platform).maintained_step
    mine = _open_step_start(instance, step, run_id)
    if mine is None:
        return None
    others: set[str] = set()
    for tags in ({TABLE_TAG: partition}, {PARTITION_TAG: partition}):
        filters = pool_runs(platform, [dg.DagsterRunStatus.STARTED], tags)
        others |= {r.dagster_run.run_id for r in instance.get_run_records(filters=filters)}
    others.discard(run_id)
    earlier = []
    for other in sorted(others):
        opened = _open_step_start(instance, step, other)
        if opened is not None and opened < mine:
            earlier.append((opened, other))
    return min(earlier)[1] if earlier else None


def refuse_concurrent_maintenance(
    context: dg.AssetExecutionContext, platform: PlatformSettings, partition: str
) -> None:
    """Raises `dg.Failure` (no retry, nothing recorded in the maintenance history) when another run is
    maintaining the table: two maintenances of one table never run at once."""
    other = earlier_maintenance(context.instance, platform, context.run.run_id, partition)
    if other is None:
        return
    raise dg.Failure(
        description=f"maintenance of {partition} refused: run {other} is maintaining this table right "
        "now; two maintenances of one table never run at once. Nothing was changed.",
        metadata={"concurrent_run": dg.MetadataValue.dagster_run(other)},
        allow_retries=False,
    )


def _passed_the_queue(instance: dg.DagsterInstance, run_id: str) -> bool:
    """Whether the run waited in the run queue (and so for a slot of the maintenance pool)."""
    enqueued = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_ENQUEUED, limit=1)
    return bool(enqueued.records)


def maintaining_now(instance: dg.DagsterInstance, platform: PlatformSettings, run_id: str) -> list[str]:
    """Other runs maintaining a table right now: inside their `maintained_table` step, or a batch run."""
    started = runs_maintaining(instance, platform, [dg.DagsterRunStatus.STARTED])
    step = DeploymentNames.of(platform).maintained_step
    return sorted(
        run.run_id
        for run in started
        if run.run_id != run_id
        and (BATCH_TABLES_TAG in run.tags or _open_step_start(instance, step, run.run_id) is not None)
    )


def refuse_beyond_the_cap(
    context: dg.AssetExecutionContext, platform: PlatformSettings, partition: str
) -> None:
    """Raises `dg.Failure` (no retry, nothing recorded) when this run bypassed the queue while the cap's
    number of maintenances already run: the cap holds for in-process runs too, which cannot wait in the
    queue."""
    if _passed_the_queue(context.instance, context.run.run_id):
        return
    cap = platform.max_maintenance_in_flight
    others = maintaining_now(context.instance, platform, context.run.run_id)
    if len(others) < cap:
        return
    raise dg.Failure(
        description=f"maintenance of {partition} refused: {len(others)} maintenance run(s) are running "
        f"({', '.join(others[:5])}) and the cap is {cap} (max_maintenance_in_flight). This run did not "
        "pass the run queue, which would have held it until a slot freed: launch it from the UI or with "
        "`dagster job launch`, or try again later. Nothing was changed.",
        allow_retries=False,
    )
