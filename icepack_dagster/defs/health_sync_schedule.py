"""The health-sync schedule: every table's status and health, refreshed in batches.

One run per batch of up to `health_sync_batch_size` tables, never one run per table: each run lists its
tables in its run config (consecutive `iceberg_tables` partitions), reads only tables whose metadata
changed, and writes materializations only for tables
whose status or health changed (or is due a periodic rewrite): see `health_sync_writes`.
"""

from collections.abc import Sequence

import dagster as dg

from icepack_dagster.defs.health_sync_writes import SyncWrites
from icepack_dagster.defs.jobs import health_sync_job, health_sync_run_config
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.defs.platform_settings import PlatformSettings
from icepack_dagster.defs.tags import batch_tags


def health_sync_requests(
    partitions: Sequence[str], batch_size: int, run_key_prefix: str, writes: SyncWrites = "changes"
) -> list[dg.RunRequest]:
    """Run requests covering `partitions` (contiguous in partition order) in batches; `writes` says
    whether each run writes only tables that changed (the default) or every table."""
    requests = []
    for index, start in enumerate(range(0, len(partitions), batch_size)):
        batch = partitions[start : start + batch_size]
        requests.append(
            dg.RunRequest(
                run_key=f"{run_key_prefix}:{index}",
                job_name=health_sync_job.name,
                run_config=health_sync_run_config(list(batch), writes),
                tags=batch_tags(batch),
            )
        )
    return requests


def build_health_sync_schedule(platform: PlatformSettings) -> dg.ScheduleDefinition:
    default = dg.DefaultScheduleStatus(platform.default_status)

    @dg.schedule(
        name="health_sync_schedule",
        job=health_sync_job,
        cron_schedule=platform.health_sync_cron,
        execution_timezone="UTC",
        default_status=default,
        description=f"Status and health of every table, {platform.health_sync_batch_size} tables per run.",
    )
    def health_sync_schedule(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        partitions = list(context.instance.get_dynamic_partitions(PARTITIONS_NAME))
        if not partitions:
            return dg.SkipReason("no tables yet: the discovery sensor adds them as iceberg_tables partitions")
        tick = context.scheduled_execution_time.isoformat()
        return health_sync_requests(
            partitions, platform.health_sync_batch_size, f"health-sync:{tick}", platform.health_sync_writes
        )

    return health_sync_schedule
