"""The `health_sync` job: one run measures and judges a batch of tables listed in its run config, and
the run requests that start it (the schedule, discovery's first syncs, the post-maintenance refresh).

One run per batch of up to `health_sync_batch_size` tables, never one run per table: each run lists its
tables in its run config (consecutive `iceberg_tables` partitions), reads only tables whose metadata
changed, and writes materializations only for tables whose status or health changed (or is due a
periodic rewrite): see `domain/health/sync_writes.py`.
"""

import functools
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
from pydantic import Field

from icepack_dagster.defs.asset_keys import DEFAULT_NAMES, DeploymentNames
from icepack_dagster.defs.health_sync.table_sync import sync_tables
from icepack_dagster.defs.resources import IcepackResource, icepack_of
from icepack_dagster.defs.run_tags import OBSERVATION, batch_tags, claim_run, observation_tags
from icepack_dagster.domain.health.sync_writes import SyncWrites


def health_sync_materializes(names: DeploymentNames) -> dict[str, dg.MetadataValue]:
    """A schedule or sensor on this op job is not linked to assets by Dagster (only asset jobs are), so
    each names the assets its runs materialize in its metadata, which the UI shows as links on its page."""
    return {
        "materializes table_status": dg.MetadataValue.asset(names.table_status),
        "materializes table_health": dg.MetadataValue.asset(names.table_health),
    }


class HealthSyncConfig(dg.Config):
    """Which tables one health-sync run measures, and what it writes."""

    tables: list[str] = Field(min_length=1, description="Tables to measure: iceberg_tables partition keys")
    writes: SyncWrites = Field(
        default="all",
        description="all: a table_status and table_health materialization per table; changes: only for "
        "tables whose status or health changed or are due a periodic rewrite (scheduled syncs)",
    )


HEALTH_SYNC_JOB = "health_sync"  # the default deployment's names; others' carry their prefix
SYNC_TABLES_OP = "sync_tables"


def sync_batch(context: dg.OpExecutionContext, config: HealthSyncConfig, icepack: IcepackResource) -> None:
    """Measure and judge a batch of tables and record their `table_status` and `table_health`."""
    platform = icepack.settings.platform
    claim_run(context, platform, OBSERVATION)
    current = set(context.instance.get_dynamic_partitions(platform.partitions_name))
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


@functools.cache
def build_health_sync_job(deployment_name: str) -> dg.JobDefinition:
    """The deployment's health-sync job (one definition per deployment name)."""
    names = DeploymentNames(deployment_name)

    @dg.op(
        name=names.name(SYNC_TABLES_OP),
        required_resource_keys={names.icepack_resource},
        description=inspect.getdoc(sync_batch),
    )
    def sync_tables_op(context: dg.OpExecutionContext, config: HealthSyncConfig) -> None:
        sync_batch(context, config, icepack_of(context, names))

    @dg.job(
        name=names.name(HEALTH_SYNC_JOB),
        tags=observation_tags(),
        # One op that reads metadata with its own thread pool: a step subprocess (the default executor)
        # would only add a Python start and a definitions import to every run.
        executor_def=dg.in_process_executor,
        description="Status and health for a batch of tables (run config: tables, writes). Records "
        "table_status and table_health materializations without planning one per partition.",
    )
    def health_sync_job() -> None:
        sync_tables_op()

    return health_sync_job


def health_sync_run_config(
    tables: list[str], writes: str, names: DeploymentNames = DEFAULT_NAMES
) -> dict[str, Any]:
    """The run config of a health-sync run of deployment `names` over `tables`."""
    return {"ops": {names.name(SYNC_TABLES_OP): {"config": {"tables": tables, "writes": writes}}}}


def run_config_tables(run_config: Mapping[str, Any], names: DeploymentNames) -> list[str]:
    """The tables a health-sync run's config lists (none when the config is not a health-sync run's)."""
    config = run_config.get("ops", {}).get(names.name(SYNC_TABLES_OP), {}).get("config", {})
    return list(config.get("tables", []))


def health_sync_requests(
    names: DeploymentNames,
    partitions: Sequence[str],
    batch_size: int,
    run_key_prefix: str,
    writes: SyncWrites = "changes",
    tags: Mapping[str, str] | None = None,
) -> list[dg.RunRequest]:
    """Run requests of the deployment's health-sync job covering `partitions` (contiguous in partition
    order) in batches, each with `tags` (the deployment's); `writes` says whether each run writes only
    tables that changed (the default) or every table."""
    requests = []
    for index, start in enumerate(range(0, len(partitions), batch_size)):
        batch = partitions[start : start + batch_size]
        requests.append(
            dg.RunRequest(
                run_key=f"{run_key_prefix}:{index}",
                job_name=names.name(HEALTH_SYNC_JOB),
                run_config=health_sync_run_config(list(batch), writes, names),
                tags={**(tags or {}), **batch_tags(batch)},
            )
        )
    return requests
