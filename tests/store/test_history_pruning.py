"""Contract: pruning maintenance history keeps every decision it feeds.

Rows past the retention go, on SQLite and on PostgreSQL, except each table's newest runs that
consecutive failures are counted over (a quarantined table stays quarantined however old its failures)
and its newest success of each action (cadence is unchanged). Recent history is never touched.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from icepack_dagster.domain.actions.maintenance_action import ActionResult, ActionStatus, MaintenanceAction
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.store.history_store import HistoryStore
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_database

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
COMPACT, EXPIRE = MaintenanceAction.REWRITE_DATA_FILES, MaintenanceAction.EXPIRE_SNAPSHOTS


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HistoryStore]:
    if request.param == "sqlite":
        yield HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
        return
    with fresh_database("icepack_prune") as name:
        yield HistoryStore(f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}")


def _report(
    table: str, days_ago: float, status: ActionStatus, action: MaintenanceAction = COMPACT
) -> MaintenanceReport:
    when = NOW - timedelta(days=days_ago)
    result = ActionResult(action=action, status=status, statements=(), duration_seconds=1,
                          error="boom" if status == "failed" else None)
    return MaintenanceReport(table=table, started_at=when, finished_at=when, results=(result,))


def test_pruning_keeps_quarantine_cadence_and_recent_history(store: HistoryStore) -> None:
    store.record(_report("lake.s.busy", 400, "succeeded", EXPIRE))  # its only expiry: cadence reads it
    for day in range(300, 100, -1):  # 200 old runs, the newest 100 of which decide failures
        store.record(_report("lake.s.busy", day, "succeeded" if day % 2 else "failed"))
    for day in (5, 3, 1):
        store.record(_report("lake.s.busy", day, "succeeded"))
    for day in (200, 199, 198):  # three old failures in a row: quarantined
        store.record(_report("lake.s.stuck", day, "failed"))
    before = {t: store.history(t, 3) for t in ("lake.s.busy", "lake.s.stuck")}
    assert before["lake.s.stuck"].quarantined

    removed = store.prune(NOW - timedelta(days=90))

    after = {t: store.history(t, 3) for t in ("lake.s.busy", "lake.s.stuck")}
    assert after == before, "pruning changed a decision"
    assert removed > 0
    assert store.prune(NOW - timedelta(days=90)) == 0, "a second prune found more to delete"
    assert after["lake.s.busy"].last_succeeded[EXPIRE] == NOW - timedelta(days=400)
    assert after["lake.s.busy"].last_run_at == NOW - timedelta(days=1)
