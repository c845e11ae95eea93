"""The tables of maintenance history (their shape is pinned by the Alembic migrations beside them): one
row per maintenance of a table, one per action, and one of planned and done figures per action that
ran with a prediction."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, DateTime, Integer, MetaData, String, Table, Text

_metadata = MetaData()

maintenance_runs = Table(
    "icepack_maintenance_runs",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("table_key", String(1024), nullable=False, index=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    Column("outcome", String(32), nullable=False),  # a report's outcome, or released
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

RELEASED = "released"  # the outcome of an operator's release: failures count from zero again
ROLLED_BACK = "rolled_back"  # an operator's rollback of the last maintenance (the pause stays)
# Outcomes a failure streak is counted through: failures and violations count, conflicts and rollbacks
# are passed over.
STREAK_OUTCOMES = ("failed", "violated", "conflict", ROLLED_BACK)
FAILURE_LOOKBACK = 100  # consecutive failures are counted up to this many
