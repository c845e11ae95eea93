"""Contract: after maintenance conflicted with a concurrent writer, the next recommendation waits for a
quiet moment read from the table's own commit times (no commit for its median gap, 60 s to 1 h), or
for a backoff that doubles with each conflict in a row (15 min up to a day), whichever comes first; the
wait says the cadence, and from the third conflict in a row what would help. A forced run does not
wait; a table that never conflicted never waits."""

from __future__ import annotations

from datetime import timedelta

from icepack_dagster.domain.actions.maintenance_action import ACTION_ORDER
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.recommendation.commit_cadence import (
    backoff_seconds,
    commit_cadence,
    conflict_wait,
)
from icepack_dagster.domain.recommendation.recommender import recommend
from icepack_dagster.domain.table.snapshot_graph import SnapshotGraph
from tests.factories import NOW, make_health, make_status

NOW_MS = int(NOW.timestamp() * 1000)


def every(seconds: float, commits: int, last_ago: float) -> SnapshotGraph:
    """A table committed every `seconds`, its newest commit `last_ago` seconds before NOW."""
    newest = NOW_MS - int(last_ago * 1000)
    times = [newest - int(i * seconds * 1000) for i in range(commits)]
    return SnapshotGraph(snapshots=tuple((i + 1, i + 2, t) for i, t in enumerate(times)))


def conflicted(times: int, minutes_ago: float = 1) -> TableHistory:
    return TableHistory(
        table="lake.ns.t",
        consecutive_conflicts=times,
        last_conflict_at=NOW - timedelta(minutes=minutes_ago),
        last_conflict="rewrite_manifests: conflict: a concurrent commit",
    )


def test_the_cadence_is_the_median_gap_of_the_newest_commits() -> None:
    cadence = commit_cadence(every(30, commits=10, last_ago=5))
    assert cadence.median_gap_seconds == 30 and cadence.commits == 10
    assert cadence.last_commit_at == NOW - timedelta(seconds=5)
    assert "commits every 30 s" in cadence.describe()
    assert commit_cadence(every(30, commits=1, last_ago=5)).median_gap_seconds is None


def test_a_table_written_every_30_s_waits_until_quiet_for_a_minute() -> None:
    history = conflicted(1)
    busy = conflict_wait(history, every(30, commits=10, last_ago=5), NOW)
    assert busy is not None and busy.startswith("waiting for a quieter moment")
    assert "commits every 30 s" in busy and "last commit 5 s ago" in busy and "no commit for 60 s" in busy
    assert "what would help" not in busy  # one conflict is no pattern yet
    assert conflict_wait(history, every(30, commits=10, last_ago=61), NOW) is None


def test_an_hourly_writer_needs_an_hour_of_quiet() -> None:
    assert conflict_wait(conflicted(1), every(3600, commits=5, last_ago=1800), NOW) is not None
    assert conflict_wait(conflicted(1), every(3600, commits=5, last_ago=3600), NOW) is None


def test_the_backoff_doubles_and_ends_the_wait_on_a_table_that_never_goes_quiet() -> None:
    assert [backoff_seconds(n) for n in (1, 2, 3)] == [900, 1800, 3600]
    assert backoff_seconds(20) == 24 * 3600
    steady = every(10, commits=20, last_ago=1)
    assert conflict_wait(conflicted(2, minutes_ago=29), steady, NOW) is not None
    assert conflict_wait(conflicted(2, minutes_ago=30), steady, NOW) is None


def test_a_table_that_keeps_conflicting_is_told_what_would_help() -> None:
    reason = conflict_wait(conflicted(3), every(30, commits=10, last_ago=5), NOW)
    assert reason is not None
    assert "the last 3 maintenance(s) conflicted" in reason
    assert "icepack.maintenance.window" in reason and "icepack.compaction.hot-minutes" in reason


def test_the_recommendation_waits_unless_forced_and_never_without_a_conflict() -> None:
    status = make_status(snapshot_graph=every(30, commits=10, last_ago=5))
    health = make_health(HealthState.HEALTHY)
    waiting = recommend(status, health, Policy(), conflicted(1), NOW)
    assert waiting.actions == () and [s.action for s in waiting.skipped] == list(ACTION_ORDER)
    assert all(s.reason.startswith("waiting for a quieter moment") for s in waiting.skipped)
    forced = recommend(status, health, Policy(), conflicted(1), NOW, ignore_cadence=True)
    assert not any(s.reason.startswith("waiting") for s in forced.skipped)
    calm = recommend(status, health, Policy(), TableHistory.empty("lake.ns.t"), NOW)
    assert not any(s.reason.startswith("waiting") for s in calm.skipped)
