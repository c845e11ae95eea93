"""Fixtures of the engine's tests: an engine over the session's real catalogs and real Spark session,
with a maintenance history of its own per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.history_store import HistoryStore


@pytest.fixture
def engine(settings: IcepackSettings, catalogs: CatalogSet, spark, tmp_path: Path) -> Engine:  # type: ignore[no-untyped-def]
    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    return Engine(settings, catalogs, spark_provider=lambda: spark, history=history)
