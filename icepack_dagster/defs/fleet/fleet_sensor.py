"""Refreshes the fleet summary after each health sync, maintenance or maintenance batch run succeeds
(one refresh waiting at a time, so a sync of many batches does not pile up refreshes). A batch run is
followed directly: it records its tables' status and health itself, and no health sync follows it."""

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.fleet.job import build_fleet_summary_job
from icepack_dagster.defs.health_sync.job import build_health_sync_job
from icepack_dagster.defs.maintenance.batch_job import build_maintenance_batch_job
from icepack_dagster.defs.maintenance.job import build_maintenance_job
from icepack_dagster.defs.run_tags import deployment_tags, own_runs

_WAITING = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING]


def build_fleet_sensor(platform: PlatformSettings) -> dg.RunStatusSensorDefinition:
    default = dg.DefaultSensorStatus(platform.default_status)
    fleet_summary_job = build_fleet_summary_job(platform.deployment_name)

    @dg.run_status_sensor(
        name=DeploymentNames.of(platform).name("fleet_refresh_sensor"),
        run_status=dg.DagsterRunStatus.SUCCESS,
        monitored_jobs=[
            build_health_sync_job(platform.deployment_name),
            build_maintenance_job(platform.deployment_name),
            build_maintenance_batch_job(platform.deployment_name),
        ],
        request_job=fleet_summary_job,
        default_status=default,
        minimum_interval_seconds=platform.maintenance_interval_seconds,
        description="Refresh fleet_summary when a health sync, a maintenance or a maintenance batch run "
        "succeeds.",
    )
    def fleet_refresh_sensor(context: dg.RunStatusSensorContext) -> dg.RunRequest | dg.SkipReason:
        waiting = context.instance.get_run_records(
            filters=own_runs(platform, _WAITING, job_name=fleet_summary_job.name), limit=1
        )
        if waiting:
            return dg.SkipReason("a fleet refresh is already waiting to start; it will include this run")
        return dg.RunRequest(run_key=f"fleet:{context.dagster_run.run_id}", tags=deployment_tags(platform))

    return fleet_refresh_sensor
