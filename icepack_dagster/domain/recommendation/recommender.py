"""Recommendation: which maintenance one table should get now, with options, a reason and a priority;
and, for every action left out, the reason it was left out.

Gates apply in this order: unknown health, table disabled, quarantine, no snapshot on any ref (all
actions); then per action: disabled by policy, gc.enabled not true as Iceberg reads it (destructive
actions), a table property Iceberg cannot read for the action, cadence, and finally whether
the metadata shows anything to gain. The gains are estimates from metadata alone (docs/POLICY.md,
"Recommendation"). Pure and deterministic given `now`.

The gates live in `gates.py`, the per-action plans in `compaction.py` (data files),
`position_deletes.py` (position delete files) and `retention.py` (expiry and orphan sweeps); this module
orders them and keeps the manifest and whole-table estimates.
"""

from __future__ import annotations

from datetime import datetime
from math import ceil

from icepack_dagster.domain.actions.maintenance_action import ACTION_ORDER, MaintenanceAction
from icepack_dagster.domain.health.judging import SMALL_FILES, TOO_MANY_MANIFESTS, format_bytes
from icepack_dagster.domain.health.model import TableHealth
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.recommendation.compaction import choose_compaction
from icepack_dagster.domain.recommendation.estimate import (
    ActionEstimate,
    Gain,
    priority,
    whole_table_estimate,
)
from icepack_dagster.domain.recommendation.gates import (
    cadence_gate,
    gc_disabled_reason,
    no_effect_gate,
    table_gate,
    utc,
)
from icepack_dagster.domain.recommendation.model import Recommendation, RecommendedAction, SkippedAction
from icepack_dagster.domain.recommendation.position_deletes import plan_position_deletes
from icepack_dagster.domain.recommendation.retention import plan_expiry, plan_orphan_sweep
from icepack_dagster.domain.table.iceberg_properties import (
    GC_ENABLED,
    MANIFEST_TARGET_SIZE_BYTES,
    gc_enabled,
    iceberg_value,
    unreadable_for,
)
from icepack_dagster.domain.table.status import TableStatus

__all__ = ["gc_disabled_reason", "recommend"]

MANIFEST_MIN_COUNT = 10


