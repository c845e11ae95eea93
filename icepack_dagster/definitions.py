"""The one place that assembles icepack's Dagster definitions from one settings object.

`build_definitions` is what `IcepackComponent` (component/icepack_component.py) builds, in a host
project's `defs.yaml` and in the code location icepack ships: `dagster dev` (via `[tool.dagster]` in
pyproject.toml, or `workspace.yaml`), the Docker image and the Helm values load `defs`, a lazily
evaluated `@dg.definitions` function that loads the shipped definitions folder (component/location/),
whose `defs.yaml` is the component with no attribute of its own. One way to build the definitions:
importing this module reads no environment, starts no JVM and opens no connection. Tests call
`build_definitions(settings)` with their own settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.defs.alerts.alert_sensor import build_alert_sensor
from icepack_dagster.defs.asset_keys import DeploymentNames, with_ownership
from icepack_dagster.defs.discovery.discovery_sensor import build_discovery_sensor
from icepack_dagster.defs.fleet.fleet_automation import build_fleet_automation_sensor
from icepack_dagster.defs.fleet.fleet_summary import build_fleet_summary
from icepack_dagster.defs.fleet.job import build_fleet_summary_job
from icepack_dagster.defs.health_sync.freshness import with_health_freshness
from icepack_dagster.defs.health_sync.job import build_health_sync_job
from icepack_dagster.defs.health_sync.schedule import build_health_sync_schedule
from icepack_dagster.defs.health_sync.table_status_and_health import build_table_status_and_health
from icepack_dagster.defs.housekeeping.job import build_housekeeping_job
from icepack_dagster.defs.housekeeping.schedule import build_housekeeping_schedule
from icepack_dagster.defs.maintenance.batch_job import build_maintenance_batch_job
from icepack_dagster.defs.maintenance.failure_sensor import build_maintenance_failure_sensor
from icepack_dagster.defs.maintenance.job import build_maintenance_job
from icepack_dagster.defs.maintenance.maintained_table import build_maintained_table
from icepack_dagster.defs.maintenance.maintenance_recommendation import build_maintenance_recommendation
from icepack_dagster.defs.maintenance.maintenance_sensor import build_maintenance_sensor
from icepack_dagster.defs.maintenance.post_maintenance_sensor import build_post_maintenance_sensor
from icepack_dagster.defs.maintenance.quarantine_release import (
    build_release_quarantine_job,
    build_rollback_job,
)
from icepack_dagster.defs.resources import build_resources


def deployment_assets(platform: PlatformSettings) -> list[dg.AssetsDefinition]:
    """The assets of one deployment: its partitions definition and maintenance pool."""
    name = platform.deployment_name
    return [
        build_table_status_and_health(name),
        build_maintenance_recommendation(name),
        build_maintained_table(name),
        build_fleet_summary(name),
    ]


def deployment_jobs(platform: PlatformSettings) -> list[Any]:
    """The jobs of one deployment; its maintenance jobs hold its maintenance pool."""
    name = platform.deployment_name
    return [
        build_health_sync_job(name),
        build_maintenance_job(name),
        build_maintenance_batch_job(name),
        build_fleet_summary_job(name),
        build_release_quarantine_job(name),
        build_rollback_job(name),
        build_housekeeping_job(name),
    ]


def build_definitions(settings: IcepackSettings | None = None) -> dg.Definitions:
    """Assets, jobs, schedule, sensors and resources, all from `settings` (default: `load_settings()`);
    the schedule and sensors from its `platform` section."""
    settings = settings or load_settings()
    platform = settings.platform
    names = DeploymentNames.of(platform)
    return dg.Definitions(
        assets=list(
            dg.map_asset_specs(
                lambda spec: with_health_freshness(platform, with_ownership(names, spec)),
                deployment_assets(platform),
            )
        ),
        jobs=deployment_jobs(platform),
        schedules=[build_health_sync_schedule(platform), build_housekeeping_schedule(platform)],
        sensors=[
            build_discovery_sensor(platform),
            build_maintenance_sensor(platform),
            build_fleet_automation_sensor(platform),
            build_post_maintenance_sensor(platform),
            build_maintenance_failure_sensor(platform),
            build_alert_sensor(platform),
        ],
        resources=build_resources(settings),
    )


@dg.definitions
def defs() -> dg.Definitions:
    """The shipped code location: its definitions folder, loaded as `dg` loads a project's."""
    # imported here: the component it names imports this module
    from icepack_dagster.component import location

    folder = Path(location.__file__ or "").parent
    return dg.ComponentTree.from_module(defs_module=location, project_root=folder).build_defs()
