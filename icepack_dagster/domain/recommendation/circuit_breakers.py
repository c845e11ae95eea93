"""Circuit breakers on rewrites: a table whose maintenance keeps rewriting the same data is caught in a
loop, not being maintained, and a fleet's maintenance may rewrite only so much a day. Each breaker
pauses rewrites only (expiry and orphan removal rewrite nothing and go on); its reason starts with
`BREAKER` and says which breaker tripped, with which numbers, and how the pause ends.

- **Write amplification**: when the bytes a table's rewrites read in the last 24 hours (the
  procedures' own `rewritten_bytes_count`, from the history's predicted-against-done rows) exceed
  `AMPLIFICATION_LIMIT` times the table's live bytes.
- **Same files rewritten**: when icepack's last `REPEAT_LIMIT` rewrites by one action each rewrote the
  table as the one before left it: between the snapshot each was planned on and the next one's (the
  table's current snapshot for the newest), main holds only commits made before that rewrite finished
  (its own and its maintenance's). With no other writer in between, every file a rewrite took was one
  the rewrite before wrote or left: the same data, rewritten again. A clock skew between Spark and
  icepack, snapshots expired, or another maintenance's commit in between only make it count fewer.
- **Fleet daily budget**: when the bytes all of the deployment's rewrites read since 00:00 UTC reach
  `ICEPACK_PLATFORM_DAILY_REWRITE_BUDGET_BYTES` (off unless set), further rewrites are held, not failed,
  until the day rolls. A rewrite already running finishes, so a day may end above the budget by the
  rewrites in flight.

The two per-table breakers expire as their 24-hour window moves on, or a person lifts them at once with
`icepack quarantine release` (the history counts from the release on); the budget lifts at 00:00 UTC,
or when the setting is raised.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from pydantic import Field

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.registry import ACTIONS
from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.health.judging import format_bytes
from icepack_dagster.domain.outcomes.history import RecentRewrite, TableHistory
from icepack_dagster.domain.table.status import TableStatus

BREAKER = "circuit breaker ("  # every breaker's reason starts so: the CLI, fleet view and UI find them
AMPLIFICATION, SAME_FILES, FLEET_BUDGET = "write amplification", "same files rewritten", "fleet daily budget"
AMPLIFICATION_LIMIT = 10  # rewritten bytes per 24 h, as a multiple of the table's live data bytes
REPEAT_LIMIT = 3  # rewrites in a row of the same data by one action
# The actions whose rewritten bytes count (each action's module says: `counts_rewritten_bytes`).
REWRITES = tuple(d.action for d in ACTIONS if d.counts_rewritten_bytes)
WINDOW_HOURS = 24
BUDGET_SETTING = "ICEPACK_PLATFORM_DAILY_REWRITE_BUDGET_BYTES"


class RewriteBudget(FrozenModel):
    """The deployment's daily budget of rewritten bytes and what its rewrites read so far that day."""

    limit_bytes: int = Field(gt=0)
    rewritten_bytes: int = Field(ge=0, description="Bytes the deployment's rewrites read since 00:00 UTC")
    day: date = Field(description="The UTC day counted")

    @property
    def reached(self) -> bool:
        return self.rewritten_bytes >= self.limit_bytes

    def describe(self) -> str:
        return (
            f"{format_bytes(self.rewritten_bytes)} rewritten on {self.day.isoformat()} (UTC) of a daily "
            f"budget of {format_bytes(self.limit_bytes)}"
        )


def _release_hint(table: str) -> str:
    return f"or a person lifts it with `icepack quarantine release {table}` (or the release_quarantine job)"


def amplification_breaker(
    action: MaintenanceAction, status: TableStatus, history: TableHistory
) -> str | None:
    """Why `action` is paused by the write-amplification breaker, or None."""
    if action not in REWRITES:
        return None
    size = status.live_data_bytes + status.live_delete_bytes
    limit = AMPLIFICATION_LIMIT * max(size, 1)
    if history.bytes_rewritten_24h <= limit:
        return None
    return (
        f"{BREAKER}{AMPLIFICATION}) tripped: {format_bytes(history.bytes_rewritten_24h)} "
        f"rewritten in the last {WINDOW_HOURS} h, more than {AMPLIFICATION_LIMIT}x the table's "
        f"{format_bytes(size)}; rewrites pause until the window drops below that, "
        f"{_release_hint(status.table)}"
    )


