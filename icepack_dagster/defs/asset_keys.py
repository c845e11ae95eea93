"""The names of everything icepack defines in Dagster, per deployment, in one place: asset keys, jobs,
sensors, schedules, resources and the assets' op names, so sensors and assets that read each other's events
agree; and what every asset says about itself in the UI: who owns it and which version of the code
produced it.

Asset keys are global to a Dagster workspace, and job, sensor, schedule and resource names to a code
location, so two deployments (two code locations, or two components in one project) must not share
them. The default deployment (`icepack`) keeps its bare names (`table_status`, `health_sync`, the
resources `icepack` and `spark`), so an instance that ran icepack before keeps its history; any other
deployment's asset keys take its name as a key prefix (`lake_b/table_status`) and its jobs, sensors,
schedules and resources its name as a prefix (`lake_b_health_sync`, `lake_b_spark`). Assets, ops and
sensors take their resources under those keys (`required_resource_keys`, read with
`defs/resources.py`'s `icepack_of` and `spark_of`): a parameter's name cannot be computed. A sensor
called directly (`sensor(context)`, as tests do) also gets its required resources as keywords, which
the daemon does not pass, so sensors take `**_direct` and read the context's resources either way. The
partitions definition and maintenance pool are named in `PlatformSettings` (`partitions_name`,
`maintenance_pool`), where the configuration layer needs them.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from icepack_dagster import __version__
from icepack_dagster.config.platform import DEFAULT_DEPLOYMENT, PlatformSettings

# The team that runs icepack answers for every asset it materializes (Dagster's `team:` owner form).
OWNERS = ("team:icepack",)
# The package version: a new release is new code for every asset, which the UI shows against each
# materialization's own code version.
CODE_VERSION = __version__
AUTOMATED_BY_LABEL = "materialized by"


@dataclass(frozen=True)
class DeploymentNames:
    """The names of one deployment's asset keys, jobs, sensors and schedules."""

    deployment: str = DEFAULT_DEPLOYMENT

    @classmethod
    def of(cls, platform: PlatformSettings) -> DeploymentNames:
        return cls(platform.deployment_name)

    @property
    def is_default(self) -> bool:
        return self.deployment == DEFAULT_DEPLOYMENT

    def key(self, name: str) -> dg.AssetKey:
        """The asset key `name` of this deployment: bare for the default, under its prefix otherwise."""
        return dg.AssetKey(name) if self.is_default else dg.AssetKey([self.deployment, name])

    def name(self, name: str) -> str:
        """The job, sensor or schedule `name` of this deployment (a Dagster name: no `/`)."""
        return name if self.is_default else f"{self.deployment}_{name}"

    def op(self, name: str) -> str:
        """The op (and step key) of this deployment's asset node `name`: Dagster's form of the asset key
        `key(name)`, as it names the op of an asset defined by its key (`lake_b__maintained_table`)."""
        return self.key(name).to_python_identifier()

    @property
    def table_status(self) -> dg.AssetKey:
        return self.key("table_status")

    @property
    def table_health(self) -> dg.AssetKey:
        return self.key("table_health")

    @property
    def maintenance_recommendation(self) -> dg.AssetKey:
        return self.key("maintenance_recommendation")

    @property
    def maintained_table(self) -> dg.AssetKey:
        return self.key("maintained_table")

    @property
    def fleet_summary(self) -> dg.AssetKey:
        return self.key("fleet_summary")

    @property
    def icepack_resource(self) -> str:
        """The key of the deployment's `IcepackResource` (the engine, from its settings)."""
        return self.name("icepack")

    @property
    def spark_resource(self) -> str:
        """The key of the deployment's `SparkResource` (a host project very likely has its own `spark`)."""
        return self.name("spark")

    @property
    def maintained_step(self) -> str:
        """The step key of `maintained_table` in a run (its op's name, Dagster's form of its key)."""
        return self.op("maintained_table")

    def automated_by(self) -> dict[dg.AssetKey, str]:
        """Dagster links a schedule or sensor to an asset only through an asset job. The health sync and
        the batch maintenance are op jobs (docs/DAGSTER.md says why: a partition-range asset run plans
        one event per table), so the assets they write name those instigators themselves, shown on the
        asset's page."""
        n = self.name
        synced_by = (
            f"`{n('health_sync_schedule')}` (every table, on its cron), `{n('iceberg_table_discovery')}` "
            f"(a first sync of new tables) and `{n('post_maintenance_health_sensor')}` (after each "
            f"maintenance), through `{n('health_sync')}` runs; Materialize runs "
            f"`{self.op('table_status_and_health')}` for the selected tables"
        )
        maintained_by = (
            f"`{n('maintenance_sensor')}`, through `{n('maintenance')}` runs (one table) and "
            f"`{n('maintenance_batch')}` runs (several small tables in one Spark session); Materialize "
            "runs it for the selected tables"
        )
        return {
            self.table_status: synced_by,
            self.table_health: synced_by,
            self.maintenance_recommendation: maintained_by,
            self.maintained_table: maintained_by,
        }


DEFAULT_NAMES = DeploymentNames()


def with_ownership(names: DeploymentNames, spec: dg.AssetSpec) -> dg.AssetSpec:
    """`spec` with icepack's owners, code version and, where Dagster cannot link them, the schedules and
    sensors that materialize it (applied to every asset by `build_definitions`)."""
    automation = names.automated_by().get(spec.key)
    metadata = {AUTOMATED_BY_LABEL: dg.MetadataValue.md(automation)} if automation else {}
    return spec.replace_attributes(
        owners=list(OWNERS), code_version=CODE_VERSION, metadata={**spec.metadata, **metadata}
    )
