"""How the fleet summary refreshes: a declarative automation condition on `fleet_summary`, evaluated by
the deployment's own automation condition sensor, which starts on as the deployment's other sensors do
(the component's `automation` attribute).

The sensor ticks every `fleet_summary_interval_seconds` (2 minutes), not at the maintenance sensor's
cadence: a refresh is a run of its own (a run process and a step process), and a batch run
materializes tables one by one, so at the maintenance cadence refreshes kept starting while a batch was
still running, taking the cores its Spark needs (bench/fleet_maintenance.py). The roll-up is at most an
interval behind.

The condition is true once `table_health` or `maintained_table` gained a materialization since the
sensor's previous tick (however many partitions did: the summary is unpartitioned, so one run refreshes
it), and stays true until a run is requested; it waits while a refresh is queued or running, which then
includes what it finds. Like the sensor it replaced, it refreshes after updates only: a summary never
materialized waits for the first health sync. Not `AutomationCondition.eager()`: that also waits while
any partition of a dependency is missing or in progress, and a table never maintained has no
`maintained_table` materialization, so on a real fleet it would never refresh (bench/fleet_refresh.py
measures both against the run-status sensor this replaced).
"""

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.run_tags import deployment_tags, observation_tags

# the default deployment's name; others' carry their prefix
FLEET_AUTOMATION_SENSOR = "fleet_automation_sensor"


def fleet_refresh_condition() -> dg.AutomationCondition:
    """Refresh once after any update of the summary's dependencies, never while a refresh is in flight."""
    updated = dg.AutomationCondition.any_deps_updated().since_last_handled()
    return (updated & ~dg.AutomationCondition.in_progress()).with_label(
        "after health or maintenance updated"
    )


def build_fleet_automation_sensor(platform: PlatformSettings) -> dg.AutomationConditionSensorDefinition:
    """The sensor that evaluates the fleet summary's condition, and only it: a host project's own
    automation sensors never evaluate icepack's assets, and icepack's runs carry its tags."""
    names = DeploymentNames.of(platform)
    return dg.AutomationConditionSensorDefinition(
        names.name(FLEET_AUTOMATION_SENSOR),
        target=dg.AssetSelection.assets(names.fleet_summary),
        run_tags=deployment_tags(platform) | observation_tags(),
        default_status=dg.DefaultSensorStatus(platform.default_status),
        minimum_interval_seconds=platform.fleet_summary_interval_seconds,
        emit_backfills=False,
        description="Refresh fleet_summary once after health syncs or maintenance materialized table_health "
        "or maintained_table (one run however many tables changed).",
    )
