"""`table_status` and `table_health`: what each table is, measured from its Iceberg metadata (no
Spark), and how healthy that is. One step produces both, so a health is always judged from the status
measured with it.

This multi-asset is what a click on either asset in the UI runs (every selected table is written).
Scheduled syncs, first syncs of new tables and post-maintenance refreshes run the `health_sync` job,
which does the same work through `table_sync.sync_tables` without planning a materialization per
partition (see bench/HISTORY.md).
"""

import functools

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.health_sync.table_sync import sync_tables
from icepack_dagster.defs.materialization_codec import (
    HEALTH_CHECK,
    HEALTH_CHECK_DESCRIPTION,
    NEEDS_OPERATOR_CHECK,
    NEEDS_OPERATOR_CHECK_DESCRIPTION,
)
from icepack_dagster.defs.partitions import tables_partitions
from icepack_dagster.defs.resources import icepack_of
from icepack_dagster.defs.run_tags import OBSERVATION, claim_run


@functools.cache
def build_table_status_and_health(deployment_name: str) -> dg.AssetsDefinition:
    """The multi-asset over the deployment's partitions definition (one definition per deployment name)."""
    tables = tables_partitions(PlatformSettings(deployment_name=deployment_name))
    names = DeploymentNames(deployment_name)
    status_spec = dg.AssetSpec(
        names.table_status,
        partitions_def=tables,
        group_name="iceberg_tables",
        kinds={"iceberg"},
        skippable=True,
        description="File, manifest and snapshot facts of one Iceberg table, read from its metadata alone. "
        "A table whose metadata cannot be read is recorded with `status_error` (its health is `unknown`).",
    )
    health_spec = dg.AssetSpec(
        names.table_health,
        partitions_def=tables,
        deps=[names.table_status],
        group_name="iceberg_tables",
        kinds={"iceberg"},
        skippable=True,
        description="Healthy, warning, critical or unknown, with each issue explained; the maintenance "
        "sensor reads it. Unknown (never healthy) when the status could not be measured. Its `healthy` "
        "check fails for every unhealthy table (WARN for warning, ERROR for critical or unknown); its "
        "`needs_operator` check fails for the tables a person must act on, saying why.",
    )
    check_specs = [
        dg.AssetCheckSpec(
            HEALTH_CHECK,
            asset=names.table_health,
            partitions_def=tables,
            description=HEALTH_CHECK_DESCRIPTION,
        ),
        dg.AssetCheckSpec(
            NEEDS_OPERATOR_CHECK,
            asset=names.table_health,
            partitions_def=tables,
            description=NEEDS_OPERATOR_CHECK_DESCRIPTION,
        ),
    ]

    @dg.multi_asset(
        name=names.op("table_status_and_health"),
        specs=[status_spec, health_spec],
        check_specs=check_specs,
        # A range of tables cannot return one check result per table, so the check results are logged
        # events; Dagster treats a check output as optional only when the step can be subset.
        can_subset=True,
        partitions_def=tables,
        backfill_policy=dg.BackfillPolicy.single_run(),
        required_resource_keys={names.icepack_resource},
    )
    def table_status_and_health(context: dg.AssetExecutionContext):  # type: ignore[no-untyped-def]
        """Measure and judge the selected tables; write a `table_status` and a `table_health`
        materialization and a `healthy` and a `needs_operator` check result for each."""
        icepack = icepack_of(context, names)
        claim_run(context, icepack.settings.platform, OBSERVATION)
        sync_tables(context, icepack, context.partition_keys, only_changes=False)
        yield from ()

    return table_status_and_health
