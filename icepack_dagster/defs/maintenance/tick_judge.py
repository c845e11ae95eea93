"""How one tick of the maintenance sensor judges a table: launch it now, let it wait (busy, outside its
window), or drop it (disabled, cadence not elapsed, quarantined, nothing to do), with the reason the
sensor shows; and which pending tables are judged this tick."""

from dataclasses import dataclass
from datetime import datetime

import dagster as dg

from icepack_dagster.defs.asset_keys import TABLE_STATUS
from icepack_dagster.defs.event_reads import latest_of, metadata_of
from icepack_dagster.defs.materialization_codec import decode_status
from icepack_dagster.defs.partitions import table_key
from icepack_dagster.defs.run_tags import maintenance_runs
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.decisions.maintenance_selection import Decision, Verdict, order_candidates
from icepack_dagster.domain.decisions.sensor_cursors import PendingTable
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import in_window
from icepack_dagster.domain.sizing.run_sizing import SizingPolicy, size_run, sizing_tags
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import ConfigurationError, InvalidPolicyError


@dataclass(frozen=True)
class TickJudge:
    """One maintenance sensor tick's judgement of a table: launch, wait or drop, and why."""


    instance: dg.DagsterInstance
    engine: Engine
    now: datetime
    busy: frozenset[str]
    sizing: SizingPolicy | None

    def hours_since_last_run(self, partition: str, history: TableHistory) -> float | None:
        """Since the table's last maintenance: its newest tagged run (one that did nothing included) or
        its last recorded outcome (a batch run's, a manual run's), whichever is newer."""
        own = maintenance_runs(self.engine.settings.platform, partition)
        records = self.instance.get_run_records(filters=own, limit=1)
        moments = [records[0].create_timestamp] if records else []
        moments += [history.last_run_at] if history.last_run_at is not None else []
        return (self.now - max(moments)).total_seconds() / 3600 if moments else None

    def judge(self, partition: str, pending: PendingTable, sweep: bool = False) -> Decision:
        """Launch, wait or drop one table; `sweep`: a healthy table, launched only for orphan removal."""
        def verdict(
            kind: Verdict,
            reason: str,
            priority: float = 0.0,
            quarantined: bool = False,
            run_tags: dict[str, str] | None = None,
        ) -> Decision:
            return Decision(partition=partition, verdict=kind, reason=reason, quarantined=quarantined,
                            health_storage_id=pending.health_storage_id, priority=priority,
                            run_tags=run_tags or {}, urgency=pending.state.launch_urgency)

        if partition in self.busy:
            return verdict("wait", "a maintenance run is already queued or running")
        record = latest_of(self.instance, TABLE_STATUS, partition)
        status = decode_status(metadata_of(record)) if record is not None else None
        if status is None:
            return verdict("drop", "no readable table_status materialization")
        key = table_key(partition)
        try:
            policy = self.engine.policy(key, status.properties).policy
        except InvalidPolicyError as error:
            return verdict("drop", str(error))
        if not policy.enabled:
            return verdict("drop", "disabled by policy (icepack.enabled=false)")
        history = self.engine.history(key, policy)
        hours = self.hours_since_last_run(partition, history)
        if hours is not None and hours < policy.cadence_hours:
            return verdict("drop", f"cadence not elapsed: last maintenance {hours:.1f} h ago, "
                                   f"cadence {policy.cadence_hours:g} h")
        if history.quarantined:
            return verdict("drop", f"quarantined after {history.consecutive_failures} consecutive failures: "
                                   f"{history.last_error}", quarantined=True)
        if not in_window(policy, self.now):
            return verdict("wait", "outside its maintenance window")
        recommendation = self.engine.recommend(key, status=status, now=self.now)
        swept = [a for a in recommendation.actions if definition(a.action).sweep_cadence_hours is not None]
        if sweep and not swept:
            return verdict("drop", "no orphan sweep due")
        if not recommendation.needs_work:
            reasons = "; ".join(f"{s.action.value}: {s.reason}" for s in recommendation.skipped[:2])
            return verdict("drop", f"nothing to do ({reasons})" if reasons else "nothing to do")
        try:
            run_tags = sizing_tags(size_run(status, self.sizing)) if self.sizing is not None else {}
        except ConfigurationError as error:
            return verdict("drop", str(error))
        return verdict(
            "launch", f"{len(recommendation.actions)} action(s)", recommendation.priority, run_tags=run_tags
        )


def judge_pending(tick: TickJudge, pending: dict[str, PendingTable], candidates: int) -> list[Decision]:
    """The most urgent pending tables judged, at most `candidates` of them; quarantined tables are
    judged without using that budget (they are dropped at once)."""
    decisions: list[Decision] = []
    judged = 0
    for partition in order_candidates(pending):
        if judged >= candidates:
            break
        decision = tick.judge(partition, pending[partition])
        decisions.append(decision)
        judged += 0 if decision.quarantined else 1
    return decisions
