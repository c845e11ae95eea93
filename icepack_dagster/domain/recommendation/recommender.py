"""Recommendation: which maintenance one table should get now, with options, a reason and a priority;
and, for every action left out, the reason it was left out.

Gates apply in this order: unknown health, table disabled, quarantine, no snapshot on any ref (all
actions); then per action: disabled by policy, gc.enabled not true as Iceberg reads it (destructive
actions), a table property Iceberg cannot read for the action, a tripped circuit breaker (shown before
the cadence, so a pause is never hidden behind it), cadence, and finally whether
the metadata shows anything to gain. The gains are estimates from metadata alone (docs/POLICY.md,
"Recommendation"). Pure and deterministic given `now`.

The gates live in `gates.py`; each action's plan in its own module of `domain/actions/`, which this
module runs in the registry's order: a later action's planner sees what the earlier ones leave
(`PlanningContext.after`).
"""

from __future__ import annotations

from datetime import datetime

from icepack_dagster.domain.actions.definition import Gain, PlanningContext
from icepack_dagster.domain.actions.registry import ACTIONS
from icepack_dagster.domain.health.model import TableHealth
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.model import Policy
from icepack_dagster.domain.recommendation.circuit_breakers import RewriteBudget, breaker_pause
from icepack_dagster.domain.recommendation.commit_cadence import conflict_wait
from icepack_dagster.domain.recommendation.estimate import priority
from icepack_dagster.domain.recommendation.gates import (
    cadence_gate,
    gc_disabled_reason,
    no_effect_gate,
    table_gate,
    utc,
)
from icepack_dagster.domain.recommendation.model import Recommendation, RecommendedAction, SkippedAction
from icepack_dagster.domain.table.iceberg_properties import GC_ENABLED, gc_enabled, unreadable_for
from icepack_dagster.domain.table.status import TableStatus

__all__ = ["gc_disabled_reason", "recommend"]


def recommend(
    status: TableStatus,
    health: TableHealth,
    policy: Policy,
    history: TableHistory,
    now: datetime,
    ignore_cadence: bool = False,
    budget: RewriteBudget | None = None,
) -> Recommendation:
    """What to run on this table now, in the registry's order, and why each other action is left out.

    Maintenance windows are not checked here: `in_window` gates when a run may start, so a
    recommendation can be shown at any time. `ignore_cadence` (a person's forced run) drops only the
    cadence gate and the wait after a conflict: quarantine, disabled actions, gc.enabled and the orphan
    age floor still hold. `budget` is the deployment's daily rewrite budget, when one is set; the
    circuit breakers (`circuit_breakers.py`) hold even for a forced run.
    """
    now = utc(now)
    gate = table_gate(status, health, policy, history) or (
        None if ignore_cadence else conflict_wait(history, status.snapshot_graph, now)
    )
    if gate is not None:
        skipped_all = tuple(SkippedAction(action=spec.action, reason=gate) for spec in ACTIONS)
        return Recommendation(table=status.table, skipped=skipped_all)
    gc_disabled = not gc_enabled(status.properties)
    issues = frozenset(issue.code for issue in health.issues)
    context = PlanningContext(status, policy, issues, now, conflicts=history.consecutive_conflicts)
    actions: list[RecommendedAction] = []
    skipped: list[SkippedAction] = []
    gains: list[Gain] = []
    for spec in ACTIONS:
        action = spec.action
        reason: str | None = None
        if not policy.action_enabled(action):
            reason = f"disabled by policy (icepack.action.{action}.enabled=false)"
        elif spec.destructive and gc_disabled:
            reason = gc_disabled_reason(status.properties.get(GC_ENABLED))
        else:
            reason = (
                unreadable_for(action, spec.reads_properties, status.properties)
                or breaker_pause(action, status, history, budget)
                or (None if ignore_cadence else cadence_gate(action, policy, history, now))
                or no_effect_gate(action, status, history)
            )
        if reason is None:
            plan = spec.plan(context)
            if isinstance(plan, str):
                reason = f"nothing to gain: {plan}"
            else:
                context = context.after(plan)
                gains.append(plan.gain)
                actions.append(
                    RecommendedAction(
                        action=action,
                        reason=plan.reason,
                        priority=priority([plan.gain], policy.priority_boost),
                        options=plan.options,
                        prediction=plan.prediction,
                    )
                )
                continue
        skipped.append(SkippedAction(action=action, reason=reason))
    return Recommendation(
        table=status.table,
        actions=tuple(actions),
        skipped=tuple(skipped),
        priority=priority(gains, policy.priority_boost),
        expected_files_removed=sum(g.files_removed for g in gains),
        expected_bytes_reclaimed=sum(g.bytes_reclaimed for g in gains),
        estimated_bytes_to_rewrite=sum(g.bytes_to_rewrite for g in gains),
    )
