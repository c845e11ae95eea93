"""Contract: each circuit breaker pauses a table's rewrites (never its expiry or orphan removal), says
which breaker tripped with which numbers and how the pause ends, and lifts as its policy says:
- write amplification: more than 10x the table's live bytes read by its rewrites in the last day;
- same files rewritten: the same action's last 3 rewrites each rewrote the table as the one before left
  it (nothing but icepack's own commits in between, followed through the snapshots); a writer's commit
  in between, or a release (the history then counts from zero: tests/store/test_history_store.py),
  lifts it;
- the fleet's daily budget: held once the deployment's rewrites of the UTC day reach it; lifted by the
  day rolling (a new day counts from zero) or a larger budget.
Real rewrites feeding the history: tests/engine/test_circuit_breakers.py."""

from __future__ import annotations

from datetime import date, timedelta

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.domain.outcomes.history import RecentRewrite, TableHistory
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.recommendation.circuit_breakers import (
    BREAKER,
    RewriteBudget,
    amplification_breaker,
    budget_breaker,
    same_data_rewrites,
    same_files_breaker,
)
from icepack_dagster.domain.recommendation.recommender import recommend
from icepack_dagster.domain.table.snapshot_graph import SnapshotGraph
from icepack_dagster.domain.table.status import TableStatus
from tests.factories import NOW, make_health, make_status

MiB = 1024**2
GiB = 1024 * MiB
REWRITE = MaintenanceAction.REWRITE_DATA_FILES
STATUS = make_status(
    live_data_bytes=100 * MiB, small_file_count=8, small_file_bytes=8 * MiB, live_data_files=10
)


def rewritten(size: int) -> TableHistory:
    return TableHistory(table="lake.ns.t", bytes_rewritten_24h=size)


def test_the_breaker_trips_above_ten_times_the_table_and_names_the_numbers() -> None:
    assert amplification_breaker(REWRITE, STATUS, rewritten(1000 * MiB)) is None
    tripped = amplification_breaker(REWRITE, STATUS, rewritten(1001 * MiB))
    assert tripped is not None and tripped.startswith("circuit breaker (write amplification) tripped: ")
    assert "1001 MiB rewritten in the last 24 h, more than 10x the table's 100 MiB" in tripped
    assert "icepack quarantine release lake.ns.t" in tripped
    assert amplification_breaker(MaintenanceAction.EXPIRE_SNAPSHOTS, STATUS, rewritten(10**12)) is None


def test_a_tripped_breaker_shows_in_the_recommendation() -> None:
    health = make_health(HealthState.CRITICAL)
    paused = recommend(STATUS, health, Policy(), rewritten(10**12), NOW)
    reasons = {s.action: s.reason for s in paused.skipped}
    assert reasons[MaintenanceAction.REWRITE_DATA_FILES].startswith("circuit breaker (write amplification)")
    assert MaintenanceAction.REWRITE_DATA_FILES not in {a.action for a in paused.actions}


# --- same files rewritten -----------------------------------------------------------------------------
def _ms(minutes_ago: float) -> int:
    return int((NOW - timedelta(minutes=minutes_ago)).timestamp() * 1000)


def chain(*commits: tuple[int, float]) -> tuple[TableStatus, SnapshotGraph]:
    """A table whose main is the snapshots (id, committed minutes ago) in order, each the next's parent,
    with small files to compact."""
    snapshots = tuple(
        (sid, commits[i - 1][0] if i else None, _ms(ago)) for i, (sid, ago) in enumerate(commits)
    )
    graph = SnapshotGraph(snapshots=snapshots)
    status = make_status(
        snapshot_id=commits[-1][0], snapshot_graph=graph, live_data_bytes=100 * MiB, live_data_files=10,
        small_file_count=8, small_file_bytes=8 * MiB, snapshot_count=len(commits),
    )
    return status, graph


def ran(planned_on: int, minutes_ago: float, files: int = 8) -> RecentRewrite:
    return RecentRewrite(
        action=REWRITE, planned_on=planned_on, finished_at=NOW - timedelta(minutes=minutes_ago),
        files_rewritten=files, bytes_rewritten=files * MiB,
    )


def history_of(*runs: RecentRewrite) -> TableHistory:
    size = sum(r.bytes_rewritten for r in runs)
    return TableHistory(table="lake.ns.t", recent_rewrites=runs, bytes_rewritten_24h=size)


# A writer's append (1), then three rewrites, each planned on what the one before committed: the first
# on 1 committed 2 (and a manifest rewrite of the same maintenance 3), the second on 3 committed 4, the
# third on 4 committed 5.
STATUS_LOOPING, _ = chain((1, 300), (2, 240), (3, 239), (4, 180), (5, 120))
LOOPING = history_of(ran(4, 119, files=7), ran(3, 179, files=7), ran(1, 238, files=8))


