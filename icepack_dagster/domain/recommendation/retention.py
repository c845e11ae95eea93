"""The destructive actions' plans: `expire_snapshots` (which snapshots Iceberg will expire with the
rendered `older_than` and `retain_last`, branch by branch and tag by tag as `snapshot_graph` predicts)
and `remove_orphan_files` (looked for on a weekly cadence, since orphans are invisible in metadata)."""

from __future__ import annotations

from datetime import datetime, timedelta

from icepack_dagster.domain.actions.compaction_planner import RewritePrediction
from icepack_dagster.domain.health.judging import format_hours
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.recommendation.estimate import ActionEstimate, Gain, whole_table_estimate
from icepack_dagster.domain.recommendation.gates import ORPHAN_CADENCE_HOURS
from icepack_dagster.domain.table.iceberg_properties import MAX_REF_AGE_MS, iceberg_value
from icepack_dagster.domain.table.snapshot_graph import SnapshotGraph, expired_by_iceberg
from icepack_dagster.domain.table.status import TableStatus

MAX_LISTED_REFS = 5


def iso_seconds(moment: datetime) -> str:
    """ISO 8601 in UTC, floored to the second: flooring only ever keeps more, never deletes more."""
    return moment.replace(microsecond=0).isoformat(timespec="seconds")


def plan_expiry(status: TableStatus, policy: Policy, now: datetime) -> ActionEstimate | str:
    """The expiry to run, or why there is nothing to expire: predicted snapshot by snapshot from the
    snapshot graph, else (a status measured before the graph was) estimated from the snapshot ages."""
    if status.snapshot_graph is not None:
        return _planned_expiry(status, status.snapshot_graph, policy, now)
    return _estimated_expiry(status, policy, now)


def _own_settings(graph: SnapshotGraph) -> str:
    """The refs that carry their own retention, which Iceberg honours over the call's options."""
    own = [
        ref.name for ref in graph.refs
        if ref.min_snapshots_to_keep is not None or ref.max_snapshot_age_ms is not None
        or ref.max_ref_age_ms is not None
    ]
    if not own:
        return ""
    shown = ", ".join(own[:MAX_LISTED_REFS]) + (" and more" if len(own) > MAX_LISTED_REFS else "")
    return f"; refs with their own retention, which Iceberg honours: {shown}"


def _planned_expiry(
    status: TableStatus, graph: SnapshotGraph, policy: Policy, now: datetime
) -> ActionEstimate | str:
    keep, max_age = policy.snapshot_retain_last, policy.snapshot_max_age_hours
    # Iceberg expires snapshots committed strictly before `older_than`, floored to the second here.
    cutoff = (now - timedelta(hours=max_age)).replace(microsecond=0)
    max_ref_age = int(iceberg_value(status.properties, MAX_REF_AGE_MS).value)
    forecast = expired_by_iceberg(
        graph, int(now.timestamp() * 1000), int(cutoff.timestamp() * 1000), keep, max_ref_age
    )
    count, expired = len(graph.snapshots), len(forecast.expired)
    if not expired and not forecast.dropped_refs:
        oldest_ms = min(s[2] for s in graph.snapshots)
        if oldest_ms >= int(cutoff.timestamp() * 1000):
            oldest = (now.timestamp() * 1000 - oldest_ms) / 3_600_000
            return (
                f"the oldest of {count} snapshots is {format_hours(max(0.0, oldest))} old, within "
                f"snapshot_max_age_hours {max_age:g}; lower icepack.snapshot.max-age-hours to expire them"
            )
        return (
            f"none of {count} snapshots would be expired: every one older than {format_hours(max_age)} is "
            f"among the newest {keep} a branch keeps or is kept by a tag{_own_settings(graph)}"
        )
    reason = (
        f"{expired} of {count} snapshots would be expired: older than {format_hours(max_age)} and beyond "
        f"the newest {keep} each branch keeps, as Iceberg walks every branch and keeps every tag"
    )
    if forecast.dropped_refs:
        reason += f"; refs older than their max-ref-age would be dropped: {', '.join(forecast.dropped_refs)}"
    return ActionEstimate(
        reason + _own_settings(graph),
        {"older_than": iso_seconds(cutoff), "retain_last": str(keep)},
        Gain(files_removed=expired),  # at least each expired snapshot's manifest list
        RewritePrediction(files_in=expired),  # one manifest list deleted per expired snapshot
    )


def _estimated_expiry(status: TableStatus, policy: Policy, now: datetime) -> ActionEstimate | str:
    s, p = status, policy
    count, keep, max_age = s.snapshot_count, p.snapshot_retain_last, p.snapshot_max_age_hours
    if count <= keep:
        return f"{count} snapshots, no more than snapshot_retain_last {keep}"
    oldest = (s.oldest_snapshot_age_seconds or 0.0) / 3600
    newest = (s.newest_snapshot_age_seconds or 0.0) / 3600
    # Iceberg expires snapshots committed strictly before `older_than`, which is floored to the
    # second: a snapshot must be older than the age that cutoff stands for, not just max_age.
    cutoff = (now - timedelta(hours=max_age)).replace(microsecond=0)
    needed = (now - cutoff).total_seconds() / 3600
    if oldest <= needed:
        return (
            f"the oldest of {count} snapshots is {format_hours(oldest)} old, within "
            f"snapshot_max_age_hours {max_age:g}; lower icepack.snapshot.max-age-hours to expire them"
        )
    # Ages are only known at the ends: assume commits spread evenly in between.
    share = (oldest - needed) / (oldest - newest) if oldest > newest else 1.0
    expired = min(count - keep, max(1, round(count * share)))
    return ActionEstimate(
        f"about {expired} of {count} snapshots are older than {format_hours(max_age)} "
        f"(oldest {format_hours(oldest)}) beyond the newest {keep} kept",
        {"older_than": iso_seconds(cutoff), "retain_last": str(keep)},
        Gain(files_removed=expired),  # at least each expired snapshot's manifest list
        whole_table_estimate(expired),  # one manifest list deleted per expired snapshot
    )


def plan_orphan_sweep(policy: Policy, now: datetime) -> ActionEstimate:
    hours = policy.orphan_older_than_hours
    return ActionEstimate(
        "files no snapshot references cannot be seen in metadata; they are looked for at most "
        f"every {format_hours(ORPHAN_CADENCE_HOURS)}, keeping any younger than {format_hours(hours)}",
        {"older_than": iso_seconds(now - timedelta(hours=hours))},
    )
