"""Contract: the state database is migrated with Alembic, never by `create_all`. A database written by
the icepack from before migrations (its tables created on first use, holding history) is adopted at the
baseline and upgraded without losing a row or changing a decision; a second upgrade changes nothing; the
newest revision builds exactly the tables the stores query; a database a newer icepack migrated is
refused, naming its revision. Real SQLite and real PostgreSQL; `icepack state upgrade` as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    insert,
    inspect,
    text,
)

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.health.model import HealthState, TableHealth
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.exceptions import ConfigurationError
from icepack_dagster.store import (
    history_tables,
    manifest_store,
    schema_migrations,
    state_database,
    table_facts,
    table_identities,
    table_lease,
)
from icepack_dagster.store.history_store import HistoryStore
from icepack_dagster.store.table_facts import Measurement, TableFactsStore
from icepack_dagster.store.table_lease import TableLeases

ICEPACK = str(Path(sys.executable).parent / "icepack")
T0 = datetime(2026, 1, 5, 3, 0, tzinfo=UTC)

# The schema as the icepack before migrations created it (its history and manifest stores, unchanged
# since then): the baseline revision must adopt a database built from exactly these definitions.
_old = MetaData()
Table(
    "icepack_maintenance_runs",
    _old,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("table_key", String(1024), nullable=False, index=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    Column("outcome", String(32), nullable=False),
    Column("error", Text),
    Column("report", Text),
)
Table(
    "icepack_action_runs",
    _old,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("table_key", String(1024), nullable=False, index=True),
    Column("action", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
)
Table(
    "icepack_manifest_summaries_v1",
    _old,
    Column("path", Text, primary_key=True),
    Column("small_threshold", BigInteger, primary_key=True),
    Column("summary", Text, nullable=False),
    Column("stored_at", DateTime(timezone=True), nullable=False, index=True),
)


def _old_database(url: str) -> None:
    """A database as the icepack before migrations left it: two tables' history and a cached summary."""
    engine = create_engine(url)
    _old.create_all(engine)
    runs, actions, summaries = (
        _old.tables[f"icepack_{n}"] for n in ("maintenance_runs", "action_runs", "manifest_summaries_v1")
    )
    run = {"started_at": T0, "report": "{}", "error": None}
    with engine.begin() as connection:
        connection.execute(
            insert(runs),
            [
                {**run, "table_key": "lake.ns.broken", "finished_at": T0, "outcome": "succeeded"},
                *(
                    {
                        **run,
                        "table_key": "lake.ns.broken",
                        "finished_at": T0 + timedelta(days=d),
                        "outcome": "failed",
                        "error": f"boom {d}",
                    }
                    for d in (1, 2, 3)
                ),
                {**run, "table_key": "lake.ns.fine", "finished_at": T0, "outcome": "succeeded"},
            ],
        )
        connection.execute(
            insert(actions),
            [
                {
                    "table_key": "lake.ns.broken",
                    "action": "rewrite_data_files",
                    "status": "succeeded",
                    "finished_at": T0,
                },
                {
                    "table_key": "lake.ns.broken",
                    "action": "expire_snapshots",
                    "status": "failed",
                    "finished_at": T0 + timedelta(days=1),
                },
                {
                    "table_key": "lake.ns.fine",
                    "action": "expire_snapshots",
                    "status": "succeeded",
                    "finished_at": T0,
                },
            ],
        )
        connection.execute(
            insert(summaries),
            [{"path": "s3://m/1.avro", "small_threshold": 1, "summary": "{}", "stored_at": T0}],
        )
    engine.dispose()


