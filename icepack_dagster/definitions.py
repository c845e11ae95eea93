"""The one place that assembles the Dagster code location from one settings object.

`dagster dev` (via `[tool.dagster]` in pyproject.toml) loads `defs`, a lazily evaluated
`@dg.definitions` function: importing this module reads no environment, starts no JVM and opens no
connection. Tests call `build_definitions(settings)` with their own settings.
"""

from __future__ import annotations

import dagster as dg

from icepack_dagster.defs.assets.fleet_summary import fleet_summary
from icepack_dagster.defs.assets.maintained_table import maintained_table
from icepack_dagster.defs.assets.maintenance_recommendation import maintenance_recommendation
from icepack_dagster.defs.assets.table_status_and_health import table_status_and_health
from icepack_dagster.defs.health_sync_schedule import build_health_sync_schedule
from icepack_dagster.defs.jobs import (
    fleet_summary_job,
    health_sync_job,
    maintenance_job,
    release_quarantine_job,
)
from icepack_dagster.defs.platform_settings import PlatformSettings, load_platform_settings
from icepack_dagster.defs.resources import build_resources
from icepack_dagster.defs.sensors.discovery_sensor import build_discovery_sensor
from icepack_dagster.defs.sensors.fleet_sensor import build_fleet_sensor
from icepack_dagster.defs.sensors.maintenance_failure_sensor import build_maintenance_failure_sensor
from icepack_dagster.defs.sensors.maintenance_sensor import build_maintenance_sensor
from icepack_dagster.defs.sensors.post_maintenance_sensor import build_post_maintenance_sensor
from icepack_dagster.settings import IcepackSettings, load_settings

ASSETS = (table_status_and_health, maintenance_recommendation, maintained_table, fleet_summary)
JOBS = (health_sync_job, maintenance_job, fleet_summary_job, release_quarantine_job)


def build_definitions(
    settings: IcepackSettings | None = None, platform: PlatformSettings | None = None
) -> dg.Definitions:
    """Assets, jobs, schedule, sensors and resources, all from `settings` (default: `load_settings()`)
    and `platform` (default: `ICEPACK_PLATFORM_*`)."""
    settings = settings or load_settings()
    platform = platform or load_platform_settings()
    return dg.Definitions(
        assets=list(ASSETS),
        jobs=list(JOBS),
        schedules=[build_health_sync_schedule(platform)],
        sensors=[
            build_discovery_sensor(platform),
            build_maintenance_sensor(platform),
            build_fleet_sensor(platform),
            build_post_maintenance_sensor(platform),
            build_maintenance_failure_sensor(platform),
        ],
        resources=build_resources(settings, platform),
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
