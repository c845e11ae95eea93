"""Fixtures for the Dagster layer: a real Dagster instance per test (SQLite in a temporary
DAGSTER_HOME, or PostgreSQL storage from deploy/dagster/dagster.prod.yaml in a fresh database per test
session), and definitions built from the session's real settings, scoped to the test's namespace so
tables made by other tests stay out of its partitions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psycopg2
import pytest
import yaml

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_database
from tests.factories import settings_with_platform

REPO = Path(__file__).resolve().parents[2]
PROD_YAML = REPO / "deploy" / "dagster" / "dagster.prod.yaml"


@pytest.fixture
def platform(tmp_path: Path) -> PlatformSettings:
    return PlatformSettings(
        health_sync_batch_size=200,
        health_sync_workers=4,
        max_maintenance_in_flight=2,
        maintenance_runs_per_tick=2,
        fleet_metrics_path=tmp_path / "metrics" / "icepack.prom",
    )


@pytest.fixture
def scoped_settings(settings: IcepackSettings, namespace: str) -> IcepackSettings:
    """The session's settings, managing only the tables of this test's namespace."""
    return settings.model_copy(update={"include": [f"lake.{namespace}.*"]})


@pytest.fixture
def defs(scoped_settings: IcepackSettings, platform: PlatformSettings) -> dg.Definitions:
    return build_definitions(settings_with_platform(scoped_settings, platform))


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture(scope="session")
def dagster_pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for Dagster's own storage, for this test session."""
    with fresh_database("icepack_dagster") as name:
        yield name


@pytest.fixture
def pg_instance(dagster_pg_database: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dg.DagsterInstance]:
    """An instance configured by the production YAML (dagster-postgres storage from DAGSTER_PG_* env)."""
    for name, value in {
        "DAGSTER_PG_HOST": PG_HOST,
        "DAGSTER_PG_PORT": str(PG_PORT),
        "DAGSTER_PG_USER": PG_USER,
        "DAGSTER_PG_PASSWORD": "",
        "DAGSTER_PG_DB": dagster_pg_database,
    }.items():
        monkeypatch.setenv(name, value)
    config = yaml.safe_load(PROD_YAML.read_text())
    with dg.instance_for_test(overrides=config) as test_instance:
        yield test_instance


def pg_table_count(database: str) -> int:
    """Tables Dagster created in its PostgreSQL database (proves the storage really is PostgreSQL)."""
    connection = psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=database)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")
            return int(cursor.fetchone()[0])
    finally:
        connection.close()
