"""Contract: one SQLAlchemy engine per state database and process, shared by maintenance history and
manifest summaries, disposed on request (and at exit); the database records its schema version and a
database written by a newer icepack is refused, naming both versions. Real SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, select, update

from icepack_dagster.exceptions import ConfigurationError
from icepack_dagster.state import state_database
from icepack_dagster.state.history_store import HistoryStore, maintenance_runs
from icepack_dagster.state.manifest_store import manifest_summaries
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
    engine = state_database.open_state_database(url, maintenance_runs.metadata)
    assert state_database.open_state_database(url, manifest_summaries.metadata) is engine
    tables = set(inspect(engine).get_table_names())
    assert {"icepack_schema_version", maintenance_runs.name, manifest_summaries.name} <= tables
    with engine.connect() as connection:
        versions = connection.execute(select(state_database.schema_version)).all()
    assert [tuple(row) for row in versions] == [("icepack", state_database.SCHEMA_VERSION)]


def test_disposed_engines_are_replaced_by_a_new_one(url: str) -> None:
    first = state_database.open_state_database(url, maintenance_runs.metadata)
    state_database.dispose_engines()
    second = state_database.open_state_database(url, maintenance_runs.metadata)
    assert second is not first
    assert HistoryStore(url).history("lake.ns.t", quarantine_after_failures=3).consecutive_failures == 0


def test_a_database_of_a_newer_schema_is_refused(url: str) -> None:
    engine = state_database.open_state_database(url, maintenance_runs.metadata)
    with engine.begin() as connection:
        newer = update(state_database.schema_version).values(version=state_database.SCHEMA_VERSION + 1)
        connection.execute(newer)
    state_database.dispose_engines()
    with pytest.raises(ConfigurationError, match=f"schema version {state_database.SCHEMA_VERSION + 1}"):
        HistoryStore(url)
