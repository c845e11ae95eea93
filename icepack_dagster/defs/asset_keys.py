"""The asset keys, in one place, so sensors and assets that read each other's events agree; and what
every asset says about itself in the UI: who owns it and which version of the code produced it."""

from __future__ import annotations

import dagster as dg

from icepack_dagster import __version__

TABLE_STATUS = dg.AssetKey("table_status")
TABLE_HEALTH = dg.AssetKey("table_health")
MAINTENANCE_RECOMMENDATION = dg.AssetKey("maintenance_recommendation")
MAINTAINED_TABLE = dg.AssetKey("maintained_table")
FLEET_SUMMARY = dg.AssetKey("fleet_summary")

# The team that runs icepack answers for every asset it materializes (Dagster's `team:` owner form).
OWNERS = ("team:icepack",)
# The package version: a new release is new code for every asset, which the UI shows against each
# materialization's own code version.
CODE_VERSION = __version__


# Dagster links a schedule or sensor to an asset only through an asset job. The health sync and the
# batch maintenance are op jobs (docs/DAGSTER.md says why: a partition-range asset run plans one event
# per table), so the assets they write name those instigators themselves, shown on the asset's page.
_SYNCED_BY = (
    "`health_sync_schedule` (every table, on its cron), `iceberg_table_discovery` (a first sync of new "
    "tables) and `post_maintenance_health_sensor` (after each maintenance), through `health_sync` runs; "
    "Materialize runs `table_status_and_health` for the selected tables"
)
_MAINTAINED_BY = (
    "`maintenance_sensor`, through `maintenance` runs (one table) and `maintenance_batch` runs (several "
    "small tables in one Spark session); Materialize runs it for the selected tables"
)
AUTOMATED_BY = {
    TABLE_STATUS: _SYNCED_BY,
    TABLE_HEALTH: _SYNCED_BY,
    MAINTENANCE_RECOMMENDATION: _MAINTAINED_BY,
    MAINTAINED_TABLE: _MAINTAINED_BY,
}
AUTOMATED_BY_LABEL = "materialized by"


def with_ownership(spec: dg.AssetSpec) -> dg.AssetSpec:
    """`spec` with icepack's owners, code version and, where Dagster cannot link them, the schedules and
    sensors that materialize it (applied to every asset by `build_definitions`)."""
    automation = AUTOMATED_BY.get(spec.key)
    metadata = {AUTOMATED_BY_LABEL: dg.MetadataValue.md(automation)} if automation else {}
    return spec.replace_attributes(
        owners=list(OWNERS), code_version=CODE_VERSION, metadata={**spec.metadata, **metadata}
    )
