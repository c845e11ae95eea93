"""Contract: two icepack deployments sharing one state database (one home, or one `state_url`) keep
their table facts apart, even for a table both name alike: each reads its own status, health and
needs_operator verdict, its own health events (the maintenance sensor's cursor), its own last
maintenance and its own reclaimed totals; the health events stay numbered in write order across both.
Real SQLite and real PostgreSQL, through the store's own writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from icepack_dagster.domain.health.model import HealthState, TableHealth
from icepack_dagster.store.table_facts import Measurement, TableFactsStore

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
TABLE = "lake.sales.orders"  # both deployments call a table this


def _measurement(table: str, state: HealthState, verdict: str) -> Measurement:
    return Measurement(table, None, None, TableHealth(table=table, state=state), operator_verdict=verdict)


def test_two_deployments_in_one_state_database_never_see_each_others_facts(url: str) -> None:
    a, b = TableFactsStore(url, "icepack"), TableFactsStore(url, "lake_b")

    numbers_a = a.record_measurements([_measurement(TABLE, HealthState.CRITICAL, "quarantined")], T0)
    theirs_written = [
        _measurement(TABLE, HealthState.HEALTHY, "no"),
        _measurement("lake.sales.items", HealthState.WARNING, "no"),
    ]
    numbers_b = b.record_measurements(theirs_written, T0 + timedelta(minutes=1))
    again_a = a.record_measurements([_measurement("lake.ns.other", HealthState.WARNING, "failing")], T0)
    a.record_outcome(TABLE, "succeeded", T0 + timedelta(hours=1), files=7, size=700)
    b.record_outcome(TABLE, "conflict", T0 + timedelta(hours=2), files=0, size=0)
    b.record_outcome("lake.sales.items", "succeeded", T0 + timedelta(hours=2), files=3, size=30)

    assert (numbers_a, numbers_b, again_a) == (
        {TABLE: 1}, {TABLE: 2, "lake.sales.items": 3}, {"lake.ns.other": 4}
    ), "one counter numbers every health in write order, whichever deployment wrote it"
    ours, theirs = a.measured([TABLE, "lake.sales.items"]), b.measured([TABLE, "lake.ns.other"])
    assert set(ours) == {TABLE} and set(theirs) == {TABLE}
    assert ours[TABLE].health == TableHealth(table=TABLE, state=HealthState.CRITICAL)
    assert (ours[TABLE].operator_verdict, theirs[TABLE].operator_verdict) == ("quarantined", "no")
    assert (ours[TABLE].health_event, theirs[TABLE].health_event) == (1, 2)
    assert ours[TABLE].maintained_at == T0 + timedelta(hours=1)
    assert theirs[TABLE].maintained_at == T0 + timedelta(hours=2)
    assert [(e.table, e.health_event) for e in a.health_events_after(0, 10)] == [
        (TABLE, 1), ("lake.ns.other", 4)
    ]
    assert [(e.table, e.health_event) for e in b.health_events_after(1, 10)] == [
        (TABLE, 2), ("lake.sales.items", 3)
    ]
    assert (a.reclaimed(), b.reclaimed()) == ((7, 700), (3, 30))


def test_the_fleet_read_of_every_row_keeps_to_its_deployment(url: str) -> None:
    """Past 5,000 named tables the read takes every row of the deployment in one query: not the other's."""
    a, b = TableFactsStore(url, "icepack"), TableFactsStore(url, "lake_b")
    a.record_measurements([_measurement(TABLE, HealthState.HEALTHY, "no")], T0)
    b.record_measurements([_measurement(TABLE, HealthState.CRITICAL, "metadata_unreadable")], T0)

    fleet = [TABLE] + [f"lake.ns.t{i}" for i in range(5001)]

    assert a.measured(fleet)[TABLE].health == TableHealth(table=TABLE, state=HealthState.HEALTHY)
    assert b.measured(fleet)[TABLE].operator_verdict == "metadata_unreadable"
