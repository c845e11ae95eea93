"""Who needs a person: each reason (quarantined, a failure streak at the alert threshold, a maintenance
the Spark's Iceberg runtime refused, metadata that could not be read) is recognised alone, the first
applicable one is the reason given, and a table that is merely unhealthy, not measured yet or failing
below the threshold needs nobody."""

from __future__ import annotations

from datetime import UTC, datetime

from icepack_dagster.domain.health.judging import unknown_health
from icepack_dagster.domain.health.model import HealthState, Severity, TableHealth
from icepack_dagster.domain.health.needs_operator import NOT_MEASURED, OperatorFacts, operator_need
from icepack_dagster.domain.outcomes.history import TableHistory
from tests.factories import make_health, make_issue

TABLE = "lake.sales.orders"
AT = datetime(2026, 11, 26, 12, tzinfo=UTC)


def _facts(history: TableHistory | None = None, health: TableHealth | None = None) -> OperatorFacts:
    judged = health or make_health(HealthState.HEALTHY, table=TABLE)
    return OperatorFacts(health=judged, history=history or TableHistory.empty(TABLE), failing_after=2)


def test_a_healthy_or_merely_unhealthy_table_needs_nobody() -> None:
    assert operator_need(_facts()) is None
    critical = make_issue("SMALL_FILES", Severity.CRITICAL, 900)
    assert operator_need(_facts(health=make_health(HealthState.CRITICAL, critical, table=TABLE))) is None


def test_a_quarantined_table_needs_a_person_with_its_last_error() -> None:
    history = TableHistory(table=TABLE, consecutive_failures=3, quarantined=True, quarantined_at=AT,
                           last_error="disk full", last_run_at=AT)
    need = operator_need(_facts(history))
    assert need is not None and need.reason == "quarantined"
    assert f"icepack quarantine release {TABLE}" in need.summary
    assert need.evidence == {
        "consecutive_failures": 3, "quarantined_at": AT.isoformat(), "last_error": "disk full"
    }


def test_a_failure_streak_needs_a_person_from_the_alert_threshold_on() -> None:
    once = TableHistory(table=TABLE, consecutive_failures=1, last_error="boom", last_run_at=AT)
    assert operator_need(_facts(once)) is None
    twice = once.model_copy(update={"consecutive_failures": 2})
    need = operator_need(_facts(twice))
    assert need is not None and need.reason == "failing"
    assert need.evidence["consecutive_failures"] == 2 and need.evidence["last_error"] == "boom"


def test_a_runtime_refusal_needs_a_person_with_the_refusal_until_a_later_run_is_not_refused() -> None:
    why = f"table {TABLE}: rewrite_data_files refused: this Spark runs Iceberg 1.8.1, and a format v3 table"
    refused = TableHistory(table=TABLE, refused=why, last_run_at=AT)
    need = operator_need(_facts(refused))
    assert need is not None and need.reason == "runtime_refused"
    assert "icepack spark runtime" in need.summary
    assert need.evidence == {"refusal": why, "last_run_at": AT.isoformat()}
    assert operator_need(_facts(refused.model_copy(update={"refused": None}))) is None


def test_unreadable_metadata_needs_a_person_but_not_yet_measured_does_not() -> None:
    need = operator_need(_facts(health=unknown_health(TABLE, "lake.sales.orders: manifest list not found")))
    assert need is not None and need.reason == "metadata_unreadable"
    assert need.evidence == {"error": "lake.sales.orders: manifest list not found"}
    assert operator_need(_facts(health=unknown_health(TABLE, NOT_MEASURED))) is None


def test_quarantine_is_the_reason_given_when_several_apply() -> None:
    history = TableHistory(table=TABLE, consecutive_failures=5, quarantined=True, quarantined_at=AT)
    need = operator_need(_facts(history, unknown_health(TABLE, "unreadable")))
    assert need is not None and need.reason == "quarantined"
