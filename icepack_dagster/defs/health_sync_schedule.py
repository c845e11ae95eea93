"""The health-sync schedule: every table's status and health, refreshed in batches.

One run per batch of up to `health_sync_batch_size` tables, never one run per table: each run covers a
contiguous range of `iceberg_tables` partitions (Dagster keeps dynamic partitions in the order they
were added) and measures its tables concurrently; every table still gets its own materialization.
"""

from collections.abc import Sequence

import dagster as dg

from icepack_dagster.defs.jobs import health_sync_job
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.defs.platform_settings import PlatformSettings
from icepack_dagster.defs.tags import range_tags


def health_sync_requests(
    partitions: Sequence[str], batch_size: int, run_key_prefix: str
) -> list[dg.RunRequest]:
    """Run requests covering `partitions` (contiguous in partition order) in batches."""
    requests = []
    for index, start in enumerate(range(0, len(partitions), batch_size)):
        batch = partitions[start : start + batch_size]
        requests.append(
            dg.RunRequest(
                run_key=f"{run_key_prefix}:{index}",
                job_name=health_sync_job.name,
                tags=range_tags(batch[0], batch[-1]),
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
        return health_sync_requests(partitions, platform.health_sync_batch_size, f"health-sync:{tick}")

    return health_sync_schedule
