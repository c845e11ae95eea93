"""The code location of bench/fleet_refresh.py: icepack's definitions (settings from ICEPACK_CONFIG) with
the fleet summary refreshed the way BENCH_FLEET_REFRESH names:

- `sensor`: the run-status sensor icepack used before (`fleet_refresh_sensor`, below as it was): a
  `fleet_refresh` run after every successful health-sync, maintenance or maintenance batch run, unless
  one is already waiting to start; `fleet_summary` has no automation condition;
- `condition`: what icepack ships (`defs/fleet/fleet_automation.py`);
- `eager`: the same sensor evaluating `AutomationCondition.eager()` instead.
"""

import os

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import load_settings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.fleet.fleet_automation import FLEET_AUTOMATION_SENSOR
from icepack_dagster.defs.fleet.job import build_fleet_summary_job
from icepack_dagster.defs.health_sync.job import build_health_sync_job
from icepack_dagster.defs.maintenance.batch_job import build_maintenance_batch_job
from icepack_dagster.defs.maintenance.job import build_maintenance_job
from icepack_dagster.defs.run_tags import deployment_tags, own_runs

VARIANTS = ("sensor", "condition", "eager")
RUN_STATUS_SENSOR = "fleet_refresh_sensor"
_WAITING = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING]


def build_run_status_sensor(platform: PlatformSettings) -> dg.RunStatusSensorDefinition:
    """The fleet refresh sensor as icepack shipped it until the automation condition replaced it."""
    fleet_summary_job = build_fleet_summary_job(platform.deployment_name)

    @dg.run_status_sensor(
        name=DeploymentNames.of(platform).name(RUN_STATUS_SENSOR),
        run_status=dg.DagsterRunStatus.SUCCESS,
        monitored_jobs=[
            build_health_sync_job(platform.deployment_name),
            build_maintenance_job(platform.deployment_name),
            build_maintenance_batch_job(platform.deployment_name),
        ],
        request_job=fleet_summary_job,
        default_status=dg.DefaultSensorStatus(platform.default_status),
        minimum_interval_seconds=platform.maintenance_interval_seconds,
    )
    def fleet_refresh_sensor(context: dg.RunStatusSensorContext) -> dg.RunRequest | dg.SkipReason:
        waiting = context.instance.get_run_records(
            filters=own_runs(platform, _WAITING, job_name=fleet_summary_job.name), limit=1
        )
        if waiting:
            return dg.SkipReason("a fleet refresh is already waiting to start; it will include this run")
        return dg.RunRequest(run_key=f"fleet:{context.dagster_run.run_id}", tags=deployment_tags(platform))

    return fleet_refresh_sensor


def variant_definitions(variant: str) -> dg.Definitions:
    settings = load_settings()
    shipped = build_definitions(settings)
    if variant == "condition":
        return shipped
    fleet = DeploymentNames.of(settings.platform).fleet_summary
    condition = dg.AutomationCondition.eager() if variant == "eager" else None

    def refreshed(spec: dg.AssetSpec) -> dg.AssetSpec:
        return spec.replace_attributes(automation_condition=condition) if spec.key == fleet else spec

    sensors = list(shipped.sensors or [])
    if variant == "sensor":
        automation = DeploymentNames.of(settings.platform).name(FLEET_AUTOMATION_SENSOR)
        sensors = [s for s in sensors if s.name != automation] + [build_run_status_sensor(settings.platform)]
    return dg.Definitions(
        assets=list(dg.map_asset_specs(refreshed, list(shipped.assets or []))),  # type: ignore[arg-type]
        jobs=shipped.jobs,
        schedules=shipped.schedules,
        sensors=sensors,
        resources=shipped.resources,
    )


@dg.definitions
def defs() -> dg.Definitions:
    variant = os.environ["BENCH_FLEET_REFRESH"]
    if variant not in VARIANTS:
        raise ValueError(f"BENCH_FLEET_REFRESH={variant!r}: one of {', '.join(VARIANTS)}")
    return variant_definitions(variant)
