"""Recommendation: which maintenance one table should get now, with options, a reason and a priority;
and, for every action left out, the reason it was left out.

Gates apply in this order: unknown health, table disabled, quarantine, no snapshot on any ref (all
actions); then per action: disabled by policy, gc.enabled not true as Iceberg reads it (destructive
actions), a table property Iceberg cannot read for the action, cadence, and finally whether
the metadata shows anything to gain. The gains are estimates from metadata alone (docs/POLICY.md,
"Recommendation"). Pure and deterministic given `now`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from math import ceil

from icepack_dagster.domain.actions import ACTION_ORDER, MaintenanceAction
from icepack_dagster.domain.compaction_planner import RewritePrediction
from icepack_dagster.domain.health import (
    DELETE_FILE_BUILDUP,
    SMALL_FILES,
    TOO_MANY_MANIFESTS,
    format_bytes,
    format_hours,
)
from icepack_dagster.domain.health_model import HealthState, TableHealth
from icepack_dagster.domain.history import TableHistory
from icepack_dagster.domain.iceberg_properties import (
    GC_ENABLED,
    MANIFEST_TARGET_SIZE_BYTES,
    gc_enabled,
    iceberg_value,
    unreadable_for,
)
from icepack_dagster.domain.policy import Policy
from icepack_dagster.domain.recommendation_compaction import choose_compaction
from icepack_dagster.domain.recommendation_model import Recommendation, RecommendedAction, SkippedAction
from icepack_dagster.domain.status import TableStatus

ORPHAN_CADENCE_HOURS = 7 * 24  # orphans are invisible in metadata: look for them at most weekly
MANIFEST_MIN_COUNT = 10
FIXED_COST = 1.0  # per action: planning, a commit, a Spark job
COST_BYTES = 1024**3  # one cost unit per GiB read and rewritten
GAIN_BYTES = 128 * 1024**2  # reclaiming 128 MiB is worth as much as removing one file



def gc_disabled_reason(value: str | None) -> str:
    """Why destructive actions are skipped on a table whose gc.enabled Iceberg reads as false."""
    return f"gc.enabled={value!r} on the table, which Iceberg reads as false: destructive actions never run"


@dataclass(frozen=True)
class _Gain:
    files_removed: int = 0
    bytes_reclaimed: int = 0
    bytes_to_rewrite: int = 0


@dataclass(frozen=True)
class _Plan:
    reason: str
    options: dict[str, str] = field(default_factory=dict)
    gain: _Gain = _Gain()
    prediction: RewritePrediction | None = None


def _expected(files_in: int, files_out: int | None = None, bytes_in: int | None = None) -> RewritePrediction:
    """A whole-table estimate (no groups): the outcome check only tells "no effect" from "some"."""
    return RewritePrediction(files_in=files_in, files_out=files_out or 0, bytes_in=bytes_in or 0, exact=False)


def _priority(gains: list[_Gain], boost: float) -> float:
    """Expected gain over cost: files removed (plus bytes reclaimed, weighted) per unit of work."""
    gain = sum(g.files_removed + g.bytes_reclaimed / GAIN_BYTES for g in gains)
    cost = FIXED_COST * len(gains) + sum(g.bytes_to_rewrite for g in gains) / COST_BYTES
    return round(gain / cost * boost, 6) if gains else 0.0


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC, floored to the second: flooring only ever keeps more, never deletes more."""
    return moment.replace(microsecond=0).isoformat(timespec="seconds")


