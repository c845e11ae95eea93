"""Maintenance history in SQL (SQLite under the icepack home by default, PostgreSQL in production).

One row per maintenance of a table and one per action. Consecutive failures are counted back from the
newest row to the last success or operator release, so quarantine needs no separate mutable flag and
every decision stays auditable. Every action that ran with a prediction also leaves one row of planned
and done figures (`icepack_action_predictions`): the table's history of predictions and outcomes, and
across tables the accuracy `icepack accuracy` shows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import case, delete, func, insert, select
from sqlalchemy.engine import Engine as SqlEngine

from icepack_dagster.domain.actions.maintenance_action import ActionResult
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.outcomes.prediction import PredictionAccuracy
from icepack_dagster.domain.outcomes.rollback import RollbackPlan
from icepack_dagster.store.history_reads import fleet_bytes_rewritten, fleet_histories, table_history
from icepack_dagster.store.history_tables import (
    FAILURE_LOOKBACK,
    RELEASED,
    ROLLED_BACK,
    action_predictions,
    action_runs,
    maintenance_runs,
)
from icepack_dagster.store.state_database import open_state_database

__all__ = ["RELEASED", "HistoryStore", "action_predictions", "action_runs", "maintenance_runs"]


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
        self.url = url  # the state database's URL (what else keeps state beside this history opens it)
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
                    error=report.first_error or report.refusal or report.conflict,
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
                if r.status in ("succeeded", "no_effect", "failed", "conflict", "violated")
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

    def record_rollback(self, plan: RollbackPlan, now: datetime) -> None:
        """An operator's rollback of the table's last maintenance, with what it undid."""
        with self._engine.begin() as connection:
            connection.execute(
                insert(maintenance_runs).values(
                    table_key=plan.table, started_at=now, finished_at=now, outcome=ROLLED_BACK,
                    error=None, report=plan.model_dump_json(),
                )
            )

    def last_maintenance(self, table: str) -> MaintenanceReport | None:
        """The table's newest recorded maintenance that ran actions (what a rollback undoes); None when
        there is none, or when it was rolled back already."""
        runs = maintenance_runs.c
        query = (
            select(runs.outcome, runs.report)
            .where(runs.table_key == table, runs.outcome.not_in((RELEASED, "nothing_to_do")))
            .order_by(runs.id.desc())
            .limit(1)
        )
        with self._engine.connect() as connection:
            row = connection.execute(query).first()
        if row is None or row.outcome == ROLLED_BACK or not row.report:
            return None
        return MaintenanceReport.model_validate_json(row.report)

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
        newest_runs = select(ranked.c.id).where(ranked.c.rank <= FAILURE_LOOKBACK)
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
            return table_history(connection, table, quarantine_after_failures)

    def histories(self, quarantine_after: Mapping[str, int]) -> dict[str, TableHistory]:
        """The history of each table in `quarantine_after` (table -> its quarantine threshold) in one
        fleet-wide read of a few queries, each equal to `history` of that table."""
        with self._engine.connect() as connection:
            return fleet_histories(connection, quarantine_after)

    def fleet_bytes_rewritten(self, since: datetime, catalogs: Sequence[str]) -> int:
        """The bytes the rewrites of `catalogs`' tables read since `since` (a deployment's daily budget)."""
        with self._engine.connect() as connection:
            return fleet_bytes_rewritten(connection, since, catalogs)

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
