"""Contract: the fleet-wide history read (what the alert sensor and the fleet summary use) returns, for
every table, exactly what the per-table read returns, on SQLite and PostgreSQL, in a fixed number of
queries however many tables there are.

Hundreds of tables get varied real histories through the store's own writes (successes, failure streaks
of every length including past the 100 runs counted, operator releases, runs with no effect and their
snapshots, expiries, dry runs, each table its own quarantine threshold); both the named read (a few
tables) and the whole-fleet read (more than the read names) are compared table by table.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine as SqlEngine

from icepack_dagster.domain.actions.maintenance_action import ActionResult, MaintenanceAction
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.outcomes.prediction import ActionFigures, PredictedActual
from icepack_dagster.store.history_store import HistoryStore
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_database

T0 = datetime(2026, 6, 1, tzinfo=UTC)
TABLES = 520  # more than the fleet read names in an IN list
STEPS = ("succeeded", "failed", "failed", "released", "no_effect", "expired", "dry_run")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HistoryStore]:
    if request.param == "sqlite":
        yield HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
        return
    with fresh_database("icepack_fleet_history") as name:
        yield HistoryStore(f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}")


def _report(table: str, step: str, at: datetime, snapshot: int) -> MaintenanceReport:
    action = MaintenanceAction.EXPIRE_SNAPSHOTS if step == "expired" else MaintenanceAction.REWRITE_DATA_FILES
    status = "succeeded" if step == "expired" else step
    judged = None
    if step in ("no_effect", "succeeded", "expired"):
        judged = PredictedActual(
            planned=ActionFigures(files_in=8, files_out=1, bytes_in=800),
            done=ActionFigures(files_in=0 if step == "no_effect" else 8, files_out=1, bytes_in=800),
            exact=True,
        )
    result = ActionResult(
        action=action, status=status, statements=(), duration_seconds=1.0,  # type: ignore[arg-type]
        error=f"{table}: disk full at {at:%H:%M}" if status == "failed" else None, predicted_actual=judged,
    )
    return MaintenanceReport(
        table=table, snapshot_id=snapshot, started_at=at, finished_at=at, results=(result,)
    )


def _write(store: HistoryStore, table: str, steps: list[str]) -> None:
    for i, step in enumerate(steps):
        at = T0 + timedelta(hours=i)
        if step == "released":
            store.release(table, at)
        else:
            store.record(_report(table, step, at, snapshot=1000 + i))


def _fleet(store: HistoryStore) -> dict[str, int]:
    """Tables with their quarantine thresholds; every table's history written."""
    rng = random.Random(13)
    thresholds = {}
    for n in range(TABLES):
        table = f"lake.fleet.t{n:04d}"
        _write(store, table, [rng.choice(STEPS) for _ in range(rng.randint(0, 6))])
        thresholds[table] = rng.randint(1, 4)
    _write(store, "lake.fleet.long_streak", ["succeeded", *["failed"] * 105])
    _write(store, "lake.fleet.released_often", ["succeeded", "failed", *["released"] * 102])
    # its compaction's newest prediction (no effect) is older than the newest 100 predictions read
    _write(store, "lake.fleet.many_predictions", ["no_effect", *["expired"] * 101])
    thresholds |= {"lake.fleet.long_streak": 3, "lake.fleet.released_often": 1}
    thresholds |= {"lake.fleet.many_predictions": 2, "lake.fleet.never_maintained": 3}
    return thresholds


class _Statements:
    """Counts SQL statements sent to any database while active."""

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> _Statements:
        event.listen(SqlEngine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *_: object) -> None:
        event.remove(SqlEngine, "before_cursor_execute", self._seen)

    def _seen(self, *_: object) -> None:
        self.count += 1


def test_fleet_read_equals_per_table_reads_in_four_queries(store: HistoryStore) -> None:
    thresholds = _fleet(store)
    expected = {table: store.history(table, threshold) for table, threshold in thresholds.items()}
    assert sum(h.quarantined for h in expected.values()) > 10, "too few quarantined tables to compare"
    assert sum(bool(h.no_effect_on) for h in expected.values()) > 10
    assert expected["lake.fleet.long_streak"].consecutive_failures == 100
    assert expected["lake.fleet.released_often"].last_run_at is None  # its runs are past the 100 read

    with _Statements() as whole:
        fleet = store.histories(thresholds)
    assert fleet == expected
    named_tables = ["lake.fleet.long_streak", "lake.fleet.t0007", "lake.fleet.never_maintained"]
    with _Statements() as named:
        some = store.histories({table: thresholds[table] for table in named_tables})
    assert some == {table: expected[table] for table in named_tables}
    assert whole.count == named.count == 4, (whole.count, named.count)