def test_three_rewrites_of_the_same_data_trip_the_breaker_with_the_numbers() -> None:
    assert len(same_data_rewrites(REWRITE, STATUS_LOOPING, LOOPING)) == 3
    tripped = same_files_breaker(REWRITE, STATUS_LOOPING, LOOPING)
    assert tripped is not None and tripped.startswith(f"{BREAKER}same files rewritten) tripped: ")
    assert "rewrite_data_files rewrote this table 3 times in a row in the last 24 h (8, 7, 7 files, " \
        "22 MiB) with no other commit in between" in tripped
    assert "paused until 2025-03-15 08:02 UTC" in tripped  # the oldest of the three leaves the window
    assert "icepack quarantine release lake.ns.t" in tripped
    assert same_files_breaker(MaintenanceAction.EXPIRE_SNAPSHOTS, STATUS_LOOPING, LOOPING) is None
    paused = recommend(STATUS_LOOPING, make_health(HealthState.CRITICAL), Policy(), LOOPING, NOW)
    assert {s.action: s.reason for s in paused.skipped}[REWRITE] == tripped


def test_two_rewrites_in_a_row_are_below_the_limit() -> None:
    two = history_of(*LOOPING.recent_rewrites[:2])
    assert len(same_data_rewrites(REWRITE, STATUS_LOOPING, two)) == 2
    assert same_files_breaker(REWRITE, STATUS_LOOPING, two) is None


def test_a_writer_s_commit_in_between_means_new_data_and_no_trip() -> None:
    # as LOOPING, but a writer appended (snapshot 35) after the first rewrite finished
    status, _ = chain((1, 300), (2, 240), (3, 239), (35, 200), (4, 180), (5, 120))
    history = history_of(ran(4, 119), ran(35, 179), ran(1, 238))
    assert len(same_data_rewrites(REWRITE, status, history)) == 2
    assert same_files_breaker(REWRITE, status, history) is None
    # and a writer's commit after the newest rewrite: the next rewrite would take new data
    after, _ = chain((1, 300), (2, 240), (3, 239), (4, 180), (5, 120), (6, 10))
    assert same_data_rewrites(REWRITE, after, LOOPING) == []


def test_an_expired_snapshot_or_another_action_breaks_the_streak() -> None:
    # snapshot 4 expired: the newest rewrite still leads from it to 5, the one before is not known
    graph = STATUS_LOOPING.snapshot_graph
    assert graph is not None
    kept = SnapshotGraph(snapshots=tuple(s for s in graph.snapshots if s[0] != 4))
    expired = STATUS_LOOPING.model_copy(update={"snapshot_graph": kept})
    assert len(same_data_rewrites(REWRITE, expired, LOOPING)) == 1
    deletes = MaintenanceAction.REWRITE_POSITION_DELETE_FILES
    assert same_files_breaker(deletes, STATUS_LOOPING, LOOPING) is None  # LOOPING's runs are data rewrites


def test_a_release_lifts_the_breaker() -> None:
    # the store reads only the rewrites since the release (tests/store/test_history_store.py)
    assert same_files_breaker(REWRITE, STATUS_LOOPING, history_of()) is None


# --- the fleet's daily budget ---------------------------------------------------------------------
def test_the_budget_holds_rewrites_once_reached_and_says_until_when() -> None:
    below = RewriteBudget(limit_bytes=10 * GiB, rewritten_bytes=10 * GiB - 1, day=date(2025, 3, 14))
    assert budget_breaker(REWRITE, below) is None
    assert budget_breaker(REWRITE, None) is None
    reached = below.model_copy(update={"rewritten_bytes": 10 * GiB})
    held = budget_breaker(REWRITE, reached)
    assert held is not None and held.startswith(f"{BREAKER}fleet daily budget) tripped: ")
    assert "10 GiB rewritten on 2025-03-14 (UTC) of a daily budget of 10 GiB" in held
    assert "ICEPACK_PLATFORM_DAILY_REWRITE_BUDGET_BYTES" in held and "held, not failed" in held
    assert budget_breaker(MaintenanceAction.EXPIRE_SNAPSHOTS, reached) is None
    health = make_health(HealthState.CRITICAL)
    paused = recommend(STATUS, health, Policy(), TableHistory(table="lake.ns.t"), NOW, budget=reached)
    assert {s.action: s.reason for s in paused.skipped}[REWRITE] == held
    assert recommend(STATUS, health, Policy(), TableHistory(table="lake.ns.t"), NOW, budget=below).actions
