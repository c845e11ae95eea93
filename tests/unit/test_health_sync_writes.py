"""Which tables a scheduled health sync writes: first, changed metadata, changed health, and periodic
rewrites (hourly for tables needing attention, within a day and spread per table for healthy ones)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from icepack_dagster.domain.health_model import HealthState, Severity, TableHealth
from icepack_dagster.domain.health_sync_writes import (
    LastWrite,
    RewritePolicy,
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


def test_first_and_unreadable_last_write_are_written() -> None:
    assert write_reason(TABLE, HEALTHY, False, None, NOW, POLICY) == "first materialization"
    assert write_reason(TABLE, HEALTHY, False, _last(None, 0.1), NOW, POLICY) == "first materialization"


def test_changed_metadata_is_written_even_with_the_same_health() -> None:
    assert write_reason(TABLE, HEALTHY, True, _last(HEALTHY, 0.1), NOW, POLICY) == "metadata changed"


def test_health_signature_ignores_measured_values_but_not_codes_or_severity() -> None:
    older = WARNING.model_copy(update={"issues": (make_issue("OLD_SNAPSHOTS", Severity.WARNING, 190.0),)})
    assert health_signature(older) == health_signature(WARNING)
    critical = make_health(
        HealthState.CRITICAL, make_issue("OLD_SNAPSHOTS", Severity.CRITICAL, 800.0), table=TABLE
    )
    assert write_reason(TABLE, critical, False, _last(WARNING, 0.1), NOW, POLICY) == "health changed"
    assert write_reason(TABLE, WARNING, False, _last(older, 0.1), NOW, POLICY) is None
    other_error = make_health(HealthState.UNKNOWN, table=TABLE, error="catalog down")
    same_state = other_error.model_copy(update={"error": "table dropped"})
    assert write_reason(TABLE, same_state, False, _last(other_error, 0.1), NOW, POLICY) == "health changed"


def test_tables_needing_attention_are_rewritten_every_attention_interval() -> None:
    assert write_reason(TABLE, WARNING, False, _last(WARNING, 0.9), NOW, POLICY) is None
    reason = write_reason(TABLE, WARNING, False, _last(WARNING, 1.0), NOW, POLICY)
    assert reason == "periodic rewrite (last 1.0 h ago)"


@pytest.mark.parametrize("table", [f"lake.ns.t{i}" for i in range(40)])
def test_healthy_tables_are_rewritten_between_half_and_all_of_the_interval(table: str) -> None:
    interval = POLICY.interval_hours(table, HEALTHY)
    assert 12.0 <= interval < 24.0
    assert write_reason(table, HEALTHY, False, _last(HEALTHY, 11.9), NOW, POLICY) is None
    assert write_reason(table, HEALTHY, False, _last(HEALTHY, 24.0), NOW, POLICY) is not None


def test_the_spread_differs_between_tables() -> None:
    intervals = {POLICY.interval_hours(f"lake.ns.t{i}", HEALTHY) for i in range(100)}
    assert len(intervals) > 90 and max(intervals) - min(intervals) > 10
