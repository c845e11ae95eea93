"""Records a failure in maintenance history for a maintenance run that died without recording its
outcome (its worker OOM-killed, its pod evicted), so that a table whose maintenance keeps crashing is
quarantined like one whose maintenance keeps failing.

A run that failed in its own code has already decided what history says: the engine recorded a failed
action, and a refused run, an unreachable catalog or an invalid policy record nothing on purpose. So a
run counts only when one of its steps started and none failed by raising: either no step failure at
all (the run worker died; run monitoring marked the run failed) or only the executor's report that a
step process crashed. Each such run counts once, an original run and its retry alike
(docs/RELIABILITY.md), and never twice: a run is skipped when any outcome of its table was recorded
since it started, its own crash record included.

It watches every job of the code location, not only the sensor's `maintenance` job: a maintenance
started from Materialize, the launchpad or a backfill runs as `__ASSET_JOB`, and its crash must count
too. A run counts only when its `maintained_table` step (a batch run's `maintain_tables`) started.

A `maintenance_batch` run names its tables in its `icepack/batch_tables` tag. Each table it had not
finished when it died gets the failure record, once; a table it finished (its `maintained_table`
event is in the run, whatever the outcome, nothing to do included) keeps its own outcome, as does a
table with an outcome recorded since the run started.
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.maintenance.batch_job import MAINTAIN_TABLES_OP, batch_tables
from icepack_dagster.defs.partitions import table_key
from icepack_dagster.defs.resources import IcepackResource, icepack_of
from icepack_dagster.defs.run_tags import PARTITION_TAG
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport

WORKER_DIED = "the run worker died without recording an outcome"
# The error class Dagster's multiprocess executor reports for a step process that died (killed, OOM).
_STEP_PROCESS_CRASH = "ChildProcessCrashException"


def _maintenance_started(instance: dg.DagsterInstance, names: DeploymentNames, run_id: str) -> bool:
    """Whether the run's maintenance step started: `maintained_table` (a run of any job that maintained
    a table) or a batch run's `maintain_tables`."""
    starts = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_START).records
    events = [r.event_log_entry.dagster_event for r in starts]
    steps = (names.maintained_step, names.name(MAINTAIN_TABLES_OP))
    return any(event is not None and event.step_key in steps for event in events)


def _tables_of(instance: dg.DagsterInstance, platform: PlatformSettings, run: dg.DagsterRun) -> list[str]:
    """The tables the run maintained: its partition, or a batch run's tables, that are still
    discovered tables (a table dropped meanwhile has no history to keep)."""
    partition = run.tags.get(PARTITION_TAG)
    tables = [partition] if partition is not None else batch_tables(run.tags)
    current = set(instance.get_dynamic_partitions(platform.partitions_name)) if tables else set()
    return [table for table in tables if table in current]


def _finished_in(instance: dg.DagsterInstance, names: DeploymentNames, run_id: str) -> set[str]:
    """The tables the run finished: those with a `maintained_table` event (materialized, or observed
    failed) in the run."""
    kinds = {dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION}
    finished = set()
    for record in instance.get_records_for_run(run_id, of_type=kinds).records:
        event = record.event_log_entry.dagster_event
        if event is not None and event.asset_key == names.maintained_table and event.partition is not None:
            finished.add(event.partition)
    return finished


def _raised_in_code(step_failures: Sequence[dg.DagsterEvent]) -> list[str]:
    """The steps that failed by raising (not because their process died)."""
    return [
        str(event.step_key)
        for event in step_failures
        if event.step_failure_data.error is None
        or event.step_failure_data.error.cls_name != _STEP_PROCESS_CRASH
    ]


def _why(context: dg.RunFailureSensorContext, step_failures: Sequence[dg.DagsterEvent]) -> str:
    if step_failures:
        steps = ", ".join(str(event.step_key) for event in step_failures)
        return f"{WORKER_DIED}: the process of step {steps} ended abruptly (killed, or out of memory)"
    return f"{WORKER_DIED}: {context.failure_event.message or 'the run failed outside its steps'}"


def _run_times(instance: dg.DagsterInstance, run_id: str) -> tuple[datetime, datetime] | None:
    """When the run started and ended; None when it never started."""
    record = instance.get_run_record_by_id(run_id)
    if record is None or record.start_time is None:
        return None
    ended = record.end_time or record.update_timestamp.timestamp()
    return datetime.fromtimestamp(record.start_time, UTC), datetime.fromtimestamp(ended, UTC)


def build_maintenance_failure_sensor(platform: PlatformSettings) -> dg.SensorDefinition:
    """What `@dg.run_failure_sensor` builds, with the deployment's `icepack` resource key: that decorator
    takes resources only as parameters, whose names cannot be computed, so the sensor is the run status
    sensor it would make, on failed runs, reading its resource from `required_resource_keys`."""
    names = DeploymentNames.of(platform)

    def maintenance_failure_sensor(
        context: dg.RunStatusSensorContext, **_direct: object
    ) -> dg.SkipReason | None:
        # the failure view of the context, as `@dg.run_failure_sensor` passes it
        return _record_crash(context.for_run_failure(), icepack_of(context, names), platform)

    return dg.RunStatusSensorDefinition(
        name=names.name("maintenance_failure_sensor"),
        run_status=dg.DagsterRunStatus.FAILURE,
        run_status_sensor_fn=maintenance_failure_sensor,
        required_resource_keys={names.icepack_resource},
        default_status=dg.DefaultSensorStatus(platform.default_status),
        minimum_interval_seconds=platform.maintenance_interval_seconds,
        description="Records a failure in maintenance history for a maintenance run (of any job) whose "
        "worker died without recording an outcome (for a batch run, for each table it had not finished), "
        "so crashes count towards quarantine.",
    )


def _record_crash(
    context: dg.RunFailureSensorContext, icepack: IcepackResource, platform: PlatformSettings
) -> dg.SkipReason | None:
    """A failure in the history of each table the failed run had not finished, when its worker died."""
    run = context.dagster_run
    names = DeploymentNames.of(platform)
    tables = _tables_of(context.instance, platform, run)
    times = _run_times(context.instance, run.run_id)
    if not tables or times is None or not _maintenance_started(context.instance, names, run.run_id):
        return dg.SkipReason(f"run {run.run_id} never maintained a table: nothing to record")
    step_failures = context.get_step_failure_events()
    raised = _raised_in_code(step_failures)
    if raised:
        return dg.SkipReason(
            f"run {run.run_id}: {', '.join(raised)} failed in its own code, which records what "
            "maintenance history needs"
        )
    started, ended = times
    finished = _finished_in(context.instance, names, run.run_id)
    why = _why(context, step_failures)
    recorded = []
    for partition in tables:
        key = table_key(partition)
        last = icepack.engine.history(key).last_run_at
        if partition in finished or (last is not None and last >= started):
            continue
        report = MaintenanceReport(table=key.text, started_at=started, finished_at=ended, interrupted=why)
        icepack.engine.history_store.record(report)
        context.log.warning(f"{partition}: run {run.run_id} recorded as failed: {report.interrupted}")
        recorded.append(partition)
    if not recorded:
        return dg.SkipReason(
            f"{', '.join(tables)}: an outcome was recorded since run {run.run_id} started, or the run "
            "finished the table"
        )
    return None
