"""Which tables a scheduled health sync writes: first, changed metadata, changed health, and periodic
rewrites (hourly for tables needing attention, daily for healthy ones), each table at its own moment
of the interval, so that over simulated days of 15-minute syncs no sync rewrites more than its share
of a run's tables (a quarter with the hourly interval), every table is rewritten once per interval,
and none sooner than half an interval after its last write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from icepack_dagster.domain.health.model import HealthState, Severity, TableHealth
from icepack_dagster.domain.health.sync_writes import (
    LastWrite,
    RewritePolicy,
    RewriteSlot,
    health_signature,
    write_reason,
)
from tests.factories import make_health, make_issue

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
POLICY = RewritePolicy(rewrite_hours=24.0, attention_hours=1.0)
TABLE = "lake.sales.orders"


HEALTHY = make_health(HealthState.HEALTHY, table=TABLE)
OLD_SNAPSHOTS = make_issue("OLD_SNAPSHOTS", Severity.WARNING, 200.0)
WARNING = make_health(HealthState.WARNING, OLD_SNAPSHOTS, table=TABLE)


def _last(health: TableHealth | None, hours_ago: float) -> LastWrite:
    return LastWrite(health=health, written_at=NOW - timedelta(hours=hours_ago))


SLOT = RewriteSlot(interval_hours=1.0, phase=0.5)  # due at half past each hour
SYNC = timedelta(minutes=15)


def test_first_and_unreadable_last_write_are_written() -> None:
    assert write_reason(HEALTHY, False, None, NOW, SLOT) == "first materialization"
    assert write_reason(HEALTHY, False, _last(None, 0.1), NOW, SLOT) == "first materialization"


def test_changed_metadata_is_written_even_with_the_same_health() -> None:
    assert write_reason(HEALTHY, True, _last(HEALTHY, 0.1), NOW, SLOT) == "metadata changed"


def test_health_signature_ignores_measured_values_but_not_codes_or_severity() -> None:
    older = WARNING.model_copy(update={"issues": (make_issue("OLD_SNAPSHOTS", Severity.WARNING, 190.0),)})
    assert health_signature(older) == health_signature(WARNING)
    critical = make_health(
        HealthState.CRITICAL, make_issue("OLD_SNAPSHOTS", Severity.CRITICAL, 800.0), table=TABLE
    )
    assert write_reason(critical, False, _last(WARNING, 0.1), NOW, SLOT) == "health changed"
    assert write_reason(WARNING, False, _last(older, 0.1), NOW, SLOT) is None
    other_error = make_health(HealthState.UNKNOWN, table=TABLE, error="catalog down")
    same_state = other_error.model_copy(update={"error": "table dropped"})
    assert write_reason(same_state, False, _last(other_error, 0.1), NOW, SLOT) == "health changed"


def test_a_change_of_whether_a_person_is_needed_is_written() -> None:
    """A quarantine (or its release) changes no health: the table is written so its needs_operator
    check follows; a last write from before the check counts as "no", so an upgrade rewrites nothing."""
    quarantined = LastWrite(HEALTHY, NOW - timedelta(hours=0.1), operator_verdict="quarantined")
    assert write_reason(HEALTHY, False, _last(HEALTHY, 0.1), NOW, SLOT, "quarantined") == (
        "needs a person changed (no -> quarantined)"
    )
    released = write_reason(HEALTHY, False, quarantined, NOW, SLOT)
    assert released == "needs a person changed (quarantined -> no)"
    assert write_reason(HEALTHY, False, quarantined, NOW, SLOT, "quarantined") is None
    assert write_reason(HEALTHY, False, _last(HEALTHY, 0.1), NOW, SLOT, "no") is None


def test_a_rewrite_is_due_when_the_tables_moment_passed_since_its_last_write() -> None:
    # NOW is 12:00; the slot's moments are at hh:30.
    assert write_reason(WARNING, False, _last(WARNING, 1.4), NOW, SLOT) == "periodic rewrite (last 1.4 h ago)"
    assert write_reason(WARNING, False, _last(WARNING, 0.5), NOW, SLOT) is None  # 11:30, in phase
    half_past = NOW + timedelta(minutes=30)
    reason = write_reason(WARNING, False, _last(WARNING, 0.5), half_past, SLOT)
    assert reason == "periodic rewrite (last 1.0 h ago)"


def test_a_write_out_of_phase_waits_for_the_next_moment_half_an_interval_later() -> None:
    # Written at 11:20 for a change: 11:30 is too soon, so it is next rewritten at 12:30, not 11:30.
    assert not SLOT.due(NOW - timedelta(minutes=40), NOW - timedelta(minutes=29))
    assert not SLOT.due(NOW - timedelta(minutes=40), NOW + timedelta(minutes=29))
    assert SLOT.due(NOW - timedelta(minutes=40), NOW + timedelta(minutes=30))
    # Written at 11:00: 11:30 is half an interval later, at the boundary, so also the next one.
    assert not SLOT.due(NOW - timedelta(hours=1), NOW)


def test_phases_are_spread_evenly_within_each_interval_group() -> None:
    healths = {f"lake.ns.t{i}": (HEALTHY if i % 3 else WARNING) for i in range(300)}
    slots = POLICY.slots(healths)
    attention = sorted(s.phase for p, s in slots.items() if healths[p] is WARNING)
    healthy = sorted(s.phase for p, s in slots.items() if healths[p] is HEALTHY)
    assert {s.interval_hours for p, s in slots.items() if healths[p] is WARNING} == {1.0}
    assert {s.interval_hours for p, s in slots.items() if healths[p] is HEALTHY} == {24.0}
    assert attention == pytest.approx([(i + 0.5) / 100 for i in range(100)])
    assert healthy == pytest.approx([(i + 0.5) / 200 for i in range(200)])


def test_a_table_joining_moves_the_others_phases_by_at_most_one_share() -> None:
    healths = {f"lake.ns.t{i}": WARNING for i in range(1000)}
    before = POLICY.slots(healths)
    after = POLICY.slots(healths | {"lake.ns.new_table": WARNING})
    assert max(abs(after[p].phase - before[p].phase) for p in healths) <= 1 / 1000


def _simulate(healths_at: dict[int, dict[str, TableHealth]], syncs: int) -> tuple[list[int], dict[str, list]]:
    """Scheduled syncs every 15 minutes from NOW; every table first written at the first sync.
    `healths_at[n]` is the fleet's health from sync n on. Returns the periodic rewrites per sync and
    each table's write times."""
    healths = healths_at[0]
    last: dict[str, LastWrite] = {}
    written: dict[str, list[datetime]] = {p: [] for p in healths}
    rewrites_per_sync = []
    for n in range(syncs):
        healths = healths_at.get(n, healths)
        now = NOW + n * SYNC
        slots = POLICY.slots(healths)
        rewrites = 0
        for partition, health in healths.items():
            reason = write_reason(health, False, last.get(partition), now, slots[partition])
            if reason is None:
                continue
            rewrites += reason.startswith("periodic rewrite")
            last[partition] = LastWrite(health, now)
            written[partition].append(now)
        rewrites_per_sync.append(rewrites)
    return rewrites_per_sync, written


