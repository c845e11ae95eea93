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


def with_ownership(spec: dg.AssetSpec) -> dg.AssetSpec:
    """`spec` with icepack's owners and code version (applied to every asset by `build_definitions`)."""
    return spec.replace_attributes(owners=list(OWNERS), code_version=CODE_VERSION)
