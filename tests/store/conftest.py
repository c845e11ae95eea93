"""The state database the store tests write to: real SQLite and real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from icepack_dagster.store import state_database
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_database


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh state database's URL: a SQLite file, or a new PostgreSQL database dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
        state_database.dispose_engines()
        return
    with fresh_database("icepack_state_store") as name:
        yield f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
        state_database.dispose_engines()  # before the database is dropped
