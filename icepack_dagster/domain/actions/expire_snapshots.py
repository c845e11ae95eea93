"""`expire_snapshots`: dropping snapshots older than the policy's age beyond the newest it keeps, and
the files only they reference. Its options, its plan (which snapshots Iceberg will expire with the
rendered `older_than` and `retain_last`, branch by branch and tag by tag as `snapshot_graph` predicts),
its guard (never keep less than the table's own `history.expire.*`, unless the table's owner chose to)
and how its output is counted. It deletes files, so a table with gc.enabled false never gets it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from icepack_dagster.domain.actions.definition import (
    ActionDefinition,
    ActionEstimate,
    Gain,
    PlanningContext,
    ProcedureOption,
    whole_table_estimate,
)
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.option_values import (
    boolean,
    int_between,
    iso_seconds,
    parse_timestamp,
    timestamp,
)
from icepack_dagster.domain.actions.planners.compaction import RewritePrediction
from icepack_dagster.domain.health.judging import format_hours
from icepack_dagster.domain.outcomes.commit_invariants import EXPIRY_RULES
from icepack_dagster.domain.policy.model import Policy
from icepack_dagster.domain.table.iceberg_properties import (
    MAX_REF_AGE_MS,
    MAX_SNAPSHOT_AGE_MS,
    MIN_SNAPSHOTS_TO_KEEP,
    iceberg_value,
    retention_floor,
)
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.snapshot_graph import SnapshotGraph, expired_by_iceberg
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.exceptions import InvalidProcedureOptionError, UnsafeMaintenanceError

MAX_LISTED_REFS = 5
OPTIONS = {
    "older_than": ProcedureOption(timestamp, "timestamp"),
    # up to any history.expire.min-snapshots-to-keep
    "retain_last": ProcedureOption(int_between(1, 2**31 - 1)),
    "max_concurrent_deletes": ProcedureOption(int_between(1, 1000)),
    "stream_results": ProcedureOption(boolean),
    "clean_expired_metadata": ProcedureOption(boolean, min_runtime=(1, 10, 0)),  # absent from 1.8.1
}


def plan(context: PlanningContext) -> ActionEstimate | str:
    """The expiry to run, or why there is nothing to expire: predicted snapshot by snapshot from the
    snapshot graph, else (a status measured before the graph was) estimated from the snapshot ages."""
    status, policy, now = context.status, context.policy, context.now
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
    options = {"older_than": iso_seconds(cutoff), "retain_last": str(keep)}
    if policy.clean_expired_metadata:
        options["clean_expired_metadata"] = "true"
        reason += "; partition specs and schemas no retained snapshot uses are removed with them"
    return ActionEstimate(
        reason + _own_settings(graph),
        options,
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


def guard(
    key: TableKey, options: Mapping[str, str], properties: Mapping[str, str], now: datetime
) -> None:
    """Refuse an expiry that keeps less than the table's own history.expire.* would, unless the table's
    owner chose to through icepack.snapshot.* (a stale plan, made before the property changed)."""
    keep, hours = retention_floor(properties)
    retain = options.get("retain_last", "")  # malformed values are refused when the call is rendered
    owner_count, owner_age = "icepack.snapshot.retain-last", "icepack.snapshot.max-age-hours"
    if keep is not None and owner_count not in properties and retain.isdecimal() and int(retain) < keep:
        raise UnsafeMaintenanceError(
            f"table {key.text}: expire_snapshots refused: retain_last {retain} is fewer than the table's "
            f"{MIN_SNAPSHOTS_TO_KEEP}={keep}, which Iceberg itself keeps; set {owner_count} to keep fewer"
        )
    older = options.get("older_than")
    if hours is not None and owner_age not in properties and older is not None:
        try:
            older_than = parse_timestamp(older)
        except ValueError as error:
            raise InvalidProcedureOptionError(key.text, "older_than", older, str(error)) from None
        if (now - older_than).total_seconds() / 3600 < hours:
            raise UnsafeMaintenanceError(
                f"table {key.text}: expire_snapshots refused: older_than {older_than.isoformat()} is younger "
                f"than the table's {MAX_SNAPSHOT_AGE_MS} ({hours:g} h), which Iceberg itself keeps; set "
                f"{owner_age} to keep less"
            )


DEFINITION: ActionDefinition = ActionDefinition(
    action=MaintenanceAction.EXPIRE_SNAPSHOTS,
    plan=plan,
    options=OPTIONS,
    destructive=True,
    reads_properties=(MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP, MAX_REF_AGE_MS),
    guard=guard,
    output_fields=("deleted_manifest_lists_count", None, None),
    expires_snapshots=True,
    commit_rules=EXPIRY_RULES,
)
