"""The destructive actions' plans: `expire_snapshots` (which snapshots Iceberg will expire with the
rendered `older_than` and `retain_last`) and `remove_orphan_files` (looked for on a weekly cadence,
since orphans are invisible in metadata)."""

from __future__ import annotations

from datetime import datetime, timedelta

from icepack_dagster.domain.health import format_hours
from icepack_dagster.domain.policy import Policy
from icepack_dagster.domain.recommendation_gates import ORPHAN_CADENCE_HOURS
from icepack_dagster.domain.recommendation_plan import ActionPlan, Gain, whole_table_estimate
from icepack_dagster.domain.status import TableStatus


def iso_seconds(moment: datetime) -> str:
    """ISO 8601 in UTC, floored to the second: flooring only ever keeps more, never deletes more."""
    return moment.replace(microsecond=0).isoformat(timespec="seconds")


def plan_expiry(status: TableStatus, policy: Policy, now: datetime) -> ActionPlan | str:
    """The expiry to run, or why there is nothing to expire."""
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
    return ActionPlan(
        f"about {expired} of {count} snapshots are older than {format_hours(max_age)} "
        f"(oldest {format_hours(oldest)}) beyond the newest {keep} kept",
        {"older_than": iso_seconds(cutoff), "retain_last": str(keep)},
        Gain(files_removed=expired),  # at least each expired snapshot's manifest list
        whole_table_estimate(expired),  # one manifest list deleted per expired snapshot
    )


def plan_orphan_sweep(policy: Policy, now: datetime) -> ActionPlan:
    hours = policy.orphan_older_than_hours
    return ActionPlan(
        "files no snapshot references cannot be seen in metadata; they are looked for at most "
        f"every {format_hours(ORPHAN_CADENCE_HOURS)}, keeping any younger than {format_hours(hours)}",
        {"older_than": iso_seconds(now - timedelta(hours=hours))},
    )
