"""The `maintenance` job: recommend and run maintenance for one table, one partition per run.

Every run of it carries icepack's run tags for its table (`maintenance_tags`), whoever launched it. The
run queue's limits do not depend on them: Dagster's `dagster/partition` tag and the `icepack_maintenance`
pool of `maintained_table` hold `__ASSET_JOB` runs (Materialize, backfills) the same way.
"""

import dagster as dg

from icepack_dagster.defs.maintenance.maintained_table import maintained_table
from icepack_dagster.defs.maintenance.maintenance_recommendation import maintenance_recommendation
from icepack_dagster.defs.partitions import TABLE_PARTITIONS
from icepack_dagster.defs.run_tags import KIND_TAG, MAINTENANCE, maintenance_tags

maintenance_job = dg.define_asset_job(
    "maintenance",
    selection=[maintenance_recommendation, maintained_table],
    tags={KIND_TAG: MAINTENANCE},
    config=dg.PartitionedConfig(
        partitions_def=TABLE_PARTITIONS,
        run_config_for_partition_key_fn=lambda _partition: {},
        tags_for_partition_key_fn=maintenance_tags,
    ),
    description="Recommend and run maintenance for one table (one partition per run). Run config of "
    "maintained_table: dry_run, force, actions.",
)
