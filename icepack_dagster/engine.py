"""The engine: one object that composes catalogs, status, health, policy, recommendation, maintenance
and history for any table. The CLI drives it directly; the Dagster layer wraps it thinly.

No Dagster import here. Spark starts only when a maintenance actually runs (not for dry runs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING

from icepack_dagster.domain.actions import ACTION_ORDER, ActionResult
from icepack_dagster.domain.health import assess_health
from icepack_dagster.domain.health_model import TableHealth
from icepack_dagster.domain.history import TableHistory
from icepack_dagster.domain.maintenance_report import MaintenanceReport
from icepack_dagster.domain.policy import EffectivePolicy, Policy, PolicyRule, resolve_policy
from icepack_dagster.domain.recommendation import recommend
from icepack_dagster.domain.recommendation_model import Recommendation
from icepack_dagster.domain.status import TableStatus
from icepack_dagster.domain.table_key import TableKey, resolve_table_argument
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.discovery import DiscoveryResult, discover_tables
from icepack_dagster.iceberg.manifest_reader import ManifestCache
from icepack_dagster.iceberg.status_reader import collect_status
from icepack_dagster.policy_file import load_policy_rules
from icepack_dagster.settings import IcepackSettings
from icepack_dagster.state.history_store import HistoryStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icepack_dagster.domain.actions import MaintenanceAction

Progress = Callable[[str], None]


def utc_now() -> datetime:
    return datetime.now(UTC)


class Engine:
    """Everything icepack can do to one table, from one settings object."""

    def __init__(
        self,
        settings: IcepackSettings,
        catalogs: CatalogSet | None = None,
        spark_provider: Callable[[], SparkSession] | None = None,
        history: HistoryStore | None = None,
        manifest_cache: ManifestCache | None = None,
    ) -> None:
        self.settings = settings
        self.catalogs = catalogs or CatalogSet(settings)
        self._spark_provider = spark_provider
        self._history = history
        self.manifest_cache = manifest_cache or ManifestCache()

    @cached_property
    def history_store(self) -> HistoryStore:
        return self._history or HistoryStore(self.settings.resolved_state_url)

    @cached_property
    def policy_rules(self) -> tuple[PolicyRule, ...]:
        return load_policy_rules(self.settings.policy_file)

    def spark(self) -> SparkSession:
        if self._spark_provider is not None:
            return self._spark_provider()
        from icepack_dagster.spark.session import build_spark_session

        for name in self.catalogs.names:  # PyIceberg creates embedded catalog tables before Spark looks
            self.catalogs.get(name)
        return build_spark_session(self.settings)

    # --- finding tables -------------------------------------------------------------------------
    def discover(self) -> DiscoveryResult:
        return discover_tables(self.catalogs, self.settings.include, self.settings.exclude)

    def resolve(self, text: str) -> TableKey:
        return resolve_table_argument(text, self.catalogs.names, self.settings.primary_catalog)

    def display_name(self, key: TableKey) -> str:
        return key.display(with_catalog=len(self.catalogs.names) > 1)

    # --- measuring and judging ------------------------------------------------------------------
    def status(self, key: TableKey, now: datetime | None = None) -> TableStatus:
        return collect_status(
            self.catalogs.get(key.catalog),
            key,
            self.settings.thresholds,
            now or utc_now(),
            workers=self.settings.status_workers,
            cache=self.manifest_cache,
        )

    def health(self, status: TableStatus) -> TableHealth:
        return assess_health(status, self.settings.thresholds)

    def policy(self, key: TableKey, properties: dict[str, str]) -> EffectivePolicy:
        return resolve_policy(key, properties, self.policy_rules)

    def history(self, key: TableKey, policy: Policy | None = None) -> TableHistory:
        threshold = (policy or Policy()).quarantine_after_failures
        return self.history_store.history(key.text, threshold)

    def release_quarantine(self, key: TableKey) -> None:
        self.history_store.release(key.text, utc_now())

    def recommend(
        self,
        key: TableKey,
        status: TableStatus | None = None,
        health: TableHealth | None = None,
        now: datetime | None = None,
    ) -> Recommendation:
        """Raises InvalidPolicyError (naming table and field) when the table's policy is invalid."""
        now = now or utc_now()
        status = status or self.status(key, now)
        health = health or self.health(status)
        policy = self.policy(key, status.properties).policy
        return recommend(status, health, policy, self.history(key, policy), now)

    # --- fixing ---------------------------------------------------------------------------------
    def maintain(
        self,
        key: TableKey,
        recommendation: Recommendation | None = None,
        dry_run: bool = False,
        only: Sequence[MaintenanceAction] | None = None,
        on_progress: Progress | None = None,
    ) -> MaintenanceReport:
        """Run the recommended actions (or the subset `only`) on Spark and record the outcome."""
        from icepack_dagster.spark.runner import MaintenanceRunner

        started = utc_now()
        status = self.status(key, started)
        recommendation = recommendation or self.recommend(key, status, now=started)
        chosen = [a for a in recommendation.actions if only is None or a.action in only]
        skipped = [
            ActionResult(
                action=s.action, status="skipped", statements=(), duration_seconds=0, reason=s.reason
            )
            for s in recommendation.skipped
            if only is None or s.action in only
        ]
        results: list[ActionResult] = []
        if chosen:
            runner = MaintenanceRunner(None if dry_run else self.spark(), key.catalog)
            results = runner.run(
                key,
                chosen,
                status.properties,
                dry_run=dry_run,
                status_before=lambda: self.status(key),
                on_progress=on_progress,
            )
        ordered = sorted([*results, *skipped], key=lambda r: ACTION_ORDER.index(r.action))
        report = MaintenanceReport(
            table=key.text, started_at=started, finished_at=utc_now(), results=tuple(ordered)
        )
        if not dry_run and chosen:
            self.history_store.record(report)
        return report
