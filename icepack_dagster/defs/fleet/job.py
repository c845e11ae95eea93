"""The `fleet_refresh` job: refresh the fleet summary and its Prometheus metrics."""

import dagster as dg

from icepack_dagster.defs.fleet.fleet_summary import fleet_summary
from icepack_dagster.defs.run_tags import observation_tags

fleet_summary_job = dg.define_asset_job(
    "fleet_refresh",
    selection=[fleet_summary],
    tags=observation_tags(),
    # One asset, refreshed after every successful health sync or maintenance run: a step subprocess
    # (the default executor) would add a Python start and a definitions import to each of them.
    executor_def=dg.in_process_executor,
    description="Refresh the fleet summary and its Prometheus metrics.",
)