def same_data_rewrites(
    action: MaintenanceAction, status: TableStatus, history: TableHistory
) -> list[RecentRewrite]:
    """icepack's newest rewrites by `action` in a row (newest first) that each rewrote the table as the
    rewrite before left it, nothing but its own maintenance committing in between."""
    graph = status.snapshot_graph
    if graph is None or status.snapshot_id is None:
        return []
    parents = {snapshot: (parent, committed) for snapshot, parent, committed in graph.snapshots}
    head = status.snapshot_id
    streak: list[RecentRewrite] = []
    for run in (r for r in history.recent_rewrites if r.action is action):
        if run.planned_on is None or not _only_its_commits(parents, head, run.planned_on, run.finished_at):
            break
        streak.append(run)
        head = run.planned_on
    return streak


def _only_its_commits(
    parents: dict[int, tuple[int | None, int]], head: int, planned_on: int, finished_at: datetime
) -> bool:
    """Whether main went from `planned_on` to `head` through at least one commit, each made before the
    rewrite planned on it finished (`finished_at`)."""
    finished_ms = finished_at.timestamp() * 1000
    current: int | None = head
    commits = 0
    while current != planned_on:
        if current is None or current not in parents or commits > len(parents):
            return False  # expired, or another history: not known to be the same data
        parent, committed = parents[current]
        if committed > finished_ms:
            return False
        current, commits = parent, commits + 1
    return commits > 0


def same_files_breaker(
    action: MaintenanceAction, status: TableStatus, history: TableHistory
) -> str | None:
    """Why `action` is paused by the same-files breaker, or None."""
    if action not in REWRITES:
        return None
    streak = same_data_rewrites(action, status, history)
    if len(streak) < REPEAT_LIMIT:
        return None
    files = ", ".join(str(r.files_rewritten) for r in reversed(streak))
    size = format_bytes(sum(r.bytes_rewritten for r in streak))
    ends = streak[REPEAT_LIMIT - 1].finished_at + timedelta(hours=WINDOW_HOURS)  # the streak drops below
    return (
        f"{BREAKER}{SAME_FILES}) tripped: {action} rewrote this table {len(streak)} times in a row "
        f"in the last {WINDOW_HOURS} h ({files} files, {size}) "
        f"with no other commit in between, so each took files the one before wrote or left, "
        f"{REPEAT_LIMIT} is the limit; paused until {_utc_text(ends)}, {_release_hint(status.table)}"
    )


def budget_breaker(action: MaintenanceAction, budget: RewriteBudget | None) -> str | None:
    """Why `action` is held by the fleet's daily byte budget, or None."""
    if budget is None or action not in REWRITES or not budget.reached:
        return None
    return (
        f"{BREAKER}{FLEET_BUDGET}) tripped: this deployment's maintenance has {budget.describe()} "
        f"({BUDGET_SETTING}); rewrites are held, not failed, until the day rolls at 00:00 UTC, or an "
        "operator raises the budget"
    )


def breaker_pause(
    action: MaintenanceAction, status: TableStatus, history: TableHistory, budget: RewriteBudget | None
) -> str | None:
    """Why `action` is paused by a circuit breaker (the first that trips), or None."""
    return (
        amplification_breaker(action, status, history)
        or same_files_breaker(action, status, history)
        or budget_breaker(action, budget)
    )


def breaker_pauses(
    status: TableStatus, history: TableHistory, budget: RewriteBudget | None
) -> dict[MaintenanceAction, str]:
    """Each rewrite a circuit breaker pauses on this table, with the reason: what the fleet view and
    `icepack quarantine show` list, whatever else holds the table."""
    paused = {action: breaker_pause(action, status, history, budget) for action in REWRITES}
    return {action: reason for action, reason in paused.items() if reason is not None}


def tripped_breaker(reason: str) -> str | None:
    """The name of the breaker a skip reason comes from, or None when no breaker gave it."""
    if not reason.startswith(BREAKER):
        return None
    return reason.removeprefix(BREAKER).split(")", 1)[0]


def _utc_text(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"
