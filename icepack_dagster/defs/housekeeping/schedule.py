"""The housekeeping schedule: once a day by default (`housekeeping_cron`), one `housekeeping` run."""

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.housekeeping.job import housekeeping_job


def build_housekeeping_schedule(platform: PlatformSettings) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name="housekeeping_schedule",
        job=housekeeping_job,
        cron_schedule=platform.housekeeping_cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus(platform.default_status),
        description=f"Deletes finished runs older than {platform.run_retention_days} days and prunes "
        "maintenance history, daily.",
    )
