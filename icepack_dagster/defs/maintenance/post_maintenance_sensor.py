"""Re-measures a table right after its maintenance succeeds, so its health (and the fleet view and the
maintenance sensor, which read health) reflect the work within seconds instead of at the next sync."""

import dagster as dg

from icepack_dagster.defs.health_sync.job import health_sync_job, health_sync_run_config
from icepack_dagster.defs.maintenance.job import maintenance_job
from icepack_dagster.defs.run_tags import PARTITION_TAG, batch_tags
from icepack_dagster.platform_settings import PlatformSettings


def build_post_maintenance_sensor(platform: PlatformSettings) -> dg.RunStatusSensorDefinition:
    default = dg.DefaultSensorStatus(platform.default_status)

    @dg.run_status_sensor(
        name="post_maintenance_health_sensor",
        run_status=dg.DagsterRunStatus.SUCCESS,
        monitored_jobs=[maintenance_job],
        request_job=health_sync_job,
        default_status=default,
        minimum_interval_seconds=platform.maintenance_interval_seconds,
        description="A health sync of the one table a maintenance run just finished.",
    )
    def post_maintenance_health_sensor(context: dg.RunStatusSensorContext) -> dg.RunRequest | dg.SkipReason:
        partition = context.dagster_run.tags.get(PARTITION_TAG)
        if partition is None:
            return dg.SkipReason(f"run {context.dagster_run.run_id} has no partition tag")
        return dg.RunRequest(
            run_key=f"post-maintenance:{context.dagster_run.run_id}",
            run_config=health_sync_run_config([partition], "all"),
            tags=batch_tags([partition]),
        )

    return post_maintenance_health_sensor
