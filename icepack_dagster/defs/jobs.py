"""Jobs: what one run does. Health sync covers a batch of tables (a partition range); maintenance one
table; fleet refresh the summary; release_quarantine lets automatic maintenance resume for a table.

Every run of the maintenance job carries its table's run tags, whoever launched it (sensor, launchpad,
backfill), so the run coordinator's one-per-table limit holds for all of them, not only the sensor's.
"""

import dagster as dg
from pydantic import Field

from icepack_dagster.defs.assets.fleet_summary import fleet_summary
from icepack_dagster.defs.assets.maintained_table import maintained_table
from icepack_dagster.defs.assets.maintenance_recommendation import maintenance_recommendation
from icepack_dagster.defs.assets.table_health import table_health
from icepack_dagster.defs.assets.table_status import table_status
from icepack_dagster.defs.maintenance_exclusivity import MAINTENANCE_JOB_NAME
from icepack_dagster.defs.partitions import ICEBERG_TABLES
from icepack_dagster.defs.resources import IcepackResource
from icepack_dagster.defs.tags import KIND_TAG, MAINTENANCE, maintenance_tags, observation_tags

health_sync_job = dg.define_asset_job(
    "health_sync",
    selection=[table_status, table_health],
    tags=observation_tags(),
    description="Status and health for a batch of tables (a range of `iceberg_tables` partitions).",
)

maintenance_job = dg.define_asset_job(
    MAINTENANCE_JOB_NAME,
    selection=[maintenance_recommendation, maintained_table],
    tags={KIND_TAG: MAINTENANCE},
    config=dg.PartitionedConfig(
        partitions_def=ICEBERG_TABLES,
        run_config_for_partition_key_fn=lambda _partition: {},
        tags_for_partition_key_fn=maintenance_tags,
    ),
    description="Recommend and run maintenance for one table (one partition per run).",
)

fleet_summary_job = dg.define_asset_job(
    "fleet_refresh",
    selection=[fleet_summary],
    tags=observation_tags(),
    description="Refresh the fleet summary and its Prometheus metrics.",
)


class ReleaseQuarantineConfig(dg.Config):
    table: str = Field(min_length=1, description="The table to release: ns.table or catalog.ns.table")


@dg.op
def release_quarantine(
    context: dg.OpExecutionContext, config: ReleaseQuarantineConfig, icepack: IcepackResource
) -> None:
    """Resets a quarantined table's failure count, so the maintenance sensor considers it again."""
    engine = icepack.engine
    key = engine.resolve(config.table)
    before = engine.history(key)
    engine.release_quarantine(key)
    context.log.info(
        f"{key.text}: released (was {'quarantined' if before.quarantined else 'not quarantined'}, "
        f"{before.consecutive_failures} consecutive failures, last error: {before.last_error})"
    )


@dg.job(tags={KIND_TAG: "operator"}, description="Release one table from quarantine (config: table).")
def release_quarantine_job() -> None:
    release_quarantine()
