"""Fixtures of the catalog and storage suite: real servers started once per test session (Iceberg's
REST catalog server behind a recording proxy), and Spark sessions that address their catalogs.

The shared local Spark session was started with the suite's SQL catalogs; the catalogs here are added
to each new session exactly as `spark_catalog_conf` (the mapping every icepack session uses) renders
them, so the Java REST client, its OAuth2 exchange and its FileIO are Iceberg's own. A missing jar or
server fails the run with what to install; nothing is skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from icepack_dagster.catalog_config import spark_catalog_conf
from icepack_dagster.exceptions import MissingComponentError
from icepack_dagster.settings import IcepackSettings
from tests.catalogs.servers import RecordingProxy, rest_catalog_server


class SessionsWithCatalogs:
    """The shared Spark session, whose new sessions also carry the given settings' catalogs; what
    `MaintenanceRunner` and the engine need of a SparkSession (`newSession`)."""

    def __init__(self, spark: Any, settings: IcepackSettings) -> None:
        # py4j logs each JVM command at DEBUG, secrets included: as `build_spark_session`, keep it at INFO
        logging.getLogger("py4j").setLevel(logging.INFO)
        self._spark = spark
        self.conf = {
            key: value
            for name, catalog in settings.catalogs.items()
            for key, value in spark_catalog_conf(name, catalog, settings).items()
        }

    def newSession(self) -> Any:  # noqa: N802 - SparkSession's own name
        session = self._spark.newSession()
        for key, value in self.conf.items():
            session.conf.set(key, value)
        return session


@pytest.fixture(scope="session")
def rest_server(tmp_path_factory: pytest.TempPathFactory, settings: IcepackSettings) -> Iterator[str]:
    """Iceberg's REST catalog server for this test run; its URL."""
    workdir = tmp_path_factory.mktemp("rest_catalog")
    try:
        with rest_catalog_server(settings.spark.jar_cache, workdir) as url:
            yield url
    except MissingComponentError as error:
        pytest.exit(f"required component missing: {error}", returncode=3)


@pytest.fixture
def rest_proxy(rest_server: str) -> Iterator[RecordingProxy]:
    """A recording proxy in front of the REST server, fresh for each test."""
    with RecordingProxy(rest_server) as proxy:
        yield proxy


@pytest.fixture
def catalog_home(tmp_path: Path) -> Path:
    return tmp_path / "home"
