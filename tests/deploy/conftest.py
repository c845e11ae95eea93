"""Fixtures for the deployment tests: a fresh PostgreSQL database for a Dagster instance's storage."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import fresh_database


@pytest.fixture
def dagster_database() -> Iterator[str]:
    """An empty PostgreSQL database for one Dagster instance's run, event and schedule storage."""
    with fresh_database("icepack_dagster") as name:
        yield name
