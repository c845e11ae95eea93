"""Which table a name means: the UUID of the Iceberg table last measured under each name.

History, facts and breakers are kept by table name, but a name can outlive its table: a table dropped
and created again under its old name is a new table, and Iceberg gives it a new UUID. When the engine
measures a table whose UUID differs from the one recorded for its name, the former table's history
(its runs, actions and predictions: the quarantine, the pauses, the cadence and the rewrite breaker
read them) is set aside under `name@former-uuid`, and every deployment's facts forget the former table's
last maintenance moment, in one transaction. The new table starts with a history of its own instead of
being held back by its predecessor's cadence, failures or pauses. Nothing is deleted: the former
history stays readable under its set-aside name, and the fleet's daily byte budget still counts what
the former table's rewrites read that day.

A name measured for the first time (or by an icepack from before this record) is recorded as it is:
nothing is set aside, since nothing says the history belongs to another table. Like the history and
the leases, the record is keyed by the name alone: deployments sharing a state database over one
catalog share it (the first to see a table created again sets the former history aside, once), and
two lakes sharing one must name their catalogs apart (docs/DAGSTER.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import Column, DateTime, MetaData, String, Table, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.engine import Engine as SqlEngine

from icepack_dagster.store.history_tables import action_predictions, action_runs, maintenance_runs
from icepack_dagster.store.state_database import open_state_database
from icepack_dagster.store.table_facts import table_facts

_metadata = MetaData()

table_identities = Table(
    "icepack_table_identities",
    _metadata,
    Column("table_key", String(1024), primary_key=True),
    Column("table_uuid", String(64), nullable=False),  # the Iceberg metadata's table-uuid
    Column("recorded_at", DateTime(timezone=True), nullable=False),  # when this UUID was first measured
)

_CHUNK = 500  # names per IN list


def set_aside_name(table: str, former_uuid: str) -> str:
    """The name the former table's history is kept under once its name means another table."""
    return f"{table}@{former_uuid}"


class TableIdentities:
    """Records the UUID each name means; safe to share across threads."""

    def __init__(self, url: str) -> None:
        self._engine: SqlEngine = open_state_database(url)

    def observe(self, measured: Mapping[str, str], at: datetime) -> dict[str, str]:
        """Record the UUIDs just measured (table name -> UUID); returns the tables whose name now means
        another table than before (name -> the former UUID), whose former history was set aside."""
        if not measured:
            return {}
        with self._engine.begin() as connection:
            known = self._recorded(connection, list(measured))
            new = [t for t in measured if t not in known]
            replaced = {t: known[t] for t in measured if t in known and known[t] != measured[t]}
            if new:
                dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
                rows = [{"table_key": t, "table_uuid": measured[t], "recorded_at": at} for t in new]
                # Another process may record the same first measurement at once: the first one stays.
                connection.execute(dialect.insert(table_identities).on_conflict_do_nothing(), rows)
            for table, former in replaced.items():
                self._set_aside(connection, table, former, measured[table], at)
        return replaced

    def _recorded(self, connection: Connection, tables: list[str]) -> dict[str, str]:
        c = table_identities.c
        found: dict[str, str] = {}
        for start in range(0, len(tables), _CHUNK):
            query = select(c.table_key, c.table_uuid).where(c.table_key.in_(tables[start : start + _CHUNK]))
            found.update({row.table_key: row.table_uuid for row in connection.execute(query)})
        return found

    def _set_aside(
        self, connection: Connection, table: str, former: str, now_uuid: str, at: datetime
    ) -> None:
        aside = set_aside_name(table, former)
        for history in (maintenance_runs, action_runs, action_predictions):
            connection.execute(update(history).where(history.c.table_key == table).values(table_key=aside))
        facts = table_facts.c
        connection.execute(
            update(table_facts).where(facts.table_key == table).values(maintained_at=None, outcome=None)
        )
        ids = table_identities.c
        connection.execute(
            update(table_identities).where(ids.table_key == table).values(table_uuid=now_uuid, recorded_at=at)
        )
