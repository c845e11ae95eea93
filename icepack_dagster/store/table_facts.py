"""Each table's latest facts as icepack's decisions read them: its status and health as the last health
sync wrote them (with whether a person must act on it, the `needs_operator` verdict), and its last
maintenance outcome with the files and bytes maintenance reclaimed from it so far. One row per table and
icepack deployment in the state database, written at the moment the matching Dagster materializations
are logged (which stay what people read in the UI); the sensors, the checks and the fleet summary read
these rows, never Dagster's event log, so deleting Dagster runs changes no decision.

Several icepack deployments (`platform.deployment_name`) may share one state database (they share it
when they share a home or a `state_url`): every row carries its deployment and every read and sum is of
one deployment's rows, so two deployments, even ones naming a table alike, never see each other's facts.

Every write of a health takes the next number of one counter (`health_event`, shared by the
deployments: a number is unique in the database), in the transaction that writes it: the maintenance
sensor reads its deployment's healths written after the last number it saw, in one indexed query, and
names its runs after the number. The counter row is updated first, so concurrent
writers hold it in turn and their numbers commit in order (a reader never sees a number before a
smaller one that is still to commit).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.engine import Engine as SqlEngine

from icepack_dagster.domain.health.model import TableHealth
from icepack_dagster.domain.outcomes.maintenance_impact import maintenance_impact
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.store.history_reads import aware
from icepack_dagster.store.state_database import open_state_database

_metadata = MetaData()

table_facts = Table(
    "icepack_table_facts",
    _metadata,
    Column("deployment", String(40), primary_key=True),  # platform.deployment_name
    Column("table_key", String(1024), primary_key=True),
    Column("status", Text),  # TableStatus as JSON; None when it could not be measured
    Column("status_error", Text),
    Column("health", Text),  # TableHealth as JSON
    Column("operator_verdict", String(32)),  # the needs_operator reason written with the health, or "no"
    Column("health_event", BigInteger),
    Column("measured_at", DateTime(timezone=True)),  # when status and health were last written
    Column("maintained_at", DateTime(timezone=True)),  # the last maintenance outcome's moment
    Column("outcome", String(32)),
    Column("files_reclaimed", BigInteger, nullable=False, default=0),
    Column("bytes_reclaimed", BigInteger, nullable=False, default=0),
    Index("ix_icepack_table_facts_deployment_health_event", "deployment", "health_event"),
)

fact_counter = Table(
    "icepack_fact_counter",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("last_health_event", BigInteger, nullable=False),
)

# Up to this many tables a read names them (IN lists of _CHUNK); beyond it, it reads every row and
# keeps the ones asked for: one query for the whole fleet rather than hundreds.
_NAMED_TABLES_MAX = 5000
_CHUNK = 500
_KEY = ["deployment", "table_key"]


@dataclass(frozen=True)
class Measurement:
    """What one health sync found for one table: its status (or why it could not be read), its health,
    and whether a person must act on it (the needs_operator reason, "no"; None: not judged)."""

    table: str
    status: TableStatus | None
    status_error: str | None
    health: TableHealth
    operator_verdict: str | None = None


@dataclass(frozen=True)
class MeasuredTable:
    """A table's latest status, health and needs_operator verdict as recorded, the number of that
    health's write, and when its last maintenance outcome was recorded."""

    table: str
    status: TableStatus | None
    health: TableHealth | None
    health_event: int
    measured_at: datetime
    maintained_at: datetime | None = None
    operator_verdict: str | None = None


@dataclass(frozen=True)
class HealthEvent:
    """A health written after the sensor's last look: which table, its number, the health."""

    table: str
    health_event: int
    health: TableHealth | None


M = TypeVar("M", bound=BaseModel)


def _decoded(model: type[M], text: str | None) -> M | None:
    """The JSON as `model`; None when absent or from a shape this icepack no longer reads (the table is
    then measured, judged and written again like a new one)."""
    if text is None:
        return None
    try:
        return model.model_validate_json(text)
    except ValidationError:
        return None


def _upsert(connection: Connection, rows: list[dict[str, object]], updated: Iterable[str]) -> None:
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(table_facts)
    columns = {name: statement.excluded[name] for name in updated}
    connection.execute(statement.on_conflict_do_update(index_elements=_KEY, set_=columns), rows)


