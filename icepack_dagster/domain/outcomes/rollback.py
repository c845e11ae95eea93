"""The guarded rollback of a maintenance: main goes back to the snapshot the maintenance was planned on,
only when every snapshot committed on main since is that maintenance's own (a `replace` committed while
it ran). Anything else committed since (a writer's append, delete or overwrite, or any commit after the
maintenance ended) would be lost by going back, so the rollback refuses and lists what happened since.

Only rewrites commit snapshots that can be undone: snapshot expiry and orphan removal delete files, and
no rollback brings those back.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from icepack_dagster.domain.outcomes.commit_invariants import CLOCK_SKEW_MS, SnapshotFacts, TableFacts


class RollbackPlan(BaseModel):
    """What a rollback would do, or why it refuses."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table: str
    dry_run: bool = False
    restore_to: int | None = Field(default=None, description="The snapshot main goes back to")
    from_snapshot: int | None = Field(default=None, description="main's head before the rollback")
    undone: tuple[str, ...] = Field(default=(), description="The maintenance's snapshots it undoes")
    refused: str | None = None
    since: tuple[str, ...] = Field(default=(), description="What else was committed since, when refused")
    done: bool = False

    def describe(self) -> str:
        if self.refused is not None:
            listed = "".join(f"\n  - {line}" for line in self.since)
            return f"table {self.table}: rollback refused: {self.refused}{listed}"
        verb = "would restore" if self.dry_run else ("restored" if self.done else "restores")
        undone = "".join(f"\n  - {line}" for line in self.undone)
        return (f"table {self.table}: {verb} snapshot {self.restore_to} as main's head (from "
                f"{self.from_snapshot}), undoing the maintenance's {len(self.undone)} commit(s):{undone}")


def _line(snapshot: SnapshotFacts) -> str:
    at = datetime.fromtimestamp(snapshot.timestamp_ms / 1000, tz=UTC).isoformat(timespec="seconds")
    return f"{snapshot.describe()} at {at}"


def plan_rollback(
    table: str,
    planned_on: int | None,
    started_at: datetime | None,
    finished_at: datetime | None,
    facts: TableFacts,
    dry_run: bool = False,
) -> RollbackPlan:
    """The rollback of the maintenance planned on snapshot `planned_on` that ran from `started_at` to
    `finished_at`, on the table as `facts` show it now."""
    plan = RollbackPlan(table=table, dry_run=dry_run, from_snapshot=facts.current_snapshot_id)
    if planned_on is None or started_at is None or finished_at is None:
        return plan.model_copy(update={"refused": "no maintenance that committed snapshots is recorded"})
    chain: list[SnapshotFacts] = []
    current = facts.current_snapshot_id
    while current is not None and current != planned_on:
        snapshot = facts.snapshots.get(current)
        if snapshot is None:
            break
        chain.append(snapshot)
        current = snapshot.parent_id
    if current != planned_on:
        return plan.model_copy(update={
            "refused": f"snapshot {planned_on}, which the last maintenance was planned on, is no longer an "
                       "ancestor of main (expired, or main was reset): nothing to go back to",
        })
    if not chain:
        return plan.model_copy(update={"refused": f"main is still at snapshot {planned_on}, which the last "
                                                  "maintenance was planned on: it committed nothing to undo"})
    low = int(started_at.timestamp() * 1000) - CLOCK_SKEW_MS
    high = int(finished_at.timestamp() * 1000) + CLOCK_SKEW_MS
    others = [s for s in chain if s.operation != "replace" or not low <= s.timestamp_ms <= high]
    if others:
        return plan.model_copy(update={
            "refused": f"{len(others)} snapshot(s) were committed on main since the maintenance that are not "
                       "its own; going back would drop them. Restore by hand (Iceberg's rollback_to_snapshot "
                       "or cherrypick_snapshot) once you know which changes to keep",
            "since": tuple(_line(s) for s in reversed(others)),
        })
    undone = tuple(_line(s) for s in reversed(chain))
    return plan.model_copy(update={"restore_to": planned_on, "undone": undone})
