"""Fixtures of the platform suite: every test gets a fresh PostgreSQL database for Dagster's own
storage and a real instance configured by the production YAML (dagster-postgres), plus definitions
built from the session's real settings, scoped to the test's namespace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from tests.conftest import fresh_database
from tests.factories import settings_with_platform
from tests.platform.platform_testkit import pg_env, prod_instance_config


@pytest.fixture
def dagster_database() -> Iterator[str]:
    """A fresh PostgreSQL database for Dagster's storage, dropped after the test (daemons of one test
    never see the runs of another)."""
    with fresh_database("icepack_psafe") as name:
        yield name


@pytest.fixture
def pg_instance(dagster_database: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dg.DagsterInstance]:
    """A real instance on PostgreSQL storage, configured by deploy/dagster/dagster.prod.yaml."""
    for name, value in pg_env(dagster_database).items():
        monkeypatch.setenv(name, value)
    with dg.instance_for_test(overrides=prod_instance_config()) as instance:
        yield instance


@pytest.fixture
def scoped_settings(settings: IcepackSettings, namespace: str) -> IcepackSettings:
    """The session's settings, managing only the tables of this test's namespace."""
    return settings.model_copy(update={"include": [f"lake.{namespace}.*"]})


@pytest.fixture
def platform(tmp_path: Path) -> PlatformSettings:
    return PlatformSettings(
        health_sync_workers=2,
        max_maintenance_in_flight=4,
        maintenance_runs_per_tick=2,
        fleet_metrics_path=tmp_path / "metrics" / "icepack.prom",
    )


@pytest.fixture
def defs(scoped_settings: IcepackSettings, platform: PlatformSettings) -> dg.Definitions:
    return build_definitions(settings_with_platform(scoped_settings, platform))