class TableFactsStore:
    """Reads and writes one deployment's table facts; safe to share across threads."""

    def __init__(self, url: str, deployment: str) -> None:
        self._engine: SqlEngine = open_state_database(url)
        self._deployment = deployment
        self._own = table_facts.c.deployment == deployment

    def record_measurements(self, measurements: Sequence[Measurement], at: datetime) -> dict[str, int]:
        """Record one sync batch's statuses and healths in one transaction; returns each table's number."""
        measurements = list({m.table: m for m in measurements}.values())  # one row per table in a statement
        if not measurements:
            return {}
        with self._engine.begin() as connection:
            connection.execute(
                update(fact_counter)
                .where(fact_counter.c.id == 1)
                .values(last_health_event=fact_counter.c.last_health_event + len(measurements))
            )
            last = connection.execute(select(fact_counter.c.last_health_event)).scalar_one()
            first = last - len(measurements) + 1
            numbers = {m.table: first + i for i, m in enumerate(measurements)}
            rows: list[dict[str, object]] = [
                {
                    "deployment": self._deployment,
                    "table_key": m.table,
                    "status": m.status.model_dump_json() if m.status is not None else None,
                    "status_error": m.status_error,
                    "health": m.health.model_dump_json(),
                    "operator_verdict": m.operator_verdict,
                    "health_event": numbers[m.table],
                    "measured_at": at,
                    "files_reclaimed": 0,
                    "bytes_reclaimed": 0,
                }
                for m in measurements
            ]
            updated = ("status", "status_error", "health", "operator_verdict", "health_event", "measured_at")
            _upsert(connection, rows, updated)
        return numbers

    def record_maintenance(self, report: MaintenanceReport, outcome: str, at: datetime) -> None:
        """A maintenance's outcome (as its `maintained_table` event says it) and what it reclaimed. A dry
        run changed nothing and is not recorded; a failed one is, with nothing counted as reclaimed."""
        if outcome == "dry_run":
            return
        impact = maintenance_impact(report)
        counted = outcome not in ("failed", "violated")  # as their runs materialize nothing
        files, size = (impact.files_reclaimed, impact.bytes_reclaimed) if counted else (0, 0)
        self.record_outcome(report.table, outcome, at, files, size)

    def record_outcome(self, table: str, outcome: str, at: datetime, files: int, size: int) -> None:
        """A maintenance outcome of `table` and what it reclaimed (added to the table's totals)."""
        with self._engine.begin() as connection:
            dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
            statement = dialect.insert(table_facts).values(
                deployment=self._deployment, table_key=table, maintained_at=at, outcome=outcome,
                files_reclaimed=files, bytes_reclaimed=size,
            )
            connection.execute(statement.on_conflict_do_update(
                index_elements=_KEY,
                set_={
                    "maintained_at": at,
                    "outcome": outcome,
                    "files_reclaimed": table_facts.c.files_reclaimed + files,
                    "bytes_reclaimed": table_facts.c.bytes_reclaimed + size,
                },
            ))

    def measured(self, tables: Sequence[str]) -> dict[str, MeasuredTable]:
        """The recorded status and health of those of `tables` that have them: a query per 500 named
        tables (a sync batch), or one query over every row of the deployment for more (the fleet)."""
        columns = (table_facts.c.table_key, table_facts.c.status, table_facts.c.health,
                   table_facts.c.health_event, table_facts.c.measured_at, table_facts.c.maintained_at,
                   table_facts.c.operator_verdict)
        query = select(*columns).where(self._own, table_facts.c.health_event.is_not(None))
        wanted = sorted(set(tables))
        if len(wanted) > _NAMED_TABLES_MAX:
            queries = [query]
        else:
            queries = [query.where(table_facts.c.table_key.in_(wanted[start : start + _CHUNK]))
                       for start in range(0, len(wanted), _CHUNK)]
        found = set(wanted)
        measured = {}
        with self._engine.connect() as connection:
            for each in queries:
                for row in connection.execute(each):
                    if row.table_key in found:
                        measured[row.table_key] = MeasuredTable(
                            table=row.table_key,
                            status=_decoded(TableStatus, row.status),
                            health=_decoded(TableHealth, row.health),
                            health_event=row.health_event,
                            measured_at=aware(row.measured_at),
                            maintained_at=aware(row.maintained_at) if row.maintained_at else None,
                            operator_verdict=row.operator_verdict,
                        )
        return measured

    def health_events_after(self, after: int, limit: int) -> list[HealthEvent]:
        """The deployment's healths written after number `after`, oldest first, at most `limit`: one
        indexed query. A row holds only a table's newest health, so a table rewritten since appears
        once, at its newest."""
        query = (
            select(table_facts.c.table_key, table_facts.c.health_event, table_facts.c.health)
            .where(self._own, table_facts.c.health_event > after)
            .order_by(table_facts.c.health_event)
            .limit(limit)
        )
        with self._engine.connect() as connection:
            rows = connection.execute(query).all()
        return [HealthEvent(r.table_key, r.health_event, _decoded(TableHealth, r.health)) for r in rows]

    def reclaimed(self) -> tuple[int, int]:
        """(files, bytes) maintenance has reclaimed over every table of the deployment so far."""
        query = select(func.coalesce(func.sum(table_facts.c.files_reclaimed), 0),
                       func.coalesce(func.sum(table_facts.c.bytes_reclaimed), 0)).where(self._own)
        with self._engine.connect() as connection:
            files, size = connection.execute(query).one()
        return int(files), int(size)