class _Planner:
    """Decides each action in ACTION_ORDER for one table; later actions see what earlier ones do."""

    def __init__(self, status: TableStatus, health: TableHealth, policy: Policy, now: datetime) -> None:
        self.status, self.policy, self.now = status, policy, now
        self.codes = {issue.code for issue in health.issues}
        self.target = policy.target_file_size_bytes or status.target_file_size_bytes
        self.applies_deletes = False
        self.rewrites_data = False  # a data rewrite runs first: the manifests it leaves are unknown

    def plan(self, action: MaintenanceAction) -> _Plan | str:
        """A plan, or why there is nothing to gain."""
        planners = {
            MaintenanceAction.REWRITE_DATA_FILES: self._data_files,
            MaintenanceAction.REWRITE_POSITION_DELETE_FILES: self._position_deletes,
            MaintenanceAction.REWRITE_MANIFESTS: self._manifests,
            MaintenanceAction.EXPIRE_SNAPSHOTS: self._snapshots,
            MaintenanceAction.REMOVE_ORPHAN_FILES: self._orphans,
        }
        return planners[action]()

    def _data_files(self) -> _Plan | str:
        plan = self._planned_data_files() if self.status.layout is not None else self._estimated_data_files()
        self.rewrites_data = isinstance(plan, _Plan)
        return plan

    def _planned_data_files(self) -> _Plan | str:
        """From the partition layout: Iceberg's own grouping, predicted (recommendation_compaction)."""
        s = self.status
        choice = choose_compaction(s, self.policy, self.target, self.codes, self.now)
        if isinstance(choice, str):
            return choice
        self.applies_deletes = s.live_delete_files > 0
        p = choice.prediction
        deletes = s.live_delete_files if self.applies_deletes else 0
        gain = _Gain(
            files_removed=max(0, p.files_in - p.files_out) + deletes,
            bytes_reclaimed=s.live_delete_bytes if self.applies_deletes else 0,
            bytes_to_rewrite=p.bytes_in,
        )
        return _Plan(choice.reason, choice.options, gain, p)

    def _estimated_data_files(self) -> _Plan | str:
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
        gain = _Gain(files_removed=removed, bytes_reclaimed=reclaimed, bytes_to_rewrite=rewrite)
        return _Plan("; ".join(reasons), options, gain)

    def _position_deletes(self) -> _Plan | str:
        s = self.status
        count = s.live_position_delete_files
        if count == 0:
            return "no position delete files"
        if s.format_version >= 3:
            return (
                f"{count} deletion vectors (format v3) are already one per data file; "
                "rewrite_data_files applies them"
            )
        if count < 2 and DELETE_FILE_BUILDUP not in self.codes:
            return "1 position delete file: nothing to compact"
        position_bytes = s.live_delete_bytes * count // max(s.live_delete_files, 1)
        if self.applies_deletes:
            return _Plan(
                f"{count} position delete files become dangling once rewrite_data_files applies them; "
                "rewriting all of them drops any left",
                {"rewrite-all": "true"},
                _Gain(bytes_to_rewrite=position_bytes),
            )
        merged = max(1, ceil(position_bytes / self.target))
        return _Plan(
            f"{count} position delete files ({format_bytes(position_bytes)}) would merge into about {merged}",
            {"min-input-files": "2"},
            _Gain(files_removed=max(0, count - merged), bytes_to_rewrite=position_bytes),
            _expected(count, merged, position_bytes),
        )

    def _manifests(self) -> _Plan | str:
        s = self.status
        target = iceberg_value(s.properties, MANIFEST_TARGET_SIZE_BYTES).value
        ideal = max(1, ceil(s.manifest_bytes / max(1, int(target))))
        many = s.manifest_count >= max(MANIFEST_MIN_COUNT, 2 * ideal)
        if not many and not (TOO_MANY_MANIFESTS in self.codes and s.manifest_count > ideal):
            return f"{s.manifest_count} manifests ({format_bytes(s.manifest_bytes)}), about {ideal} ideally"
        return _Plan(
            f"{s.manifest_count} manifests ({format_bytes(s.manifest_bytes)}) would fit in about {ideal} "
            f"of {format_bytes(int(target))}; fewer manifests make query planning cheaper",
            {},
            _Gain(files_removed=s.manifest_count - ideal, bytes_to_rewrite=s.manifest_bytes),
            None if self.rewrites_data else _expected(s.manifest_count, ideal, s.manifest_bytes),
        )

    def _snapshots(self) -> _Plan | str:
        s, p = self.status, self.policy
        count, keep, max_age = s.snapshot_count, p.snapshot_retain_last, p.snapshot_max_age_hours
        if count <= keep:
            return f"{count} snapshots, no more than snapshot_retain_last {keep}"
        oldest = (s.oldest_snapshot_age_seconds or 0.0) / 3600
        newest = (s.newest_snapshot_age_seconds or 0.0) / 3600
        # Iceberg expires snapshots committed strictly before `older_than`, which is floored to the
        # second: a snapshot must be older than the age that cutoff stands for, not just max_age.
        cutoff = (self.now - timedelta(hours=max_age)).replace(microsecond=0)
        needed = (self.now - cutoff).total_seconds() / 3600
        if oldest <= needed:
            return (
                f"the oldest of {count} snapshots is {format_hours(oldest)} old, within "
                f"snapshot_max_age_hours {max_age:g}; lower icepack.snapshot.max-age-hours to expire them"
            )
        # Ages are only known at the ends: assume commits spread evenly in between.
        share = (oldest - needed) / (oldest - newest) if oldest > newest else 1.0
        expired = min(count - keep, max(1, round(count * share)))
        return _Plan(
            f"about {expired} of {count} snapshots are older than {format_hours(max_age)} "
            f"(oldest {format_hours(oldest)}) beyond the newest {keep} kept",
            {"older_than": _timestamp(cutoff), "retain_last": str(keep)},
            _Gain(files_removed=expired),  # at least each expired snapshot's manifest list
            _expected(expired),  # one manifest list deleted per expired snapshot
        )

    def _orphans(self) -> _Plan:
        hours = self.policy.orphan_older_than_hours
        return _Plan(
            "files no snapshot references cannot be seen in metadata; they are looked for at most "
            f"every {format_hours(ORPHAN_CADENCE_HOURS)}, keeping any younger than {format_hours(hours)}",
            {"older_than": _timestamp(self.now - timedelta(hours=hours))},
        )


