"""The `maintenance` job: recommend and run maintenance for one table, one partition per run.

Every run of it carries icepack's run tags for its table (`maintenance_tags`) and its deployment. The
cap does not depend on them: the deployment's maintenance pool of `maintained_table` holds
`__ASSET_JOB` runs (Materialize, backfills) the same way.
"""

import functools
from typing import Any

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.maintenance.maintained_table import build_maintained_table
from icepack_dagster.defs.maintenance.maintenance_recommendation import build_maintenance_recommendation
from icepack_dagster.defs.partitions import tables_partitions
from icepack_dagster.defs.run_tags import KIND_TAG, MAINTENANCE, deployment_tags, maintenance_tags

MAINTENANCE_JOB = "maintenance"


@functools.cache
def build_maintenance_job(deployment_name: str) -> Any:
    """The job over the deployment's assets and partitions (one definition per deployment name).
    (Dagster exports no name for the type `define_asset_job` returns.)"""
    platform = PlatformSettings(deployment_name=deployment_name)
    return dg.define_asset_job(
        DeploymentNames(deployment_name).name(MAINTENANCE_JOB),
        selection=[
            build_maintenance_recommendation(deployment_name),
            build_maintained_table(deployment_name),
        ],
        tags={KIND_TAG: MAINTENANCE} | deployment_tags(platform),
        config=dg.PartitionedConfig(
            partitions_def=tables_partitions(platform),
            run_config_for_partition_key_fn=lambda _partition: {},
            tags_for_partition_key_fn=maintenance_tags,
        ),
        description="Recommend and run maintenance for one table (one partition per run). Run config of "
        "maintained_table: dry_run, force, actions.",
    )
