"""The `platform` section of the settings: Dagster-specific knobs (schedule cron, batch sizes, sensor
intervals, maintenance caps, the fleet metrics file, the alert webhook). Only the Dagster layer uses
them, but for the daily rewrite budget, which the engine applies to every maintenance of the deployment
(the CLI's too: they share its history). `settings.py` reads them with the rest:
`ICEPACK_PLATFORM_<FIELD>` in the environment, `platform:` in the YAML file (docs/CONFIGURATION.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.sizing.tiers import SizingPolicy, SizingTier

DEFAULT_DEPLOYMENT = "icepack"
DEFAULT_PARTITIONS_NAME = "iceberg_tables"
DEPLOYMENT_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"
# Tables per health-sync run when the setting is unset (`PlatformSettings.health_sync_batch`).
HEALTH_SYNC_BATCH = 1000
HEALTH_SYNC_RUNS = 20
MAX_HEALTH_SYNC_BATCH = 5000


class PlatformSettings(FrozenModel):
    """How often the platform looks, how much it does per run and per tick, and how much at once."""

    deployment_name: str = Field(
        default=DEFAULT_DEPLOYMENT,
        pattern=DEPLOYMENT_NAME_PATTERN,
        description="Which icepack deployment of a shared Dagster instance this is: every run it starts "
        "carries it (tag icepack/deployment), and it names the deployment's partitions definition, "
        "maintenance pool, table facts (in a state database deployments may share), asset keys, jobs, "
        "sensors, schedules and resource keys (the default deployment keeps bare names); give each code "
        "location or component of icepack on one instance its own",
    )

    health_sync_cron: str = Field(default="*/15 * * * *", description="When status and health refresh (UTC)")
    health_sync_batch_size: int | None = Field(
        default=None,
        ge=1,
        le=MAX_HEALTH_SYNC_BATCH,
        description=f"Tables per health-sync run; unset: {HEALTH_SYNC_BATCH:,}, or as many as keep a sync to "
        f"{HEALTH_SYNC_RUNS} runs in a larger fleet, at most {MAX_HEALTH_SYNC_BATCH:,} (health_sync_batch)",
    )
    health_sync_workers: int = Field(default=8, ge=1, le=64, description="Tables measured at once in a run")
    health_sync_writes: Literal["changes", "all"] = Field(
        default="changes",
        description="What a scheduled sync writes: materializations only for tables whose status or health "
        "changed (or are due a rewrite), or for every table",
    )
    health_rewrite_hours: float = Field(
        default=24.0, ge=0.25, description="A healthy unchanged table gets a new materialization within this"
    )
    attention_rewrite_hours: float = Field(
        default=1.0, ge=0.25,
        description="An unchanged table in warning, critical or unknown gets one this often, so the "
        "maintenance sensor reconsiders it",
    )
    discovery_interval_seconds: int = Field(default=30, ge=5, description="Discovery sensor cadence")
    partition_removals_per_tick: int = Field(
        default=2000, ge=1, description="Partitions of dropped tables the discovery sensor removes per tick"
    )
    maintenance_interval_seconds: int = Field(default=30, ge=5, description="Maintenance sensor cadence")
    fleet_summary_interval_seconds: int = Field(
        default=120, ge=5,
        description="How often the fleet summary's automation condition is evaluated, so at most one "
        "refresh run starts per interval however busy maintenance is",
    )
    max_maintenance_in_flight: int = Field(
        default=2, ge=1, le=1000, description="Maintenance runs queued or running at once, all tables"
    )
    maintenance_runs_per_tick: int = Field(
        default=2, ge=1, le=1000, description="New maintenance runs per tick"
    )
    maintenance_batch_size: int = Field(
        default=1, ge=1, le=200,
        description="Tables of the smallest sizing tier maintained in one run and one Spark application "
        "(maintenance_batch job); 1: a run per table. Larger tables always get their own run",
    )
    maintenance_batch_workers: int = Field(
        default=2, ge=1, le=8,
        description="Tables of one maintenance_batch run maintained at the same time, each thread in its own "
        "Spark session: one table's Spark work overlaps another's status reads and Dagster events",
    )
    maintenance_candidates_per_tick: int = Field(
        default=50, ge=1, le=10000, description="Tables whose recommendation is computed per tick, best first"
    )
    health_events_per_tick: int = Field(
        default=2000, ge=1, description="Health materializations read per tick"
    )
    orphan_sweep: bool = Field(
        default=False,
        description="Also launch maintenance for healthy tables whose weekly orphan-file removal is due "
        "(orphans cannot be seen in metadata, so health never asks for it); costs one Spark run per "
        "healthy table per week. On in the demo and the Helm overlays",
    )
    orphan_sweep_tables_per_tick: int = Field(
        default=20, ge=1, le=1000, description="Healthy tables checked for a due orphan sweep per tick"
    )
    max_pending_tables: int = Field(
        default=2000,
        ge=10,
        description="Tables needing maintenance the sensor's cursor remembers, most urgent first; the "
        "others come back with their next health event (attention_rewrite_hours)",
    )
    sensors_running_by_default: bool = Field(
        default=True, description="Sensors and schedule start RUNNING without a click (dagster dev demo)"
    )
    run_sizing: bool = Field(
        default=False,
        description="Size each maintenance run's pod and Spark from the table's size (run tags "
        "dagster-k8s/config and icepack/spark-conf; docs/KUBERNETES.md). On in the Helm overlays.",
    )
    spark_image: str | None = Field(
        default=None, description="Image for Spark executors of large-tier runs on k8s:// masters"
    )
    spark_executor_secret_refs: dict[str, str] = Field(
        default_factory=dict,
        description="Environment of k8s:// Spark executors taken from Secrets by reference: variable -> "
        "'<secret name>:<key>' (spark.kubernetes.executor.secretKeyRef.*), e.g. the catalog credentials",
    )
    sizing_tiers: tuple[SizingTier, ...] | None = Field(
        default=None,
        description="The size classes run sizing chooses from, smallest first (docs/KUBERNETES.md); "
        "default: the built-in small, medium and large tiers",
    )
    fleet_metrics_path: Path | None = Field(
        default=None,
        description="Prometheus textfile-collector output; default <icepack home>/metrics/icepack.prom",
    )
    alert_webhook_url: SecretStr | None = Field(
        default=None,
        description="Slack-compatible incoming webhook the alert sensor posts to (quarantine, repeated "
        "maintenance failure, failed health sync); a secret (it carries a token); unset: no alerts",
    )
    alert_failing_after: int = Field(
        default=2, ge=1, description="Consecutive maintenance failures of a table that post a warning"
    )
    alert_interval_seconds: int = Field(
        default=300,
        ge=30,
        description="How often the alert sensor looks: each look reads every table's maintenance history "
        "(one fleet-wide read) and latest status, so it runs less often than the maintenance sensor",
    )
    daily_rewrite_budget_bytes: int | None = Field(
        default=None,
        gt=0,
        description="Bytes all of this deployment's rewrites (data and delete files) may read per UTC day; "
        "once reached, further rewrites are held (not failed) until 00:00 UTC. Unset: no budget",
    )

    housekeeping_cron: str = Field(
        default="17 3 * * *",
        description="When the housekeeping job deletes old runs and prunes maintenance history (UTC)",
    )
    delete_old_runs: bool = Field(
        default=False,
        description="Let the housekeeping job delete this deployment's own finished runs past "
        "run_retention_days (off: it only prunes icepack's maintenance history)",
    )
    run_retention_days: int = Field(
        default=30,
        ge=1,
        description="With delete_old_runs, this deployment's finished Dagster runs (and their event logs) "
        "last updated longer ago than this are deleted by the housekeeping job; runs not finished, and "
        "runs icepack did not start, are never deleted. Any value is safe: icepack's "
        "decisions read its own state database, not Dagster's runs",
    )

    @field_validator("health_sync_cron", "housekeeping_cron")
    @classmethod
    def _five_fields(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError(f"{value!r} is not a 5-field cron expression (e.g. '*/15 * * * *')")
        return value

    @model_validator(mode="after")
    def _valid_sizing(self) -> PlatformSettings:
        self.sizing_policy()  # tiers out of order or with duplicate names fail at start-up
        return self

    def sizing_policy(self) -> SizingPolicy:
        """The tiers and executor image run sizing uses (when `run_sizing` is on)."""
        fields: dict[str, Any] = {
            "spark_image": self.spark_image,
            "executor_secret_refs": self.spark_executor_secret_refs,
        }
        if self.sizing_tiers is not None:
            fields["tiers"] = self.sizing_tiers
        return SizingPolicy(**fields)

    def health_sync_batch(self, tables: int) -> int:
        """Tables per health-sync run when a sync covers `tables`: the setting when set; else 1,000, or
        as many as keep the sync to 20 runs, at most 5,000 (from 20,000 tables on: 100,000 take 20 runs).

        Why it grows with the fleet: each run is a process (a pod in production) that spends seconds
        importing Dagster and the definitions whatever its batch, and a steady sync reads only the
        tables that changed, so at 100,000 tables its 100 runs of 1,000 spent more time starting than
        working (docs/PERFORMANCE.md, section 5). 20 runs still keep several observation slots busy
        through a sync that reads every table; below 20,000 tables nothing changes."""
        if self.health_sync_batch_size is not None:
            return self.health_sync_batch_size
        return min(MAX_HEALTH_SYNC_BATCH, max(HEALTH_SYNC_BATCH, -(-tables // HEALTH_SYNC_RUNS)))

    @property
    def partitions_name(self) -> str:
        """The deployment's dynamic partitions definition (one partition per table). The default
        deployment keeps `iceberg_tables`, so an instance that ran icepack before keeps its partitions."""
        default = self.deployment_name == DEFAULT_DEPLOYMENT
        return DEFAULT_PARTITIONS_NAME if default else f"iceberg_tables_{self.deployment_name}"

    @property
    def maintenance_pool(self) -> str:
        """The deployment's concurrency pool, whose limit caps its maintenance runs at once."""
        return f"{self.deployment_name}_maintenance"

    @property
    def default_status(self) -> str:
        """`RUNNING` or `STOPPED`: how sensors and the schedule start in a fresh instance."""
        return "RUNNING" if self.sensors_running_by_default else "STOPPED"

