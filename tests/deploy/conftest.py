"""Fixtures for the deployment tests: a fresh PostgreSQL database for a Dagster instance's storage."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg2
import pytest

from tests.conftest import PG_ADMIN_DB, PG_HOST, PG_PORT, PG_USER


@pytest.fixture
def dagster_database() -> Iterator[str]:
    """An empty PostgreSQL database for one Dagster instance's run, event and schedule storage."""
    name = f"icepack_dagster_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=PG_ADMIN_DB,
                             connect_timeout=5)
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
