"""Contract: a name measured with another Iceberg UUID than before means a table created again under it.
Its former history (runs, actions, predictions) is set aside under `name@former-uuid`, nothing of it
deleted, and every deployment's facts forget the former table's last maintenance moment (keeping what
it reclaimed); the new table's history starts empty, so its predecessor's failures, pause, cadence and
rewrites no longer hold it. The same UUID again, a first measurement and other tables change nothing;
a second process seeing the same re-creation sets nothing aside again. Real SQLite and real
PostgreSQL, through the stores' own writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from icepack_dagster.domain.actions.maintenance_action import ActionResult, MaintenanceAction
from icepack_dagster.domain.health.model import HealthState, TableHealth
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.outcomes.prediction import ActionFigures, PredictedActual
from icepack_dagster.store.history_store import HistoryStore
from icepack_dagster.store.table_facts import Measurement, TableFactsStore
from icepack_dagster.store.table_identities import TableIdentities, set_aside_name

T0 = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
TABLE, OTHER = "lake.sales.orders", "lake.sales.items"
FORMER, NEW = "0b7c5c49-0000-4000-8000-000000000001", "0b7c5c49-0000-4000-8000-000000000002"


def _failed_rewrite(table: str, at: datetime) -> MaintenanceReport:
    judged = PredictedActual(
        planned=ActionFigures(files_in=8, files_out=1, bytes_in=800),
        done=ActionFigures(files_in=8, files_out=1, bytes_in=800),
        exact=True,
    )
    result = ActionResult(
        action=MaintenanceAction.REWRITE_DATA_FILES, status="violated", statements=("CALL ...",),
        duration_seconds=1.0, error="replace removed 1 file it did not plan", predicted_actual=judged,
    )
    return MaintenanceReport(table=table, snapshot_id=7, started_at=at, finished_at=at + timedelta(seconds=1),
                             results=(result,))


def test_a_table_created_again_under_its_name_starts_a_history_of_its_own(url: str) -> None:
    history, identities = HistoryStore(url), TableIdentities(url)
    facts, theirs = TableFactsStore(url, "icepack"), TableFactsStore(url, "lake_b")
    first = identities.observe({TABLE: FORMER, OTHER: FORMER}, T0)
    assert first == {}, "a first measurement sets nothing aside"
    for table in (TABLE, OTHER):
        history.record(_failed_rewrite(table, T0 + timedelta(hours=1)))
        critical = TableHealth(table=table, state=HealthState.CRITICAL)
        facts.record_measurements([Measurement(table, None, None, critical)], T0)
        facts.record_outcome(table, "violated", T0 + timedelta(hours=1), files=0, size=0)
    facts.record_outcome(TABLE, "succeeded", T0 + timedelta(hours=2), files=5, size=500)
    healthy = TableHealth(table=TABLE, state=HealthState.HEALTHY)
    theirs.record_measurements([Measurement(TABLE, None, None, healthy)], T0)
    theirs.record_outcome(TABLE, "nothing_to_do", T0 + timedelta(hours=2), files=0, size=0)
    paused = history.history(TABLE, quarantine_after_failures=3)
    assert paused.quarantined and paused.violation is not None and paused.bytes_rewritten_24h == 800
    before_budget = history.fleet_bytes_rewritten(T0, ["lake"])

    assert identities.observe({TABLE: FORMER, OTHER: FORMER}, T0 + timedelta(hours=3)) == {}, "same UUID"
    assert history.history(TABLE, quarantine_after_failures=3) == paused

    replaced = identities.observe({TABLE: NEW, OTHER: FORMER}, T0 + timedelta(hours=4))

    assert replaced == {TABLE: FORMER}
    fresh = history.history(TABLE, quarantine_after_failures=3)
    assert (fresh.quarantined, fresh.violation, fresh.consecutive_failures) == (False, None, 0)
    assert (fresh.last_run_at, fresh.last_succeeded, fresh.bytes_rewritten_24h) == (None, {}, 0)
    kept = history.history(set_aside_name(TABLE, FORMER), quarantine_after_failures=3)
    assert kept.quarantined and kept.violation == paused.violation and kept.bytes_rewritten_24h == 800
    assert history.history(OTHER, quarantine_after_failures=3).quarantined, "another table keeps its history"
    assert history.fleet_bytes_rewritten(T0, ["lake"]) == before_budget, "the day's budget still counts it"
    mine = facts.measured([TABLE, OTHER])
    assert (mine[TABLE].maintained_at, mine[OTHER].maintained_at) == (None, T0 + timedelta(hours=1))
    assert theirs.measured([TABLE])[TABLE].maintained_at is None, "every deployment's facts forget it"
    assert facts.reclaimed() == (5, 500), "what the former table reclaimed stays in the fleet's totals"
    history.record(_failed_rewrite(TABLE, T0 + timedelta(hours=5)))  # the new table's own
    again = TableIdentities(url).observe({TABLE: NEW}, T0 + timedelta(hours=6))
    assert again == {}, "another process seeing the same table sets nothing aside again"
    assert history.history(TABLE, quarantine_after_failures=3).violation is not None