def _rows(url: str, table: str, order: str = "id") -> list[tuple[object, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text(f"SELECT * FROM {table} ORDER BY {order}")).all()
            return [tuple(row) for row in rows]
    finally:
        engine.dispose()


def _upgrade_to(url: str, revision: str) -> None:
    """The database migrated to `revision` (not the newest): a database an older icepack left."""
    engine = create_engine(url)
    config = schema_migrations._config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    engine.dispose()


def _revision(url: str) -> str | None:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return schema_migrations.current_revision(connection)
    finally:
        engine.dispose()


def test_an_old_database_is_adopted_and_upgraded_at_start_up_without_loss(url: str) -> None:
    _old_database(url)
    before = {t: _rows(url, t) for t in ("icepack_maintenance_runs", "icepack_action_runs")}
    assert _revision(url) is None

    history = HistoryStore(url)  # the first open in this process migrates

    assert _revision(url) == schema_migrations.head_revision()
    assert {t: _rows(url, t) for t in before} == before
    tables = set(inspect(create_engine(url)).get_table_names())
    assert {"icepack_action_predictions", "icepack_table_leases", "icepack_manifest_summaries_v4"} <= tables
    dead = {f"icepack_manifest_summaries_v{v}" for v in (1, 2, 3)} | {"icepack_schema_version"}
    assert not dead & tables  # dead caches, the old version table
    assert history.history("lake.ns.broken", quarantine_after_failures=3) == TableHistory(
        table="lake.ns.broken",
        last_succeeded={MaintenanceAction.REWRITE_DATA_FILES: T0},
        last_run_at=T0 + timedelta(days=3),
        consecutive_failures=3,
        last_error="boom 3",
        quarantined=True,
        quarantined_at=T0 + timedelta(days=3),
    )
    assert history.history("lake.ns.fine", quarantine_after_failures=3) == TableHistory(
        table="lake.ns.fine", last_succeeded={MaintenanceAction.EXPIRE_SNAPSHOTS: T0}, last_run_at=T0
    )
    with TableLeases(url, timedelta(minutes=1)).hold("lake.ns.fine", "test"):
        pass  # the new tables work, not just exist

    again = state_database.upgrade_state_database(url)
    assert (again.before, again.after, again.changed) == (schema_migrations.head_revision(),) * 2 + (False,)
    assert {t: _rows(url, t) for t in before} == before


def test_a_database_at_the_previous_head_gains_empty_table_facts_and_keeps_its_history(url: str) -> None:
    """0003 -> head: the table facts (0004) start empty (the next health sync fills them), numbering from
    1."""
    _upgrade_to(url, "0003")
    with create_engine(url).begin() as connection:
        connection.execute(insert(history_tables.maintenance_runs).values(
            table_key="lake.ns.t", started_at=T0, finished_at=T0, outcome="succeeded"
        ))
    before = _rows(url, "icepack_maintenance_runs")

    facts = TableFactsStore(url, "icepack")  # the first open in this process migrates

    assert _revision(url) == schema_migrations.head_revision()
    assert _rows(url, "icepack_maintenance_runs") == before
    assert facts.measured(["lake.ns.t"]) == {} and facts.reclaimed() == (0, 0)
    health = TableHealth(table="lake.ns.t", state=HealthState.HEALTHY)
    numbers = facts.record_measurements([Measurement("lake.ns.t", None, "unreadable", health)], T0)
    assert numbers == {"lake.ns.t": 1}
    assert [(e.table, e.health_event, e.health) for e in facts.health_events_after(0, 10)] == [
        ("lake.ns.t", 1, health)
    ]


def test_a_database_with_table_facts_gains_deletion_vector_summaries_and_keeps_its_facts(url: str) -> None:
    """0004 -> 0005: the manifest summaries that counted deletion vectors as position delete files are a
    cache, dropped for version 4 (decoded again on first use); the facts and the history stay."""
    _upgrade_to(url, "0004")
    with create_engine(url).begin() as connection:
        connection.execute(insert(history_tables.maintenance_runs).values(
            table_key="lake.ns.t", started_at=T0, finished_at=T0, outcome="refused", error="too old"
        ))
        connection.execute(insert(table_facts.table_facts).values(
            deployment="icepack", table_key="lake.ns.t", operator_verdict="runtime_refused",
            outcome="refused", files_reclaimed=3, bytes_reclaimed=300,
        ))
        connection.execute(text(
            "INSERT INTO icepack_manifest_summaries_v3 (path, small_threshold, summary, stored_at) "
            "VALUES ('s3://w/m.avro', 1, '{}', :at)"
        ), {"at": T0})
    kept = {"icepack_maintenance_runs": "id", "icepack_table_facts": "table_key"}
    before = {t: _rows(url, t, order) for t, order in kept.items()}

    state_database.upgrade_state_database(url)

    assert _revision(url) == schema_migrations.head_revision()
    assert {t: _rows(url, t, order) for t, order in kept.items()} == before
    tables = set(inspect(create_engine(url)).get_table_names())
    assert "icepack_manifest_summaries_v4" in tables and "icepack_manifest_summaries_v3" not in tables
    assert _rows(url, "icepack_manifest_summaries_v4", "path") == []


def test_a_database_with_summaries_v4_gains_empty_table_identities_and_keeps_its_state(url: str) -> None:
    """0005 -> 0006: the table identities start empty (every name is recorded as it is when next
    measured, nothing set aside); history and facts stay as they were."""
    _upgrade_to(url, "0005")
    with create_engine(url).begin() as connection:
        connection.execute(insert(history_tables.maintenance_runs).values(
            table_key="lake.ns.t", started_at=T0, finished_at=T0, outcome="violated", error="removed 1 file"
        ))
        connection.execute(insert(table_facts.table_facts).values(
            deployment="icepack", table_key="lake.ns.t", outcome="violated", maintained_at=T0,
            files_reclaimed=0, bytes_reclaimed=0,
        ))
    kept = {"icepack_maintenance_runs": "id", "icepack_table_facts": "table_key"}
    before = {t: _rows(url, t, order) for t, order in kept.items()}

    state_database.upgrade_state_database(url)

    assert _revision(url) == schema_migrations.head_revision() == "0006"
    assert {t: _rows(url, t, order) for t, order in kept.items()} == before
    assert _rows(url, "icepack_table_identities", "table_key") == []


def test_icepack_state_upgrade_adopts_an_old_database_once(url: str, tmp_path: Path) -> None:
    _old_database(url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    env |= {"ICEPACK_HOME": str(tmp_path / "home"), "ICEPACK_STATE_URL": url}
    head = schema_migrations.head_revision()

    def upgrade(*options: str) -> str:
        done = subprocess.run(
            [ICEPACK, "state", "upgrade", *options], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert f"upgraded from schema revision none (written before migrations) to {head}" in upgrade()
    assert f"already at schema revision {head}, nothing to do" in upgrade()
    assert json.loads(upgrade("--json")) == {
        "before": head,
        "after": head,
        "changed": False,
        "adopted": False,
    }
    assert _revision(url) == head


def test_the_newest_revision_builds_exactly_the_tables_the_stores_query(url: str) -> None:
    state_database.upgrade_state_database(url)
    stores = MetaData()
    for module in (history_tables, manifest_store, table_facts, table_identities, table_lease):
        for table in module._metadata.tables.values():
            table.to_metadata(stores)
    engine = create_engine(url)
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"version_table": schema_migrations.VERSION_TABLE}
        )
        assert compare_metadata(context, stores) == []
    engine.dispose()


def test_a_database_a_newer_icepack_migrated_is_refused(url: str) -> None:
    state_database.upgrade_state_database(url)
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE {schema_migrations.VERSION_TABLE} SET version_num = '9999'"))
    engine.dispose()
    message = "schema revision 9999, which this icepack does not know .*a newer icepack migrated it"
    with pytest.raises(ConfigurationError, match=message):
        HistoryStore(url)
    with pytest.raises(ConfigurationError, match=message):
        state_database.upgrade_state_database(url)
    assert _revision(url) == "9999"  # refused, not rewritten


def test_a_database_from_before_alembic_keeps_its_newer_tables_rows(url: str) -> None:
    """icepack releases between the baseline and migrations created every table on first use and kept
    a version row of their own: their leases and predictions survive, their version table goes."""
    engine = create_engine(url)
    for module in (history_tables, table_lease):
        module._metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(
            text("CREATE TABLE icepack_schema_version (component VARCHAR(64), version INTEGER)")
        )
        connection.execute(
            insert(table_lease.table_leases).values(
                table_key="lake.ns.t", holder="pid 1", token="t", acquired_at=T0, expires_at=T0
            )
        )
    engine.dispose()
    leases = _rows(url, "icepack_table_leases", order="table_key")

    assert state_database.upgrade_state_database(url).adopted

    assert _rows(url, "icepack_table_leases", order="table_key") == leases
    assert "icepack_schema_version" not in inspect(create_engine(url)).get_table_names()


def test_processes_starting_at_once_migrate_once(url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    env |= {"ICEPACK_HOME": str(tmp_path / "home"), "ICEPACK_STATE_URL": url}
    started = [
        subprocess.Popen([ICEPACK, "state", "upgrade"], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [process.communicate(timeout=120)[0] for process in started]
    assert [process.returncode for process in started] == [0, 0, 0], outputs
    assert sum("upgraded from schema revision none (new)" in output for output in outputs) == 1, outputs
    assert _revision(url) == schema_migrations.head_revision()
