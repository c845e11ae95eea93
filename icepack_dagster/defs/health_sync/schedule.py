"""The health-sync schedule: every table's status and health, refreshed in batches (see `job.py`)."""

import dagster as dg

from icepack_dagster.defs.health_sync.job import (
    HEALTH_SYNC_MATERIALIZES,
    health_sync_job,
    health_sync_requests,
)
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.platform_settings import PlatformSettings


def build_health_sync_schedule(platform: PlatformSettings) -> dg.ScheduleDefinition:
    default = dg.DefaultScheduleStatus(platform.default_status)

    @dg.schedule(
        name="health_sync_schedule",
        job=health_sync_job,
        cron_schedule=platform.health_sync_cron,
        execution_timezone="UTC",
        default_status=default,
        description=f"Status and health of every table, {platform.health_sync_batch_size} tables per run: "
        "table_status, table_health and its healthy check, written for tables that changed.",
        metadata=HEALTH_SYNC_MATERIALIZES,
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
