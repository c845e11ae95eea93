"""The health-sync schedule: every table's status and health, refreshed in batches (see `job.py`).

A sync that takes longer than the schedule's interval (a large fleet that mostly needs attention, a
slow catalog, a busy machine) must not pile up in the queue: each tick would add a whole sync behind the
unfinished one, and the queue would grow without end. So a tick does not request a batch while an
earlier tick's run covering any of its tables is still queued or running; it requests the others and
says which it held back and what to change. The queue then holds at most one scheduled run per batch,
and each table is refreshed as often as the machine can (every other interval, say, instead of never
catching up). Runs the schedule did not request (post-maintenance refreshes, a click) hold nothing
back, except the discovery sensor's: a table whose first sync is still queued or running is left out of
the tick's batches (a first deployment's fleet would otherwise be synced twice at once), and the next
tick after that run ended covers it.
"""

import dagster as dg

from icepack_dagster.config.platform import (
    HEALTH_SYNC_BATCH,
    HEALTH_SYNC_RUNS,
    MAX_HEALTH_SYNC_BATCH,
    PlatformSettings,
)
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.discovery.discovery_sensor import discovery_sensor_name
from icepack_dagster.defs.health_sync.job import (
    build_health_sync_job,
    health_sync_materializes,
    health_sync_requests,
    run_config_tables,
)
from icepack_dagster.defs.run_tags import SCHEDULE_NAME_TAG, SENSOR_NAME_TAG, deployment_tags, own_runs

SCHEDULE_NAME = "health_sync_schedule"  # the default deployment's; others' carry their prefix
# Every status of a run that has not ended (a run Dagster will retry ends, and its retry is queued).
UNFINISHED = (
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
)


def unfinished_scheduled_tables(
    instance: dg.DagsterInstance, platform: PlatformSettings
) -> tuple[set[str], int]:
    """(the tables of this schedule's health-sync runs that are queued or running, how many runs)."""
    return _unfinished_sync_tables(instance, platform, {SCHEDULE_NAME_TAG: schedule_name(platform)})


def unfinished_first_syncs(instance: dg.DagsterInstance, platform: PlatformSettings) -> set[str]:
    """The tables whose first health sync (a run of the discovery sensor) is queued or running."""
    return _unfinished_sync_tables(instance, platform, {SENSOR_NAME_TAG: discovery_sensor_name(platform)})[0]


def _unfinished_sync_tables(
    instance: dg.DagsterInstance, platform: PlatformSettings, instigator: dict[str, str]
) -> tuple[set[str], int]:
    job = build_health_sync_job(platform.deployment_name)
    runs = instance.get_runs(own_runs(platform, UNFINISHED, instigator, job_name=job.name))
    names = DeploymentNames.of(platform)
    return {table for run in runs for table in run_config_tables(run.run_config, names)}, len(runs)


def schedule_name(platform: PlatformSettings) -> str:
    """The deployment's health-sync schedule (`health_sync_schedule` for the default deployment)."""
    return DeploymentNames.of(platform).name(SCHEDULE_NAME)


def build_health_sync_schedule(platform: PlatformSettings) -> dg.ScheduleDefinition:
    default = dg.DefaultScheduleStatus(platform.default_status)
    job = build_health_sync_job(platform.deployment_name)

    @dg.schedule(
        name=schedule_name(platform),
        job=job,
        cron_schedule=platform.health_sync_cron,
        execution_timezone="UTC",
        default_status=default,
        description=f"Status and health of every table, {_batch_description(platform)} per run: "
        "table_status, table_health and its healthy check, written for tables that changed. A batch whose "
        "run from an earlier tick is still queued or running waits for the next tick; tables whose first "
        "sync (discovery's run) is still queued or running are left to it.",
        metadata=health_sync_materializes(DeploymentNames.of(platform)),
    )
    def health_sync_schedule(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        partitions = list(context.instance.get_dynamic_partitions(platform.partitions_name))
        if not partitions:
            return dg.SkipReason("no tables yet: the discovery sensor adds them as iceberg_tables partitions")
        # sized by the whole fleet: leaving tables out below must not resize the batches, which would move
        # their boundaries against the runs of earlier ticks and hold back more batches than needed
        batch_size = platform.health_sync_batch(len(partitions))
        first = unfinished_first_syncs(context.instance, platform)
        remaining = [table for table in partitions if table not in first]
        if len(remaining) < len(partitions):
            left = (f"{len(partitions) - len(remaining)} table(s) left out: their first sync (a discovery "
                    "run) is still queued or running")
            if not remaining:
                return dg.SkipReason(left)
            context.log.info(left)
            partitions = remaining
        tick = context.scheduled_execution_time.isoformat()
        requests = health_sync_requests(
            DeploymentNames.of(platform),
            partitions,
            batch_size,
            f"health-sync:{tick}",
            platform.health_sync_writes,
            deployment_tags(platform),
        )
        pending, runs = unfinished_scheduled_tables(context.instance, platform)
        names = DeploymentNames.of(platform)
        ready = [r for r in requests if pending.isdisjoint(run_config_tables(r.run_config, names))]
        if len(ready) == len(requests):
            return requests
        held = (
            f"{len(requests) - len(ready)} of {len(requests)} health-sync batches not requested: "
            f"{runs} run(s) of earlier ticks still queued or running cover {len(pending)} of their tables. "
            f"A sync is taking longer than the schedule's interval ({platform.health_sync_cron}); those "
            "tables are refreshed when their run ends and a later tick requests them again. To refresh "
            "every table every interval: lengthen health_sync_cron, let more observation runs start at once "
            "(the icepack/kind: observation limit in dagster.yaml), or raise attention_rewrite_hours "
            "(fewer periodic rewrites per sync)"
        )
        if not ready:
            return dg.SkipReason(held)
        context.log.warning(held)
        return ready

    return health_sync_schedule


def _batch_description(platform: PlatformSettings) -> str:
    if platform.health_sync_batch_size is not None:
        return f"{platform.health_sync_batch_size:,} tables"
    fleet = HEALTH_SYNC_BATCH * HEALTH_SYNC_RUNS
    return (f"{HEALTH_SYNC_BATCH:,} tables (more in a fleet over {fleet:,}: at most {HEALTH_SYNC_RUNS} runs, "
            f"{MAX_HEALTH_SYNC_BATCH:,} tables each)")
