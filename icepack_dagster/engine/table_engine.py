"""The engine: one object that composes catalogs, status, health, policy, recommendation, maintenance
and history for any table. The CLI drives it directly; the Dagster layer wraps it thinly.

No Dagster import here. Spark starts only when a maintenance actually runs (`maintenance_run.py`,
which gets what it needs from the engine through `MaintenanceServices` and never imports it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, time, timedelta
from functools import cached_property
from typing import TYPE_CHECKING

from icepack_dagster.config.policy_file import load_policy_rules
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.health.judging import assess_health
from icepack_dagster.domain.health.model import TableHealth
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.outcomes.prediction import PredictionAccuracy
from icepack_dagster.domain.outcomes.rollback import RollbackPlan
from icepack_dagster.domain.policy.layering import (
    EffectivePolicy,
    Policy,
    PolicyRule,
    in_window,
    resolve_policy,
)
from icepack_dagster.domain.recommendation.circuit_breakers import RewriteBudget, breaker_pauses
from icepack_dagster.domain.recommendation.model import Recommendation
from icepack_dagster.domain.recommendation.recommender import recommend
from icepack_dagster.domain.table.key import TableKey, resolve_table_argument
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.domain.table.unreferenced_files import UnreferencedFiles
from icepack_dagster.engine.maintenance_run import TABLE_GONE, JudgedMaintenance, Progress, run_maintenance
from icepack_dagster.exceptions import IcepackError, TableNotFoundError
from icepack_dagster.iceberg.catalogs import CatalogSet, load_table
from icepack_dagster.iceberg.discovery import DiscoveryResult, discover_tables, matches
from icepack_dagster.iceberg.incremental_status.status_tracker import FleetRefresh, StatusTracker
from icepack_dagster.iceberg.manifest_cache import ManifestCache
from icepack_dagster.iceberg.unreferenced_files import find_unreferenced_files
from icepack_dagster.store.history_store import HistoryStore
from icepack_dagster.store.manifest_store import ManifestSummaryStore
from icepack_dagster.store.table_facts import TableFactsStore
from icepack_dagster.store.table_identities import TableIdentities, set_aside_name
from icepack_dagster.store.table_lease import TableLeases, default_holder

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyspark.sql import SparkSession

    from icepack_dagster.spark.table_sessions import TableSessions


class Engine:
    """Everything icepack can do to one table, from one settings object."""

    def __init__(
        self,
        settings: IcepackSettings,
        catalogs: CatalogSet | None = None,
        spark_provider: Callable[[], SparkSession] | None = None,
        history: HistoryStore | None = None,
        manifest_cache: ManifestCache | None = None,
        lease_holder: str | None = None,
    ) -> None:
        self.settings = settings
        self.lease_holder = lease_holder or default_holder()
        self.catalogs = catalogs or CatalogSet(settings)
        self._spark_provider = spark_provider
        self._history = history
        stored = settings.store_manifest_summaries
        store = ManifestSummaryStore(settings.resolved_state_url) if stored else None
        self.manifest_cache = manifest_cache if manifest_cache is not None else ManifestCache(store=store)
        self._identities_seen: dict[str, str] = {}  # name -> the UUID this engine last recorded for it

    @cached_property
    def history_store(self) -> HistoryStore:
        return self._history or HistoryStore(self.settings.resolved_state_url)

    @cached_property
    def facts(self) -> TableFactsStore:
        """Each table's latest status, health and maintenance outcome, as the platform's decisions read
        them (store/table_facts.py)."""
        return TableFactsStore(self.settings.resolved_state_url, self.settings.platform.deployment_name)

    @cached_property
    def identities(self) -> TableIdentities:
        """Which table each name meant when last measured (store/table_identities.py), recorded in the
        database of the history it sets aside."""
        return TableIdentities(self.history_store.url)

    @cached_property
    def leases(self) -> TableLeases:
        return TableLeases(
            self.settings.resolved_state_url, timedelta(seconds=self.settings.maintenance_lease_seconds)
        )

    @cached_property
    def policy_rules(self) -> tuple[PolicyRule, ...]:
        return load_policy_rules(self.settings.policy_file)

    @cached_property
    def table_sessions(self) -> TableSessions:
        """The sessions tables are maintained in; `with engine.table_sessions.shared():` lets the tables
        maintained inside share one per thread (`spark/table_sessions.py`)."""
        from icepack_dagster.spark.table_sessions import TableSessions

        return TableSessions(self.spark)

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
        """The name the CLI prints, which `resolve` reads back as exactly this table."""
        return key.cli_name(self.catalogs.names)

    # --- measuring and judging ------------------------------------------------------------------
    def status(self, key: TableKey, now: datetime | None = None) -> TableStatus:
        # PyIceberg's readers, imported when a table is first measured (see iceberg/catalogs.py)
        from icepack_dagster.iceberg.status_reader import collect_status

        status = collect_status(
            self.catalogs.get(key.catalog),
            key,
            self.settings.thresholds,
            now or utc_now(),
            workers=self.settings.status_workers,
            cache=self.manifest_cache,
        )
        self.observe_identities([status])
        return status

    def observe_identities(self, statuses: Sequence[TableStatus]) -> dict[str, str]:
        """Record which table each measured name means; a name that now means a table created again
        under it gets a history of its own, the former one set aside (store/table_identities.py).
        Returns those names with the former table's UUID. `status` calls it for every table it reads,
        so history is never judged for the wrong table; a caller that reads many tables at once
        (`refresh_statuses`) calls it for the tables it read, before it reads their histories. A name
        read again with the UUID this engine last recorded asks the database nothing (a maintenance
        reads its table's status several times)."""
        measured = {
            s.table: s.table_uuid for s in statuses
            if s.table_uuid is not None and self._identities_seen.get(s.table) != s.table_uuid
        }
        if not measured:
            return {}
        replaced = self.identities.observe(measured, utc_now())
        self._identities_seen.update(measured)
        for table, former in replaced.items():
            logger.warning(
                "table %s was created again under its name (the former table's UUID was %s): it starts a "
                "history of its own; the former history is kept as %s", table, former,
                set_aside_name(table, former),
            )
        return replaced

    def refresh_statuses(
        self,
        keys: Sequence[TableKey],
        known: Mapping[TableKey, TableStatus],
        now: datetime | None = None,
        table_workers: int = 1,
    ) -> FleetRefresh:
        """Statuses of `keys`, reading only tables whose metadata file differs from their `known` status
        (the others are `known` aged to `now`); a table that cannot be measured is in `failures`."""
        now = now or utc_now()
        by_catalog: dict[str, list[TableKey]] = {}
        for key in keys:
            by_catalog.setdefault(key.catalog, []).append(key)
        refreshes = []
        thresholds = self.settings.thresholds
        for name, catalog_keys in by_catalog.items():
            tracker = StatusTracker(
                cache=self.manifest_cache,
                workers=self.settings.status_workers,
                table_workers=table_workers,
                from_summaries=self.settings.status_from_summaries,
            )
            for key in catalog_keys:
                if key in known:
                    tracker.remember(key, known[key])
            refreshes.append(tracker.refresh(self.catalogs, name, catalog_keys, thresholds, now))
        return FleetRefresh(
            statuses={t: s for r in refreshes for t, s in r.statuses.items()},
            read=tuple(t for r in refreshes for t in r.read),
            unchanged=tuple(t for r in refreshes for t in r.unchanged),
            failures={t: e for r in refreshes for t, e in r.failures.items()},
        )

    def health(self, status: TableStatus) -> TableHealth:
        return assess_health(status, self.settings.thresholds)

    def policy(self, key: TableKey, properties: dict[str, str]) -> EffectivePolicy:
        return resolve_policy(key, properties, self.policy_rules)

    def history(self, key: TableKey, policy: Policy | None = None) -> TableHistory:
        threshold = (policy or Policy()).quarantine_after_failures
        return self.history_store.history(key.text, threshold)

    def histories(self, policies: Mapping[TableKey, Policy]) -> dict[TableKey, TableHistory]:
        """Each table's history judged by its policy, in one fleet-wide read (what sensors use)."""
        thresholds = {key.text: policy.quarantine_after_failures for key, policy in policies.items()}
        read = self.history_store.histories(thresholds)
        return {key: read[key.text] for key in policies}

    def prune_history(self, now: datetime | None = None) -> int:
        """Drop maintenance history past `history_retention_days` that no decision reads any more."""
        cutoff = (now or utc_now()) - timedelta(days=self.settings.history_retention_days)
        return self.history_store.prune(cutoff)

    def rollback(self, key: TableKey, dry_run: bool = False) -> RollbackPlan:
        """Undo the table's last maintenance when nothing else committed since (`engine/rollback_run.py`)."""
        from icepack_dagster.engine.rollback_run import run_rollback

        return run_rollback(self.history_store, self.open_table(key), key, dry_run)

    def rewrite_budget(self, now: datetime | None = None) -> RewriteBudget | None:
        """The deployment's daily rewrite budget and what its rewrites read since 00:00 UTC, or None when
        no budget is set (`platform.daily_rewrite_budget_bytes`)."""
        limit = self.settings.platform.daily_rewrite_budget_bytes
        if limit is None:
            return None
        day = (now or utc_now()).astimezone(UTC).date()
        midnight = datetime.combine(day, time(), tzinfo=UTC)
        rewritten = self.history_store.fleet_bytes_rewritten(midnight, list(self.settings.catalogs))
        return RewriteBudget(limit_bytes=limit, rewritten_bytes=rewritten, day=day)

    def breaker_pauses(
        self, key: TableKey, status: TableStatus | None = None
    ) -> dict[MaintenanceAction, str]:
        """Each rewrite of the table a circuit breaker pauses now, with the reason (reads its status
        unless given)."""
        status = status or self.status(key)
        return breaker_pauses(status, self.history(key), self.rewrite_budget())

    def release_quarantine(self, key: TableKey) -> None:
        self.history_store.release(key.text, utc_now())

    def recommend(
        self,
        key: TableKey,
        status: TableStatus | None = None,
        health: TableHealth | None = None,
        now: datetime | None = None,
        force: bool = False,
    ) -> Recommendation:
        """Raises InvalidPolicyError (naming table and field) when the table's policy is invalid.
        `force` ignores the cadence, never a safety gate (see `domain/recommendation/recommender.py`)."""
        now = now or utc_now()
        status = status or self.status(key, now)
        health = health or self.health(status)
        policy = self.policy(key, status.properties).policy
        history = self.history(key, policy)
        budget = self.rewrite_budget(now)
        return recommend(status, health, policy, history, now, ignore_cadence=force, budget=budget)

    def unmanaged_reason(self, key: TableKey) -> str | None:
        """Why `key` is not a table icepack manages (unknown catalog, outside include/exclude), or None.
        Whether the table exists is `table_exists`, a catalog call."""
        if key.catalog not in self.catalogs.names:
            return f"no catalog named {key.catalog!r} is configured ({', '.join(self.catalogs.names)})"
        if not matches(key, self.settings.include, self.settings.exclude):
            return "it matches no include pattern, or an exclude pattern, of the settings"
        return None

    def table_exists(self, key: TableKey) -> bool:
        return self.catalogs.get(key.catalog).table_exists(key.identifier)

    def open_table(self, key: TableKey) -> Table:
        return load_table(self.catalogs.get(key.catalog), key)

    def window_refusal(self, key: TableKey, now: datetime | None = None) -> str | None:
        """Why maintenance may not start now (outside every maintenance window of the table's policy),
        or None. Reads only the table's properties; a table that is gone, unreadable, behind an
        unreachable catalog or with an invalid policy is `maintain`'s to report (it defers or fails)."""
        try:
            properties = dict(self.open_table(key).properties)
            policy = self.policy(key, properties).policy
        except IcepackError:
            return None
        if in_window(policy, now or utc_now()):
            return None
        windows = "; ".join(w.text for w in policy.windows)
        return f"outside its maintenance window ({windows}, UTC)"

    def accuracy(self, table: TableKey | None = None) -> tuple[PredictionAccuracy, ...]:
        """Planned against done, per action, over the fleet's (or one table's) recorded predictions."""
        return self.history_store.accuracy(table.text if table is not None else None)

    def unreferenced_files(self, key: TableKey, now: datetime | None = None) -> UnreferencedFiles:
        """Files under the table's location that no metadata references, split by the table's orphan
        age: what interrupted writes or maintenance left, until orphan removal may collect it."""
        now = now or utc_now()
        table = self.open_table(key)
        hours = self.policy(key, dict(table.properties)).policy.orphan_older_than_hours
        return find_unreferenced_files(table, key, hours, now)

    # --- fixing ---------------------------------------------------------------------------------
    def hold_lease(self, key: TableKey) -> AbstractContextManager[object]:
        return self.leases.hold(key.text, self.lease_holder)

    def record(self, report: MaintenanceReport) -> None:
        self.history_store.record(report)

    def maintain(
        self,
        key: TableKey,
        recommendation: Recommendation | None = None,
        dry_run: bool = False,
        only: Sequence[MaintenanceAction] | None = None,
        on_progress: Progress | None = None,
        force: bool = False,
    ) -> MaintenanceReport:
        """Run the recommended actions (or the subset `only`) on Spark and record the outcome; `force`
        plans past the cadence (when no `recommendation` is given), never past a safety gate.

        The table's lease is taken first (not for a dry run): while another maintenance, from the CLI
        or the platform, holds it, nothing runs and the outcome is `deferred`. A table dropped since it
        was recommended gets its actions skipped as "table no longer exists" and the outcome
        `table_gone` (nothing runs, nothing is recorded). An invalid policy, unreadable metadata or a
        table Spark cannot open fails its actions with the error, recorded like any failure; a catalog
        that stays unreachable after retries defers them (outcome `deferred`), unrecorded, since it is
        no fault of the table."""
        return run_maintenance(self, key, recommendation, dry_run, only, on_progress, force)

    def maintain_and_judge(
        self,
        key: TableKey,
        recommendation: Recommendation | None = None,
        *,
        dry_run: bool = False,
        only: Sequence[MaintenanceAction] | None = None,
        on_progress: Progress | None = None,
        force: bool = False,
        respect_window: bool = False,
        remeasure: bool = True,
    ) -> JudgedMaintenance:
        """Maintain, then re-measure and judge: the one operation behind `icepack maintain`, the
        `maintained_table` asset and the batch op. `respect_window` (for a launch that did not check it):
        outside the table's windows nothing runs, unless `force`. A deferred (or, without `remeasure`,
        gone) table is not measured. With `remeasure` the table's status and health are read right after
        (a table gone by then is `table_gone`) and its history judged by the policy its properties give
        now; without (the CLI reports the maintenance alone, a batch measures all its tables at once) the
        history is judged by the default quarantine threshold."""
        if respect_window and not force and (refusal := self.window_refusal(key)) is not None:
            report = MaintenanceReport(table=key.text, started_at=utc_now(), finished_at=utc_now())
            unrun = ("nothing_to_do", refusal)
            return JudgedMaintenance(report, self.history(key), unrun=unrun, outside_window=True)
        report = self.maintain(key, recommendation, dry_run, only, on_progress, force)
        if report.outcome == "deferred" or (report.outcome == "table_gone" and not remeasure):
            reason = next((r.reason for r in report.results if r.reason), report.outcome)
            return JudgedMaintenance(report, self.history(key), unrun=(report.outcome, reason))
        if not remeasure:
            return JudgedMaintenance(report, self.history(key))
        try:
            status = self.status(key)
        except TableNotFoundError as error:
            gone = ("table_gone", f"{TABLE_GONE}: {error}")
            return JudgedMaintenance(report, self.history(key), unrun=gone)
        history = self.history(key, self.policy(key, status.properties).policy)
        return JudgedMaintenance(report, history, status, self.health(status))