def _table_gate(
    status: TableStatus, health: TableHealth, policy: Policy, history: TableHistory
) -> str | None:
    if health.state is HealthState.UNKNOWN:
        return f"health unknown: {health.error or 'status could not be measured'}"
    if not policy.enabled:
        return "table disabled"
    if history.quarantined or history.consecutive_failures >= policy.quarantine_after_failures:
        return (
            f"quarantined after {history.consecutive_failures} consecutive failures: "
            f"{history.last_error or 'no error recorded'}"
        )
    if status.snapshot_count == 0:
        return "table has no snapshot"
    return None


def _cadence_gate(
    action: MaintenanceAction, policy: Policy, history: TableHistory, now: datetime
) -> str | None:
    cadence = policy.cadence_hours
    if action is MaintenanceAction.REMOVE_ORPHAN_FILES:
        cadence = max(cadence, ORPHAN_CADENCE_HOURS)
    last = history.last_succeeded.get(action)
    if last is None:
        return None
    elapsed = max(0.0, (now - _utc(last)).total_seconds() / 3600)
    if elapsed >= cadence:
        return None
    return f"cadence not elapsed: last ran {elapsed:.1f} h ago, cadence {cadence:g} h"


def _no_effect_gate(action: MaintenanceAction, status: TableStatus, history: TableHistory) -> str | None:
    """An action whose last run on this very snapshot did nothing would do nothing again."""
    if status.snapshot_id is None or history.no_effect_on.get(action) != status.snapshot_id:
        return None
    return (
        f"its last run on this same table state (snapshot {status.snapshot_id}) had no effect; "
        "not repeated until the table changes"
    )


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
    now = _utc(now)
    gate = _table_gate(status, health, policy, history)
    if gate is not None:
        skipped_all = tuple(SkippedAction(action=a, reason=gate) for a in ACTION_ORDER)
        return Recommendation(table=status.table, skipped=skipped_all)
    gc_disabled = not gc_enabled(status.properties)
    planner = _Planner(status, health, policy, now)
    actions: list[RecommendedAction] = []
    skipped: list[SkippedAction] = []
    gains: list[_Gain] = []
    for action in ACTION_ORDER:
        reason: str | None = None
        if not policy.action_enabled(action):
            reason = f"disabled by policy (icepack.action.{action}.enabled=false)"
        elif action.destructive and gc_disabled:
            reason = gc_disabled_reason(status.properties.get(GC_ENABLED))
        else:
            reason = (
                unreadable_for(action, status.properties)
                or (None if ignore_cadence else _cadence_gate(action, policy, history, now))
                or _no_effect_gate(action, status, history)
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
                        priority=_priority([plan.gain], policy.priority_boost),
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
        priority=_priority(gains, policy.priority_boost),
        expected_files_removed=sum(g.files_removed for g in gains),
        expected_bytes_reclaimed=sum(g.bytes_reclaimed for g in gains),
        estimated_bytes_to_rewrite=sum(g.bytes_to_rewrite for g in gains),
    )
