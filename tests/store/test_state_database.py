"""Contract: one SQLAlchemy engine per state database and process, shared by maintenance history and
manifest summaries, disposed on request (and at exit); the first open migrates the database to the
newest schema revision (test_state_migrations.py covers upgrades and refusals). Real SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect

from icepack_dagster.store import schema_migrations, state_database
from icepack_dagster.store.history_store import HistoryStore, maintenance_runs
from icepack_dagster.store.manifest_store import manifest_summaries
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_database


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
        return
    with fresh_database("icepack_state") as name:
        yield f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
        state_database.dispose_engines()  # before the database is dropped


def test_history_and_manifest_summaries_share_one_engine(url: str) -> None:
    engine = state_database.open_state_database(url)
    assert state_database.open_state_database(url) is engine
    tables = set(inspect(engine).get_table_names())
    assert {schema_migrations.VERSION_TABLE, maintenance_runs.name, manifest_summaries.name} <= tables
    with engine.connect() as connection:
        assert schema_migrations.current_revision(connection) == schema_migrations.head_revision()


def test_disposed_engines_are_replaced_by_a_new_one(url: str) -> None:
    first = state_database.open_state_database(url)
    state_database.dispose_engines()
    second = state_database.open_state_database(url)
    assert second is not first
    assert HistoryStore(url).history("lake.ns.t", quarantine_after_failures=3).consecutive_failures == 0