class _Planner:
    """Decides each action in ACTION_ORDER for one table; later actions see what earlier ones do."""

    def __init__(self, status: TableStatus, health: TableHealth, policy: Policy, now: datetime) -> None:
        self.status, self.policy, self.now = status, policy, now
        self.codes = {issue.code for issue in health.issues}
        self.target = policy.target_file_size_bytes or status.target_file_size_bytes
        self.applies_deletes = False
        self.rewrites_data = False  # a data rewrite runs first: the manifests it leaves are unknown

    def plan(self, action: MaintenanceAction) -> ActionEstimate | str:
        """A plan, or why there is nothing to gain."""
        planners = {
            MaintenanceAction.REWRITE_DATA_FILES: self._data_files,
            MaintenanceAction.REWRITE_POSITION_DELETE_FILES: self._position_deletes,
            MaintenanceAction.REWRITE_MANIFESTS: self._manifests,
            MaintenanceAction.EXPIRE_SNAPSHOTS: self._snapshots,
            MaintenanceAction.REMOVE_ORPHAN_FILES: self._orphans,
        }
        return planners[action]()

    def _data_files(self) -> ActionEstimate | str:
        plan = self._planned_data_files() if self.status.layout is not None else self._estimated_data_files()
        self.rewrites_data = isinstance(plan, ActionEstimate)
        return plan

    def _planned_data_files(self) -> ActionEstimate | str:
        """From the partition layout: Iceberg's own grouping, predicted (recommendation_compaction)."""
        s = self.status
        choice = choose_compaction(s, self.policy, self.target, self.codes, self.now)
        if isinstance(choice, str):
            return choice
        self.applies_deletes = s.live_delete_files > 0
        p = choice.prediction
        deletes = s.live_delete_files if self.applies_deletes else 0
        gain = Gain(
            files_removed=max(0, p.files_in - p.files_out) + deletes,
            bytes_reclaimed=s.live_delete_bytes if self.applies_deletes else 0,
            bytes_to_rewrite=p.bytes_in,
        )
        return ActionEstimate(choice.reason, choice.options, gain, p)

    def _estimated_data_files(self) -> ActionEstimate | str:
        """Without a partition layout (a status from before it was measured): whole-table estimates."""
        s, min_files = self.status, self.policy.min_input_files
        compact = SMALL_FILES in self.codes and s.small_file_count >= min_files
        if not compact and not s.live_delete_files:
            if SMALL_FILES in self.codes:
                return f"{s.small_file_count} small data files, fewer than min_input_files {min_files}"
            return (
                f"{s.small_file_count} of {s.live_data_files} data files are small, under the SMALL_FILES "
                "thresholds, and no delete files apply"
            )
        options = {"target-file-size-bytes": str(self.target), "min-input-files": str(min_files)}
        reasons, removed, rewrite, reclaimed = [], 0, 0, 0
        if compact:
            merged = max(1, ceil(s.small_file_bytes / self.target))
            removed, rewrite = max(0, s.small_file_count - merged), s.small_file_bytes
            reasons.append(
                f"{s.small_file_count} data files under {format_bytes(s.small_file_threshold_bytes)} "
                f"({format_bytes(s.small_file_bytes)}) would merge into about {merged}"
            )
        if s.live_delete_files:
            self.applies_deletes = True
            options.update({"delete-file-threshold": "1", "remove-dangling-deletes": "true"})
            removed += s.live_delete_files
            reclaimed = s.live_delete_bytes
            affected = min(s.live_data_bytes, ceil(s.live_delete_files * s.average_data_file_bytes))
            rewrite = max(rewrite, affected)  # assume each delete file touches about one data file
            reasons.append(
                f"{s.live_delete_files} delete files apply to the data; rewriting the affected data files "
                "applies them so reads stop merging them"
            )
        gain = Gain(files_removed=removed, bytes_reclaimed=reclaimed, bytes_to_rewrite=rewrite)
        return ActionEstimate("; ".join(reasons), options, gain)

    def _position_deletes(self) -> ActionEstimate | str:
        return plan_position_deletes(self.status, self.codes, self.applies_deletes)

    def _manifests(self) -> ActionEstimate | str:
        s = self.status
        target = iceberg_value(s.properties, MANIFEST_TARGET_SIZE_BYTES).value
        ideal = max(1, ceil(s.manifest_bytes / max(1, int(target))))
        many = s.manifest_count >= max(MANIFEST_MIN_COUNT, 2 * ideal)
        if not many and not (TOO_MANY_MANIFESTS in self.codes and s.manifest_count > ideal):
            return f"{s.manifest_count} manifests ({format_bytes(s.manifest_bytes)}), about {ideal} ideally"
        return ActionEstimate(
            f"{s.manifest_count} manifests ({format_bytes(s.manifest_bytes)}) would fit in about {ideal} "
            f"of {format_bytes(int(target))}; fewer manifests make query planning cheaper",
            {},
            Gain(files_removed=s.manifest_count - ideal, bytes_to_rewrite=s.manifest_bytes),
            None if self.rewrites_data else whole_table_estimate(s.manifest_count, ideal, s.manifest_bytes),
        )

    def _snapshots(self) -> ActionEstimate | str:
        return plan_expiry(self.status, self.policy, self.now)

    def _orphans(self) -> ActionEstimate:
        return plan_orphan_sweep(self.policy, self.now)


def recommend(
    status: TableStatus,
    health: TableHealth,
    policy: Policy,
    history: TableHistory,
    now: datetime,
    ignore_cadence: bool = False,
) -> Recommendation:
    """What to run on this table now, in ACTION_ORDER, and why each other action is left out.

    Maintenance windows are not checked here: `in_window` gates when a run may start, so a
    recommendation can be shown at any time. `ignore_cadence` (a person's forced run) drops only the
    cadence gate: quarantine, disabled actions, gc.enabled and the orphan age floor still hold.
    """
    now = utc(now)
    gate = table_gate(status, health, policy, history)
    if gate is not None:
        skipped_all = tuple(SkippedAction(action=a, reason=gate) for a in ACTION_ORDER)
        return Recommendation(table=status.table, skipped=skipped_all)
    gc_disabled = not gc_enabled(status.properties)
    planner = _Planner(status, health, policy, now)
    actions: list[RecommendedAction] = []
    skipped: list[SkippedAction] = []
    gains: list[Gain] = []
    for action in ACTION_ORDER:
        reason: str | None = None
        if not policy.action_enabled(action):
            reason = f"disabled by policy (icepack.action.{action}.enabled=false)"
        elif action.destructive and gc_disabled:
            reason = gc_disabled_reason(status.properties.get(GC_ENABLED))
        else:
            reason = (
                unreadable_for(action, status.properties)
                or (None if ignore_cadence else cadence_gate(action, policy, history, now))
                or no_effect_gate(action, status, history)
            )
        if reason is None:
            plan = planner.plan(action)
            if isinstance(plan, str):
                reason = f"nothing to gain: {plan}"
            else:
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
