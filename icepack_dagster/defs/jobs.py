"""Jobs: what one run does. Health sync covers a batch of tables (listed in its run config);
maintenance one table; fleet refresh the summary; release_quarantine lets automatic maintenance resume
for a table.

Every run of the maintenance job carries its table's run tags, whoever launched it (sensor, launchpad,
backfill), so the run coordinator's one-per-table limit holds for all of them, not only the sensor's.
"""

from typing import Any, Literal

import dagster as dg
from pydantic import Field

from icepack_dagster.defs.assets.fleet_summary import fleet_summary
from icepack_dagster.defs.assets.maintained_table import maintained_table
from icepack_dagster.defs.assets.maintenance_recommendation import maintenance_recommendation
from icepack_dagster.defs.maintenance_exclusivity import MAINTENANCE_JOB_NAME
from icepack_dagster.defs.partitions import ICEBERG_TABLES, PARTITIONS_NAME
from icepack_dagster.defs.resources import IcepackResource
from icepack_dagster.defs.table_sync import sync_tables
from icepack_dagster.defs.tags import KIND_TAG, MAINTENANCE, maintenance_tags, observation_tags


class HealthSyncConfig(dg.Config):
    """Which tables one health-sync run measures, and what it writes."""

    tables: list[str] = Field(min_length=1, description="Tables to measure: iceberg_tables partition keys")
    writes: Literal["changes", "all"] = Field(
        default="all",
        description="all: a table_status and table_health materialization per table; changes: only for "
        "tables whose status or health changed or are due a periodic rewrite (scheduled syncs)",
    )


@dg.op(name="sync_tables")
def sync_tables_op(
    context: dg.OpExecutionContext, config: HealthSyncConfig, icepack: IcepackResource
) -> None:
    """Measure and judge a batch of tables and record their `table_status` and `table_health`."""
    current = set(context.instance.get_dynamic_partitions(PARTITIONS_NAME))
    unknown = [table for table in config.tables if table not in current]
    if unknown:
        context.log.warning(
            f"{len(unknown)} table(s) are not iceberg_tables partitions (dropped since the run was "
            f"requested, or misspelt), skipped: {', '.join(unknown[:20])}"
        )
    tables = [table for table in config.tables if table in current]
    if not tables:
        raise dg.Failure(
            "none of the tables of this run is an iceberg_tables partition: check the names in the run "
            "config (catalog.namespace.table), or let the discovery sensor add them first"
        )
    sync_tables(context, icepack, tables, only_changes=config.writes == "changes")


@dg.job(
    name="health_sync",
    tags=observation_tags(),
    description="Status and health for a batch of tables (run config: tables, writes). Records "
    "table_status and table_health materializations without planning one per partition.",
)
def health_sync_job() -> None:
    sync_tables_op()


def health_sync_run_config(tables: list[str], writes: str) -> dict[str, Any]:
    """The run config of a health-sync run over `tables`."""
    return {"ops": {sync_tables_op.name: {"config": {"tables": tables, "writes": writes}}}}

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
