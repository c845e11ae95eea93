"""Reading maintenance history as decisions need it (`TableHistory`), for one table or for the whole
fleet at once, with each table's rewrites of the last day (the circuit breakers'), and what the whole
fleet rewrote since a moment (its daily budget).

Both reads hand the same rows to one judge (`_judge`): a table's newest runs up to where its failure
streak and its last real run are known, its newest success of each action, and its newest prediction
of each action among its newest `FAILURE_LOOKBACK`. The fleet read fetches those rows for every table
in four queries (window functions, on SQLite and PostgreSQL alike), however many tables there are, so
a sensor looking at 10,000 tables does not issue 30,000 queries; its results are the per-table ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, Subquery, case, func, or_, select, true
from sqlalchemy.engine import Connection

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.outcomes.history import RecentRewrite, TableHistory
from icepack_dagster.domain.recommendation.circuit_breakers import REWRITES, WINDOW_HOURS
from icepack_dagster.store.history_tables import (
    FAILURE_LOOKBACK,
    RELEASED,
    ROLLED_BACK,
    STREAK_OUTCOMES,
    action_predictions,
    action_runs,
    maintenance_runs,
)

_Rows = Sequence[Any]  # SQLAlchemy rows, read by column name
# Up to this many tables the fleet read names them (an IN list); beyond it, it reads every table's rows
# and keeps the ones asked for, which is cheaper than a parameter list of thousands.
_NAMED_TABLES_MAX = 500


def aware(value: datetime) -> datetime:
    """A timestamp as UTC-aware (SQLite hands back naive ones)."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def table_history(connection: Connection, table: str, quarantine_after_failures: int) -> TableHistory:
    runs = connection.execute(
        select(maintenance_runs.c.finished_at, maintenance_runs.c.outcome, maintenance_runs.c.error)
        .where(maintenance_runs.c.table_key == table)
        .order_by(maintenance_runs.c.id.desc())
        .limit(FAILURE_LOOKBACK)
    ).all()
    succeeded = connection.execute(
        select(action_runs.c.action, func.max(action_runs.c.finished_at))
        .where(action_runs.c.table_key == table, action_runs.c.status == "succeeded")
        .group_by(action_runs.c.action)
    ).all()
    latest = connection.execute(
        select(action_predictions.c.action, action_predictions.c.status, action_predictions.c.snapshot_id)
        .where(action_predictions.c.table_key == table)
        .order_by(action_predictions.c.id.desc())
        .limit(FAILURE_LOOKBACK)
    ).all()
    rewrites = _recent_rewrites(connection, [table])
    return _judge(table, runs, succeeded, latest, quarantine_after_failures, rewrites.get(table, []))


def _recent_rewrites(connection: Connection, tables: list[str] | None) -> dict[str, list[RecentRewrite]]:
    """Per table, its rewrites in the last `WINDOW_HOURS` and since its last release that read bytes,
    newest first (what the circuit breakers weigh: their bytes, and the snapshots they were planned on)."""
    since = utc_now() - timedelta(hours=WINDOW_HOURS)
    r = maintenance_runs.c
    released = (
        select(r.table_key, func.max(r.finished_at).label("at"))
        .where(r.outcome == RELEASED, _of(r.table_key, tables))
        .group_by(r.table_key)
        .subquery("released")
    )
    p = action_predictions.c
    query = (
        select(p.table_key, p.action, p.snapshot_id, p.finished_at, p.done_files_in, p.done_bytes_in)
        .select_from(action_predictions.outerjoin(released, released.c.table_key == p.table_key))
        .where(
            p.action.in_([a.value for a in REWRITES]),
            p.finished_at >= since,
            or_(released.c.at.is_(None), p.finished_at > released.c.at),
            p.done_bytes_in > 0,
            _of(p.table_key, tables),
        )
        .order_by(p.table_key, p.id.desc())
    )
    found: dict[str, list[RecentRewrite]] = defaultdict(list)
    for row in connection.execute(query):
        found[row.table_key].append(
            RecentRewrite(
                action=MaintenanceAction(row.action),
                planned_on=row.snapshot_id,
                finished_at=aware(row.finished_at),
                files_rewritten=row.done_files_in or 0,
                bytes_rewritten=row.done_bytes_in,
            )
        )
    return found


def fleet_bytes_rewritten(connection: Connection, since: datetime, catalogs: Sequence[str]) -> int:
    """The bytes the rewrites of every table of `catalogs` read since `since` (a deployment's daily
    budget; releases do not reset it). Another deployment sharing the state database keeps its own
    catalogs' rewrites: they never count against this one's budget."""
    p = action_predictions.c
    query = select(func.sum(p.done_bytes_in)).where(
        p.action.in_([a.value for a in REWRITES]),
        p.finished_at >= since,
        or_(*(p.table_key.startswith(f"{catalog}.", autoescape=True) for catalog in catalogs)),
    )
    return int(connection.execute(query).scalar() or 0)


def fleet_histories(connection: Connection, quarantine_after: Mapping[str, int]) -> dict[str, TableHistory]:
    """The history of every table in `quarantine_after` (table -> its quarantine threshold), each equal
    to `table_history` of it, in four queries."""
    named = list(quarantine_after) if len(quarantine_after) <= _NAMED_TABLES_MAX else None
    runs, succeeded, latest = defaultdict(list), defaultdict(list), defaultdict(list)
    for row in connection.execute(_deciding_runs(named)):
        runs[row.table_key].append(row)
    for row in connection.execute(_last_successes(named)):
        succeeded[row.table_key].append((row.action, row.finished_at))
    for row in connection.execute(_newest_predictions(named)):
        latest[row.table_key].append(row)
    rewrites = _recent_rewrites(connection, named)
    return {
        table: _judge(table, runs.get(table, []), succeeded.get(table, []), latest.get(table, []), threshold,
                      rewrites.get(table, []))
        for table, threshold in quarantine_after.items()
    }