def _fleet(n: int, state: HealthState) -> dict[str, TableHealth]:
    health = WARNING if state is HealthState.WARNING else HEALTHY
    return {f"lake.sales_{i % 7}.orders_{i:05d}": health for i in range(n)}


def test_a_fleet_needing_attention_is_rewritten_a_quarter_per_sync_never_all_at_once() -> None:
    rewrites, written = _simulate({0: _fleet(1000, HealthState.WARNING)}, syncs=4 * 24)
    assert max(rewrites) <= 1000 / 4
    assert sum(rewrites[8:]) == 1000 * (len(rewrites) - 8) / 4  # steady: each table once an hour
    for times in written.values():
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert all(timedelta(minutes=30) <= gap <= timedelta(hours=1.5) for gap in gaps)
        assert times[-1] >= NOW + (4 * 24 - 5) * SYNC


def test_healthy_tables_are_rewritten_once_a_day_spread_over_the_syncs() -> None:
    rewrites, written = _simulate({0: _fleet(1000, HealthState.HEALTHY)}, syncs=4 * 24 * 3)
    assert max(rewrites) <= -(-1000 // 96)  # a 96th of the day's rewrites per 15-minute sync
    assert all(len(times) in (3, 4) for times in written.values())
    for times in written.values():
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert all(timedelta(hours=12) <= gap <= timedelta(hours=36) for gap in gaps)


def test_a_fleet_turning_unknown_together_is_not_rewritten_together() -> None:
    """A catalog outage turns every table unknown in one sync (a health change, written then); the
    hourly rewrites that follow are spread, and so are the daily ones after it recovers."""
    healthy = _fleet(800, HealthState.HEALTHY)
    unknown = {p: make_health(HealthState.UNKNOWN, table=p, error="catalog down") for p in healthy}
    phases = {0: healthy, 8: unknown, 40: healthy}
    rewrites, _ = _simulate(phases, syncs=4 * 24 * 2)
    assert max(rewrites) <= 800 / 4
    assert sum(rewrites[12:40]) == 800 * 28 / 4
