"""The `fleet_refresh` job: refresh the fleet summary and its Prometheus metrics."""

import functools
from typing import Any

import dagster as dg

from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.fleet.fleet_summary import build_fleet_summary
from icepack_dagster.defs.run_tags import observation_tags


@functools.cache
def build_fleet_summary_job(deployment_name: str) -> Any:
    """The deployment's fleet refresh job (one per deployment name; Dagster exports no name for the
    type `define_asset_job` returns)."""
    return dg.define_asset_job(
        DeploymentNames(deployment_name).name("fleet_refresh"),
        selection=[build_fleet_summary(deployment_name)],
        tags=observation_tags(),
        # One asset, refreshed by hand (its automation condition runs Dagster's implicit asset job): a
        # step subprocess (the default executor) would add a Python start and a definitions import.
        executor_def=dg.in_process_executor,
        description="Refresh the fleet summary and its Prometheus metrics.",
    )