def _of(column: ColumnElement[Any], tables: list[str] | None) -> ColumnElement[bool]:
    return column.in_(tables) if tables is not None else true()


def _deciding_runs(tables: list[str] | None) -> Select[Any]:
    """Per table, its newest runs (newest first, at most FAILURE_LOOKBACK) up to and including the first
    that is not in a failure streak and the first that is not a release: all `_judge` reads of them."""
    c = maintenance_runs.c
    ranked = select(
        c.table_key, c.id, c.finished_at, c.outcome, c.error,
        func.row_number().over(partition_by=c.table_key, order_by=c.id.desc()).label("rank"),
    ).where(_of(c.table_key, tables)).subquery("ranked")
    bounded = (
        select(
            ranked,
            func.min(_rank_if(ranked, ranked.c.outcome.not_in(STREAK_OUTCOMES)))
            .over(partition_by=ranked.c.table_key)
            .label("first_not_failed"),
            func.min(_rank_if(ranked, ranked.c.outcome != RELEASED)).over(partition_by=ranked.c.table_key)
            .label("first_not_released"),
        )
        .where(ranked.c.rank <= FAILURE_LOOKBACK)
        .subquery("bounded")
    )
    b = bounded.c
    return (
        select(b.table_key, b.finished_at, b.outcome, b.error)
        .where(
            or_(
                b.rank <= func.coalesce(b.first_not_failed, FAILURE_LOOKBACK),
                b.rank <= func.coalesce(b.first_not_released, FAILURE_LOOKBACK),
            )
        )
        .order_by(b.table_key, b.rank)
    )


def _rank_if(ranked: Subquery, condition: ColumnElement[bool]) -> ColumnElement[Any]:
    return case((condition, ranked.c.rank))


def _last_successes(tables: list[str] | None) -> Select[Any]:
    c = action_runs.c
    return (
        select(c.table_key, c.action, func.max(c.finished_at).label("finished_at"))
        .where(c.status == "succeeded", _of(c.table_key, tables))
        .group_by(c.table_key, c.action)
    )


def _newest_predictions(tables: list[str] | None) -> Select[Any]:
    """Per table and action its newest prediction, if it is among the table's newest FAILURE_LOOKBACK."""
    c = action_predictions.c
    ranked = select(
        c.table_key, c.action, c.status, c.snapshot_id,
        func.row_number().over(partition_by=c.table_key, order_by=c.id.desc()).label("in_table"),
        func.row_number().over(partition_by=(c.table_key, c.action), order_by=c.id.desc()).label("in_action"),
    ).where(_of(c.table_key, tables)).subquery("ranked_predictions")
    r = ranked.c
    return select(r.table_key, r.action, r.status, r.snapshot_id).where(
        r.in_table <= FAILURE_LOOKBACK, r.in_action == 1
    )


def _judge(
    table: str,
    runs: _Rows,
    succeeded: Sequence[Any],
    latest: _Rows,
    quarantine_after_failures: int,
    rewrites: Sequence[RecentRewrite] = (),
) -> TableHistory:
    """A table's history from its newest runs (newest first), its last success per action and its
    newest predictions (newest first)."""
    failures = 0
    last_error = violation = None
    for run in runs:
        if run.outcome not in STREAK_OUTCOMES:
            break
        if run.outcome in ("conflict", ROLLED_BACK):  # neither counts nor breaks the streak
            continue
        failures += 1
        last_error = last_error or run.error
        violation = violation or (run.error if run.outcome == "violated" else None)
    conflicts = next((i for i, r in enumerate(runs) if r.outcome != "conflict"), len(runs))
    last_run_at = next((aware(r.finished_at) for r in runs if r.outcome != RELEASED), None)
    latest_run = next((r for r in runs if r.outcome != RELEASED), None)
    quarantined = failures >= quarantine_after_failures or violation is not None
    return TableHistory(
        table=table,
        last_succeeded={MaintenanceAction(a): aware(t) for a, t in succeeded},
        last_run_at=last_run_at,
        consecutive_failures=failures,
        last_error=last_error,
        quarantined=quarantined,
        quarantined_at=aware(runs[0].finished_at) if quarantined and runs else None,
        refused=latest_run.error if latest_run is not None and latest_run.outcome == "refused" else None,
        no_effect_on=_no_effect_on(latest),
        consecutive_conflicts=conflicts,
        last_conflict_at=aware(runs[0].finished_at) if conflicts else None,
        last_conflict=runs[0].error if conflicts else None,
        violation=violation,
        bytes_rewritten_24h=sum(r.bytes_rewritten for r in rewrites),
        recent_rewrites=tuple(rewrites),
    )


def _no_effect_on(latest: _Rows) -> dict[MaintenanceAction, int]:
    """Per action, the snapshot its newest prediction was made on, when that run had no effect."""
    newest: dict[str, Any] = {}
    for row in latest:
        newest.setdefault(row.action, row)
    return {
        MaintenanceAction(action): row.snapshot_id
        for action, row in newest.items()
        if row.status == "no_effect" and row.snapshot_id is not None
    }
