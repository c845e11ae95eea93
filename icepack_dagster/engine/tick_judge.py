"""How one tick of the maintenance sensor judges a table: launch it now, let it wait (busy, outside its
window), or drop it (disabled, cadence not elapsed, quarantined, nothing to do), with the reason the
sensor shows; and which pending tables are judged this tick. A table's status and last maintenance
come from its facts in icepack's state database (read for the tick's candidates in one query), never
from Dagster's runs or events."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.decisions.maintenance_selection import Decision, Verdict, order_candidates
from icepack_dagster.domain.decisions.sensor_cursors import PendingTable
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import in_window
from icepack_dagster.domain.sizing.run_sizing import SizingPolicy, size_run, sizing_tags
from icepack_dagster.domain.table.key import parse_table_key
from icepack_dagster.engine.table_engine import Engine
from icepack_dagster.exceptions import ConfigurationError, InvalidPolicyError
from icepack_dagster.store.table_facts import MeasuredTable


@dataclass(frozen=True)
class TickJudge:
    """One maintenance sensor tick's judgement of a table: launch, wait or drop, and why."""

    engine: Engine
    now: datetime
    busy: frozenset[str]
    sizing: SizingPolicy | None
    measured: dict[str, MeasuredTable] = field(default_factory=dict)

    def prefetch(self, partitions: Sequence[str]) -> dict[str, MeasuredTable]:
        """The facts of `partitions`, read in one query and kept for the tick's judgements."""
        missing = [p for p in partitions if p not in self.measured]
        if missing:
            self.measured.update(self.engine.facts.measured(missing))
        return {p: self.measured[p] for p in partitions if p in self.measured}

    def hours_since_last_run(self, facts: MeasuredTable, history: TableHistory) -> float | None:
        """Since the table's last maintenance: its last outcome in its facts (one that did nothing
        included) or in its history, whichever is newer."""
        moments = [facts.maintained_at] if facts.maintained_at is not None else []
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
                            health_event=pending.health_event, priority=priority,
                            run_tags=run_tags or {}, urgency=pending.state.launch_urgency)

        if partition in self.busy:
            return verdict("wait", "a maintenance run is already queued or running")
        facts = self.prefetch([partition]).get(partition)
        status = facts.status if facts is not None else None
        if facts is None or status is None:
            return verdict("drop", "no readable table status recorded")
        key = parse_table_key(partition)
        try:
            policy = self.engine.policy(key, status.properties).policy
        except InvalidPolicyError as error:
            return verdict("drop", str(error))
        if not policy.enabled:
            return verdict("drop", "disabled by policy (icepack.enabled=false)")
        history = self.engine.history(key, policy)
        hours = self.hours_since_last_run(facts, history)
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
    ordered = order_candidates(pending)
    tick.prefetch(ordered[:candidates])
    for partition in ordered:
        if judged >= candidates:
            break
        decision = tick.judge(partition, pending[partition])
        decisions.append(decision)
        judged += 0 if decision.quarantined else 1
    return decisions
