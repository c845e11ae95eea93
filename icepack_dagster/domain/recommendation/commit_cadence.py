"""When a table whose maintenance conflicted with a concurrent writer is tried again, read from how
often the table is committed to (its snapshots' commit times), and what would stop the conflicts.

A conflict is no failure: the other writer's commit stands and the maintenance committed nothing. Trying
again at once would most likely meet the next commit too, so the next attempt waits for a quiet moment:
no commit for as long as the table's usual gap between commits (the median of its newest gaps, at least
`MIN_QUIET_SECONDS`, at most `MAX_QUIET_SECONDS`). A table written at a steady pace may never go quiet
that long, so the wait also ends after a backoff that doubles with each conflict in a row (from
`FIRST_BACKOFF_SECONDS` up to `MAX_BACKOFF_SECONDS`). The reason given names the cadence and what would
help: a maintenance window when writers pause, or hot partitions left out of compaction (from the
second conflict in a row compaction widens its hot window by itself: `rewrite_data_files.hot_window_minutes`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from statistics import median

from pydantic import BaseModel, ConfigDict, Field

from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.table.snapshot_graph import SnapshotGraph

MIN_QUIET_SECONDS = 60.0
MAX_QUIET_SECONDS = 3600.0
FIRST_BACKOFF_SECONDS = 15 * 60.0
MAX_BACKOFF_SECONDS = 24 * 3600.0
CADENCE_SAMPLE = 20  # the newest commits the cadence is measured on
KEEPS_CONFLICTING = 3  # from this many conflicts in a row the reason says what would help


class CommitCadence(BaseModel):
    """How often a table is committed to, from its newest snapshots' commit times."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    commits: int = Field(ge=0, description="Snapshots the cadence was measured on")
    median_gap_seconds: float | None = Field(default=None, ge=0)
    last_commit_at: datetime | None = None

    def describe(self) -> str:
        if self.median_gap_seconds is None or self.last_commit_at is None:
            return "too few snapshots to measure how often it is committed to"
        return (
            f"commits every {_span(self.median_gap_seconds)} (median of its last {self.commits - 1} gaps)"
        )


def commit_cadence(graph: SnapshotGraph | None) -> CommitCadence:
    """The cadence over the newest `CADENCE_SAMPLE` snapshots (icepack's own commits included: they
    conflict as much as anyone's)."""
    times = sorted(s[2] for s in graph.snapshots)[-CADENCE_SAMPLE:] if graph else []
    if len(times) < 2:
        return CommitCadence(commits=len(times))
    gaps = [(later - earlier) / 1000 for earlier, later in zip(times, times[1:], strict=False)]
    return CommitCadence(
        commits=len(times),
        median_gap_seconds=median(gaps),
        last_commit_at=datetime.fromtimestamp(times[-1] / 1000, tz=UTC),
    )


def quiet_needed_seconds(cadence: CommitCadence) -> float:
    gap = cadence.median_gap_seconds if cadence.median_gap_seconds is not None else MIN_QUIET_SECONDS
    return min(max(gap, MIN_QUIET_SECONDS), MAX_QUIET_SECONDS)


def backoff_seconds(conflicts: int) -> float:
    return min(FIRST_BACKOFF_SECONDS * 2 ** max(conflicts - 1, 0), MAX_BACKOFF_SECONDS)


def conflict_wait(history: TableHistory, graph: SnapshotGraph | None, now: datetime) -> str | None:
    """Why the table's maintenance waits after conflicting with a concurrent writer; None when it may
    run: it has not conflicted, the table has been quiet long enough, or the backoff has passed."""
    if not history.consecutive_conflicts or history.last_conflict_at is None:
        return None
    cadence = commit_cadence(graph)
    quiet = quiet_needed_seconds(cadence)
    backoff = timedelta(seconds=backoff_seconds(history.consecutive_conflicts))
    resume_at = _utc(history.last_conflict_at) + backoff
    since_commit = (now - cadence.last_commit_at).total_seconds() if cadence.last_commit_at else None
    if now >= resume_at or (since_commit is not None and since_commit >= quiet):
        return None
    last = f"last commit {_span(since_commit)} ago" if since_commit is not None else "no commit measured"
    reason = (
        f"waiting for a quieter moment: the last {history.consecutive_conflicts} maintenance(s) conflicted "
        f"with a concurrent writer ({history.last_conflict or 'no detail recorded'}); the table "
        f"{cadence.describe()}, {last}; it runs once the table has had no commit for {_span(quiet)}, "
        f"or at {resume_at:%Y-%m-%d %H:%M} UTC at the latest"
    )
    if history.consecutive_conflicts >= KEEPS_CONFLICTING:
        reason += f"; {what_would_help(cadence)}"
    return reason


def what_would_help(cadence: CommitCadence) -> str:
    """Advice for a table whose maintenance keeps conflicting."""
    return (
        "what would help: a maintenance window when its writers pause (icepack.maintenance.window), "
        "and for compaction leaving the partitions being written out (icepack.compaction.hot-minutes "
        "longer than the writers' reach back; meanwhile the window widens with each conflict in a row; "
        f"the table {cadence.describe()})"
    )


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
