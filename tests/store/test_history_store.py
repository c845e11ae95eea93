"""Contract: maintenance history lives in a real SQL database (SQLite and PostgreSQL). Consecutive
failures count back to the last success or release; N in a row quarantine the table; an operator's
release resets the count; last successes per action feed cadence; dry runs and tables found gone are
not history. A conflict with a concurrent writer neither counts towards quarantine nor breaks a failure
streak, and conflicts in a row are counted on their own; a commit that broke an invariant (`violated`)
pauses the table at once, with its evidence, until a release. The fleet read agrees with the per-table
one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from icepack_dagster.domain.actions.maintenance_action import ActionResult, MaintenanceAction
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.outcomes.prediction import ActionFigures, PredictedActual
from icepack_dagster.exceptions import ConfigurationError
from icepack_dagster.store.history_store import HistoryStore
from tests.conftest import PG_HOST, PG_PORT, PG_USER

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _report(
    table: str, status: str, at: datetime, action=MaintenanceAction.REWRITE_DATA_FILES
) -> MaintenanceReport:
    result = ActionResult(
        action=action,
        status=status,
        statements=("CALL ...",),
        duration_seconds=1.0,
        error={"failed": "boom: rewrite failed", "violated": "replace removed 1 file"}.get(status),
        reason="conflict: a concurrent commit" if status == "conflict" else None,
    )
    return MaintenanceReport(
        table=table, started_at=at, finished_at=at + timedelta(seconds=1), results=(result,)
    )


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, postgres_database: str) -> Iterator[HistoryStore]:
    if request.param == "sqlite":
        yield HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    else:
        yield HistoryStore(f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{postgres_database}")


def test_failures_in_a_row_quarantine_and_release_resets(
    store: HistoryStore, request: pytest.FixtureRequest
) -> None:
    table = f"lake.ns.{request.node.callspec.id}_quarantine"
    store.record(_report(table, "succeeded", T0))
    for i in range(2):
        store.record(_report(table, "failed", T0 + timedelta(hours=i + 1)))
    history = store.history(table, quarantine_after_failures=3)
    assert (history.consecutive_failures, history.quarantined) == (2, False)
    store.record(_report(table, "failed", T0 + timedelta(hours=4)))
    history = store.history(table, quarantine_after_failures=3)
    assert history.quarantined and history.consecutive_failures == 3
    assert history.last_error == "boom: rewrite failed"
    store.release(table, T0 + timedelta(hours=5))
    released = store.history(table, quarantine_after_failures=3)
    assert (released.consecutive_failures, released.quarantined) == (0, False)
    assert released.last_run_at == T0 + timedelta(hours=4, seconds=1)


def test_last_success_per_action_and_dry_runs_ignored(
    store: HistoryStore, request: pytest.FixtureRequest
) -> None:
    table = f"lake.ns.{request.node.callspec.id}_cadence"
    store.record(_report(table, "succeeded", T0))
    store.record(_report(table, "succeeded", T0 + timedelta(days=1)))
    store.record(_report(table, "succeeded", T0 + timedelta(days=2), MaintenanceAction.EXPIRE_SNAPSHOTS))
    store.record(_report(table, "dry_run", T0 + timedelta(days=3)))
    history = store.history(table, quarantine_after_failures=3)
    assert history.last_succeeded == {
        MaintenanceAction.REWRITE_DATA_FILES: T0 + timedelta(days=1, seconds=1),
        MaintenanceAction.EXPIRE_SNAPSHOTS: T0 + timedelta(days=2, seconds=1),
    }
    assert history.last_run_at == T0 + timedelta(days=2, seconds=1)
    other = store.history("lake.ns.never_maintained", quarantine_after_failures=3)
    assert other.last_succeeded == {} and other.last_run_at is None and not other.quarantined


def test_unusable_database_is_a_configuration_error_without_password() -> None:
    with pytest.raises(ConfigurationError, match="ICEPACK_STATE_URL") as caught:
        HistoryStore("postgresql+psycopg2://ice:topsecret@127.0.0.1:1/nowhere?connect_timeout=2")
    assert "topsecret" not in str(caught.value)


def test_a_table_found_gone_is_no_failure(store: HistoryStore, request: pytest.FixtureRequest) -> None:
    table = f"lake.ns.{request.node.callspec.id}_gone"
    store.record(_report(table, "failed", T0))
    gone = _report(table, "skipped", T0 + timedelta(hours=1)).model_copy(update={"table_gone": True})
    assert gone.outcome == "table_gone"
    store.record(gone)
    history = store.history(table, quarantine_after_failures=3)
    assert history.consecutive_failures == 1 and history.last_run_at == T0 + timedelta(seconds=1)


def test_a_runtime_refusal_is_told_and_is_no_failure(
    store: HistoryStore, request: pytest.FixtureRequest
) -> None:
    table = f"lake.ns.{request.node.callspec.id}_refused"
    why = f"table {table}: rewrite_data_files refused: this Spark runs Iceberg 1.8.1, and ..."
    refused = ActionResult(
        action=MaintenanceAction.REWRITE_DATA_FILES, status="refused", statements=(), duration_seconds=0.0,
        reason=why,
    )
    store.record(_report(table, "failed", T0))
    report = MaintenanceReport(table=table, started_at=T0 + timedelta(hours=1),
                               finished_at=T0 + timedelta(hours=1), results=(refused,))
    assert report.outcome == "refused"
    store.record(report)
    history = store.history(table, quarantine_after_failures=1)
    assert (history.refused, history.consecutive_failures, history.quarantined) == (why, 0, False)
    store.record(_report(table, "succeeded", T0 + timedelta(hours=2)))
    assert store.history(table, quarantine_after_failures=1).refused is None


def _judged(table: str, status: str, at: datetime, snapshot: int, done: int) -> MaintenanceReport:
    judged = PredictedActual(
        planned=ActionFigures(files_in=12, files_out=4, bytes_in=1200),
        done=ActionFigures(files_in=done, files_out=min(done, 4), bytes_in=100 * done),
        exact=True,
    )
    result = ActionResult(
        action=MaintenanceAction.REWRITE_DATA_FILES, status=status, statements=("CALL ...",),
        duration_seconds=1.0, predicted_actual=judged,
    )
    return MaintenanceReport(
        table=table, snapshot_id=snapshot, started_at=at, finished_at=at + timedelta(seconds=1),
        results=(result,),
    )


def test_predictions_and_outcomes_are_kept_and_summed_by_action(
    store: HistoryStore, request: pytest.FixtureRequest
) -> None:
    """A no_effect run is no failure; it is remembered with its snapshot until a later run of the
    action; accuracy sums planned against done."""
    table = f"lake.ns.{request.node.callspec.id}_predictions"
    store.record(_judged(table, "succeeded", T0, snapshot=1, done=12))
    store.record(_judged(table, "no_effect", T0 + timedelta(hours=1), snapshot=2, done=0))
    history = store.history(table, quarantine_after_failures=1)
    assert (history.consecutive_failures, history.quarantined) == (0, False)
    assert history.no_effect_on == {MaintenanceAction.REWRITE_DATA_FILES: 2}
    [rewrite] = store.accuracy(table)
    assert (rewrite.runs, rewrite.no_effect_runs) == (2, 1)
    assert (rewrite.planned_files_in, rewrite.done_files_in) == (24, 12)
    assert (rewrite.planned_files_out, rewrite.done_files_out) == (8, 4)
    assert (rewrite.planned_bytes_in, rewrite.done_bytes_in) == (2400, 1200)
    assert rewrite.files_ratio == 0.5
    store.record(_judged(table, "succeeded", T0 + timedelta(hours=2), snapshot=3, done=12))
    assert store.history(table, quarantine_after_failures=1).no_effect_on == {}
    assert any(row.action == "rewrite_data_files" for row in store.accuracy())  # the fleet


def test_conflicts_never_quarantine_and_are_counted_on_their_own(
    store: HistoryStore, request: pytest.FixtureRequest
) -> None:
    table = f"lake.ns.{request.node.callspec.id}_conflicts"
    store.record(_report(table, "failed", T0))
    for i in range(5):
        store.record(_report(table, "conflict", T0 + timedelta(hours=i + 1)))
    history = store.history(table, quarantine_after_failures=2)
    assert (history.consecutive_failures, history.quarantined, history.consecutive_conflicts) == (1, False, 5)
    assert history.last_conflict == "rewrite_data_files: conflict: a concurrent commit"
    assert history.last_conflict_at == T0 + timedelta(hours=5, seconds=1)
    store.record(_report(table, "failed", T0 + timedelta(hours=7)))  # the streak went on through them
    history = store.history(table, quarantine_after_failures=2)
    assert (history.consecutive_failures, history.quarantined, history.consecutive_conflicts) == (2, True, 0)
    assert store.histories({table: 2})[table] == history
    store.record(_report(table, "succeeded", T0 + timedelta(hours=8)))
    assert store.history(table, quarantine_after_failures=2).consecutive_failures == 0


def test_a_broken_invariant_pauses_the_table_until_released(
    store: HistoryStore, request: pytest.FixtureRequest
) -> None:
    table = f"lake.ns.{request.node.callspec.id}_violated"
    store.record(_report(table, "succeeded", T0))
    store.record(_report(table, "violated", T0 + timedelta(hours=1)))
    history = store.history(table, quarantine_after_failures=3)
    assert history.quarantined and history.violation == "replace removed 1 file"
    assert history.last_error == "replace removed 1 file"
    assert store.histories({table: 3})[table] == history
    store.release(table, T0 + timedelta(hours=2))
    released = store.history(table, quarantine_after_failures=3)
    assert (released.quarantined, released.violation) == (False, None)


def test_bytes_rewritten_in_the_last_day_count_from_the_last_release(
    store: HistoryStore, request: pytest.FixtureRequest
) -> None:
    table = f"lake.ns.{request.node.callspec.id}_rewritten"
    now = datetime.now(UTC)
    store.record(_judged(table, "succeeded", now - timedelta(hours=30), 1, done=10))  # outside the day
    store.record(_judged(table, "succeeded", now - timedelta(hours=1), 2, done=20))
    store.record(_judged(table, "no_effect", now - timedelta(minutes=10), 3, done=30))
    history = store.history(table, quarantine_after_failures=3)
    assert history.bytes_rewritten_24h == 5000
    # what the same-files breaker follows: newest first, with the snapshot each was planned on
    assert [(r.planned_on, r.files_rewritten, r.bytes_rewritten) for r in history.recent_rewrites] == [
        (3, 30, 3000), (2, 20, 2000)
    ]
    assert store.histories({table: 3})[table] == history
    store.release(table, now - timedelta(minutes=5))  # a person lifts the breakers
    released = store.history(table, quarantine_after_failures=3)
    assert (released.bytes_rewritten_24h, released.recent_rewrites) == (0, ())
    store.record(_judged(table, "succeeded", now - timedelta(minutes=2), 4, done=5))
    assert store.history(table, quarantine_after_failures=3).bytes_rewritten_24h == 500
    assert store.histories({table: 3})[table].bytes_rewritten_24h == 500


def test_the_fleet_s_rewritten_bytes_sum_every_table_since_a_moment_and_ignore_releases(
    store: HistoryStore, request: pytest.FixtureRequest
) -> None:
    """What the fleet's daily budget weighs (the database is shared by this run's tests: differences)."""
    tables = [f"lake.ns.{request.node.callspec.id}_fleet_{i}" for i in range(2)]
    now = datetime.now(UTC)
    midnight = now - timedelta(hours=2)
    before = store.fleet_bytes_rewritten(midnight, ["lake"])
    elsewhere = store.fleet_bytes_rewritten(midnight, ["south"])
    south = f"south.ns.{request.node.callspec.id}_fleet"  # a table of another deployment's catalog
    store.record(_judged(south, "succeeded", now, 4, done=9))
    store.record(_judged(tables[0], "succeeded", midnight - timedelta(hours=1), 1, done=7))  # the day before
    store.record(_judged(tables[0], "succeeded", now - timedelta(hours=1), 2, done=20))
    store.record(_judged(tables[1], "succeeded", now - timedelta(minutes=30), 3, done=30))
    store.release(tables[1], now - timedelta(minutes=10))
    assert store.fleet_bytes_rewritten(midnight, ["lake"]) - before == 5000
    assert store.fleet_bytes_rewritten(midnight, ["south"]) - elsewhere > 0
