"""The `maintenance` job: recommend and run maintenance for one table, one partition per run.

Every run carries its table's run tags, whoever launched it (sensor, launchpad, backfill), so the run
coordinator's one-per-table limit holds for all of them, not only the sensor's.
"""

import dagster as dg

from icepack_dagster.defs.maintenance.maintained_table import maintained_table
from icepack_dagster.defs.maintenance.maintenance_recommendation import maintenance_recommendation
from icepack_dagster.defs.partitions import ICEBERG_TABLES
from icepack_dagster.defs.run_tags import KIND_TAG, MAINTENANCE, maintenance_tags

maintenance_job = dg.define_asset_job(
    "maintenance",
    selection=[maintenance_recommendation, maintained_table],
    tags={KIND_TAG: MAINTENANCE},
    config=dg.PartitionedConfig(
        partitions_def=ICEBERG_TABLES,
        run_config_for_partition_key_fn=lambda _partition: {},
        tags_for_partition_key_fn=maintenance_tags,
    ),
    description="Recommend and run maintenance for one table (one partition per run).",
)
