"""The housekeeping schedule: once a day by default (`housekeeping_cron`), one `housekeeping` run. It
deletes runs only when `delete_old_runs` is on, and then only this deployment's own."""

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.housekeeping.job import build_housekeeping_job
from icepack_dagster.defs.run_tags import deployment_tags


def build_housekeeping_schedule(platform: PlatformSettings) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name=DeploymentNames.of(platform).name("housekeeping_schedule"),
        job=build_housekeeping_job(platform.deployment_name),
        cron_schedule=platform.housekeeping_cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus(platform.default_status),
        tags=deployment_tags(platform),
        description="Prunes maintenance history daily"
        + (
            f" and deletes this deployment's finished runs older than {platform.run_retention_days} days."
            if platform.delete_old_runs
            else "; deletes no run (delete_old_runs is off)."
        ),
    )
