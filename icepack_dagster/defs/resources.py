"""Resources: the engine (catalogs, status, policy, history, maintenance) and Spark, both from the one
settings object `build_definitions` received.

The settings travel as a resource dependency, not as run config, so secrets never land in run
storage or the launchpad. Spark starts only when maintenance asks for a session; status, health and
sensors never start a JVM.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field, PrivateAttr

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.config.spark import SparkSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.run_tags import PARTITION_TAG, TABLE_TAG
from icepack_dagster.domain.sizing.run_sizing import read_spark_conf_tag, spark_settings_update
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import MissingComponentError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _no_spark() -> "SparkSession":
    raise MissingComponentError(
        "this run has no Spark resource: only the maintained_table asset runs maintenance on Spark"
    )


class SparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy Spark session resource, configured from icepack's settings and sized by the
    run: Iceberg's SQL extensions, every configured catalog, the pinned jars (`spark/session.py`), or a
    session on a Spark Connect server for an `sc://` master.

    `setup_for_execution` sizes the settings by the run's `icepack/spark-conf` tag (a bad tag fails the
    run before its step starts, naming the table); the JVM starts only when maintenance first asks for
    `spark_session`, so a run that has nothing to do needs neither Java nor the jars. Everything with a
    secret (catalog credentials, the state database URL) stays in `settings`, which is no part of the
    resource's config: the UI and the code-location snapshot show `spark_config` only."""

    settings: dg.ResourceDependency[IcepackSettings]
    spark_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Spark settings added over icepack's own (its settings' spark.conf; the run's sizing "
        "tag still wins). Shown in the UI: never put a secret here, secrets belong in icepack's settings",
    )
    _run_settings: IcepackSettings | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        run = context.run
        tags = run.tags if run is not None else {}
        table = tags.get(TABLE_TAG) or tags.get(PARTITION_TAG) or ""
        self._run_settings = sized_settings(self._settings_with_config(), tags, table)

    def _settings_with_config(self) -> IcepackSettings:
        if not self.spark_config:
            return self.settings
        extra = {key: str(value) for key, value in self.spark_config.items()}
        spark = self.settings.spark.model_copy(update={"conf": self.settings.spark.conf | extra})
        return self.settings.model_copy(update={"spark": spark})

    @property
    def run_settings(self) -> IcepackSettings:
        """The settings this run's session is built from (sized by the run's tag, if any)."""
        return self._run_settings or self._settings_with_config()

    def _init_session(self) -> None:
        """dagster-pyspark's hook for the lazy session: icepack's session instead of one from
        `spark_config` alone."""
        if self._spark_session is None:
            from icepack_dagster.spark.session import build_spark_session

            self._spark_session = build_spark_session(self.run_settings)


def sized_settings(settings: IcepackSettings, run_tags: Mapping[str, str], table: str) -> IcepackSettings:
    """Settings whose Spark master, driver memory and conf follow the run's sizing tag, if any."""
    conf = read_spark_conf_tag(run_tags, table)
    if conf is None:
        return settings
    update = spark_settings_update(conf)
    sized_conf = settings.spark.conf | dict(update.pop("conf"))  # type: ignore[call-overload]
    spark = SparkSettings(**(settings.spark.model_dump() | update | {"conf": sized_conf}))
    return settings.model_copy(update={"spark": spark})


class IcepackResource(dg.ConfigurableResource):
    """One `Engine` per run or sensor tick, built on first use. Only maintenance needs Spark: it asks
    for `maintenance_engine(spark)`, so no other run or tick can start a JVM."""

    settings: dg.ResourceDependency[IcepackSettings]
    table_workers: int = Field(default=8, ge=1, le=64, description="Tables measured at once in a batch run")
    health_rewrite_hours: float = Field(
        default=24.0, gt=0, description="Unchanged healthy tables get a new materialization this often"
    )
    attention_rewrite_hours: float = Field(
        default=1.0, gt=0, description="Unchanged tables needing attention get one this often"
    )
    fleet_metrics_path: str | None = Field(
        default=None,
        description="Prometheus textfile written by fleet_summary; None: <home>/metrics/icepack.prom",
    )
    _engine: Engine | None = PrivateAttr(default=None)

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine(self.settings, spark_provider=_no_spark)
        return self._engine

    def maintenance_engine(self, spark: SparkResource) -> Engine:
        """An engine whose Spark is the run's `spark` resource, started on first use."""
        return Engine(self.settings, spark_provider=lambda: spark.spark_session)

    @property
    def metrics_path(self) -> Path:
        if self.fleet_metrics_path:
            return Path(self.fleet_metrics_path)
        return self.settings.home / "metrics" / "icepack.prom"


def icepack_of(context: Any, names: DeploymentNames) -> IcepackResource:
    """The deployment's `IcepackResource` from an op, asset or sensor context that requires it."""
    resource = getattr(context.resources, names.icepack_resource)
    assert isinstance(resource, IcepackResource), names.icepack_resource
    return resource


def spark_of(context: Any, names: DeploymentNames) -> SparkResource:
    """The deployment's `SparkResource` from an op or asset context that requires it."""
    resource = getattr(context.resources, names.spark_resource)
    assert isinstance(resource, SparkResource), names.spark_resource
    return resource


def build_resources(settings: IcepackSettings) -> dict[str, dg.ConfigurableResource]:
    """The `icepack` and `spark` resources from one settings object (its `platform` section sizes runs),
    under the deployment's resource keys (`icepack` and `spark` for the default deployment)."""
    platform = settings.platform
    spark = SparkResource(settings=settings)
    icepack = IcepackResource(
        settings=settings,
        table_workers=platform.health_sync_workers,
        health_rewrite_hours=platform.health_rewrite_hours,
        attention_rewrite_hours=platform.attention_rewrite_hours,
        fleet_metrics_path=str(platform.fleet_metrics_path) if platform.fleet_metrics_path else None,
    )
    names = DeploymentNames.of(platform)
    return {names.icepack_resource: icepack, names.spark_resource: spark}
