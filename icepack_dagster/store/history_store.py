"""Maintenance history in SQL (SQLite under the icepack home by default, PostgreSQL in production).

One row per maintenance of a table and one per action. Consecutive failures are counted back from the
newest row to the last success or operator release, so quarantine needs no separate mutable flag and
every decision stays auditable. Every action that ran with a prediction also leaves one row of planned
and done figures (`icepack_action_predictions`): the table's history of predictions and outcomes, and
across tables the accuracy `icepack accuracy` shows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    case,
    delete,
    func,
    insert,
    select,
)
from sqlalchemy.engine import Engine as SqlEngine
from sqlalchemy.engine import Row

from icepack_dagster.domain.actions import ActionResult, MaintenanceAction
from icepack_dagster.domain.history import TableHistory
from icepack_dagster.domain.maintenance_report import MaintenanceReport
from icepack_dagster.domain.prediction_model import PredictionAccuracy
from icepack_dagster.store.state_database import open_state_database

_metadata = MetaData()

maintenance_runs = Table(
    "icepack_maintenance_runs",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("table_key", String(1024), nullable=False, index=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    Column("outcome", String(32), nullable=False),  # succeeded | failed | nothing_to_do | released
    Column("error", Text),
    Column("report", Text),  # the MaintenanceReport as JSON, for audits
)

action_runs = Table(
    "icepack_action_runs",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("table_key", String(1024), nullable=False, index=True),
    Column("action", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
)

action_predictions = Table(
    "icepack_action_predictions",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("table_key", String(1024), nullable=False, index=True),
    Column("action", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    Column("snapshot_id", BigInteger),  # the table's snapshot the prediction was made on
    Column("exact", Boolean, nullable=False),
    Column("planned_files_in", BigInteger, nullable=False),
    Column("planned_files_out", BigInteger),
    Column("planned_bytes_in", BigInteger),
    Column("done_files_in", BigInteger),
    Column("done_files_out", BigInteger),
    Column("done_bytes_in", BigInteger),
)

RELEASED = "released"
_FAILURE_LOOKBACK = 100  # consecutive failures are counted up to this many


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _prediction_row(report: MaintenanceReport, result: ActionResult) -> dict[str, object]:
    judged = result.predicted_actual
    assert judged is not None
    done = judged.done
    return {
        "table_key": report.table,
        "action": result.action.value,
        "status": result.status,
        "finished_at": report.finished_at,
        "snapshot_id": report.snapshot_id,
        "exact": judged.exact,
        "planned_files_in": judged.planned.files_in,
        "planned_files_out": judged.planned.files_out,
        "planned_bytes_in": judged.planned.bytes_in,
        "done_files_in": done.files_in if done else None,
        "done_files_out": done.files_out if done else None,
        "done_bytes_in": done.bytes_in if done else None,
    }


class HistoryStore:
    """Reads and appends maintenance history; safe to share across threads."""

    def __init__(self, url: str) -> None:
        self._engine: SqlEngine = open_state_database(url)

    def record(self, report: MaintenanceReport) -> None:
        """Append a finished maintenance. Dry runs are not history, nor is a table found gone: a dropped
        table is no failure of its maintenance and must not count towards quarantine."""
        if report.outcome in ("dry_run", "table_gone", "deferred"):
            return
        with self._engine.begin() as connection:
            connection.execute(
                insert(maintenance_runs).values(
                    table_key=report.table,
                    started_at=report.started_at,
                    finished_at=report.finished_at,
                    outcome=report.outcome,
                    error=report.first_error,
                    report=report.model_dump_json(),
                )
            )
            rows = [
                {
                    "table_key": report.table,
                    "action": r.action.value,
                    "status": r.status,
                    "finished_at": report.finished_at,
                }
                for r in report.results
                if r.status in ("succeeded", "no_effect", "failed")
            ]
            if rows:
                connection.execute(insert(action_runs), rows)
            predictions = [_prediction_row(report, r) for r in report.results if r.predicted_actual]
            if predictions:
                connection.execute(insert(action_predictions), predictions)

    def release(self, table: str, now: datetime) -> None:
        """An operator's release: consecutive failures count from zero again."""
        with self._engine.begin() as connection:
            connection.execute(
                insert(maintenance_runs).values(
                    table_key=table,
                    started_at=now,
                    finished_at=now,
                    outcome=RELEASED,
                    error=None,
                    report=json.dumps({"released_by": "operator"}),
                )
            )

    def prune(self, older_than: datetime) -> int:
        """Delete history that finished before `older_than`, except what decisions still read: each
        table's newest runs that consecutive failures are counted over (so quarantine survives) and its
        newest success of each action (so cadence survives). Returns how many rows went."""
        ranked = select(
            maintenance_runs.c.id,
            func.row_number()
            .over(partition_by=maintenance_runs.c.table_key, order_by=maintenance_runs.c.id.desc())
            .label("rank"),
        ).subquery("ranked")
        newest_runs = select(ranked.c.id).where(ranked.c.rank <= _FAILURE_LOOKBACK)
        last_successes = (
            select(func.max(action_runs.c.id))
            .where(action_runs.c.status == "succeeded")
            .group_by(action_runs.c.table_key, action_runs.c.action)
        )
        with self._engine.begin() as connection:
            runs = connection.execute(
                delete(maintenance_runs).where(
                    maintenance_runs.c.finished_at < older_than,
                    maintenance_runs.c.id.not_in(newest_runs.scalar_subquery()),
                )
            ).rowcount
            actions = connection.execute(
                delete(action_runs).where(
                    action_runs.c.finished_at < older_than,
                    action_runs.c.id.not_in(last_successes.scalar_subquery()),
                )
            ).rowcount
        return int(runs) + int(actions)

    def history(self, table: str, quarantine_after_failures: int) -> TableHistory:
        with self._engine.connect() as connection:
            runs = connection.execute(
                select(maintenance_runs.c.finished_at, maintenance_runs.c.outcome, maintenance_runs.c.error)
                .where(maintenance_runs.c.table_key == table)
                .order_by(maintenance_runs.c.id.desc())
                .limit(_FAILURE_LOOKBACK)
            ).all()
            succeeded = connection.execute(
                select(action_runs.c.action, func.max(action_runs.c.finished_at))
                .where(action_runs.c.table_key == table, action_runs.c.status == "succeeded")
                .group_by(action_runs.c.action)
            ).all()
            latest = connection.execute(
                select(
                    action_predictions.c.action, action_predictions.c.status, action_predictions.c.snapshot_id
                )
                .where(action_predictions.c.table_key == table)
                .order_by(action_predictions.c.id.desc())
                .limit(_FAILURE_LOOKBACK)
            ).all()
        failures = 0
        last_error = None
        for run in runs:
            if run.outcome != "failed":
                break
            failures += 1
            last_error = last_error or run.error
        last_run_at = next((_aware(r.finished_at) for r in runs if r.outcome != RELEASED), None)
        quarantined = failures >= quarantine_after_failures
        return TableHistory(
            table=table,
            last_succeeded={MaintenanceAction(a): _aware(t) for a, t in succeeded},
            last_run_at=last_run_at,
            consecutive_failures=failures,
            last_error=last_error,
            quarantined=quarantined,
            quarantined_at=_aware(runs[0].finished_at) if quarantined and runs else None,
            no_effect_on=_no_effect_on(latest),
        )

    def accuracy(self, table: str | None = None) -> tuple[PredictionAccuracy, ...]:
        """Planned against done files and bytes, per action, over every recorded prediction of the
        fleet (or of one table): how far icepack's predictions can be trusted."""
        c = action_predictions.c
        query = (
            select(
                c.action,
                func.count(),
                func.sum(case((c.status == "no_effect", 1), else_=0)),
                func.sum(c.planned_files_in),
                func.sum(c.done_files_in),
                func.sum(c.planned_files_out),
                func.sum(c.done_files_out),
                func.sum(c.planned_bytes_in),
                func.sum(c.done_bytes_in),
            )
            .group_by(c.action)
            .order_by(c.action)
        )
        if table is not None:
            query = query.where(c.table_key == table)
        with self._engine.connect() as connection:
            rows = connection.execute(query).all()
        return tuple(
            PredictionAccuracy(
                action=row[0],
                runs=row[1],
                no_effect_runs=row[2] or 0,
                planned_files_in=row[3] or 0,
                done_files_in=row[4] or 0,
                planned_files_out=row[5] or 0,
                done_files_out=row[6] or 0,
                planned_bytes_in=row[7] or 0,
                done_bytes_in=row[8] or 0,
            )
            for row in rows
        )


def _no_effect_on(latest: Sequence[Row[Any, Any, Any]]) -> dict[MaintenanceAction, int]:
    """Per action, the snapshot its newest prediction was made on, when that run had no effect."""
    newest: dict[str, Row[Any, Any, Any]] = {}
    for row in latest:
        newest.setdefault(row.action, row)
    return {
        MaintenanceAction(action): row.snapshot_id
        for action, row in newest.items()
        if row.status == "no_effect" and row.snapshot_id is not None
    }
