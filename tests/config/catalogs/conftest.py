"""Fixtures of the catalog and storage suite: real servers started once per test session (Iceberg's
REST catalog server behind a recording proxy), and Spark sessions that address their catalogs.

The shared local Spark session was started with the suite's SQL catalogs; the catalogs here are added
to each new session exactly as `spark_catalog_conf` (the mapping every icepack session uses) renders
them, so the Java REST client, its OAuth2 exchange and its FileIO are Iceberg's own. A missing jar or
server fails the run with what to install; nothing is skipped.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from icepack_dagster.config.catalogs import spark_catalog_conf
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.exceptions import MissingComponentError
from tests.config.catalogs.servers import (
    ETAG_REST_SERVER,
    RecordingProxy,
    moto_server,
    rest_catalog_server,
)
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_database

S3_ACCESS_KEY_ID = "icepack-test-key"
S3_SECRET_ACCESS_KEY = "s3-Secret-Key-7d2c"
S3_REGION = "us-east-1"
STORE_DAYS_BEHIND = 5  # the object store's clock: every object it holds was written five days ago


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


@pytest.fixture(scope="session")
def etag_rest_server(tmp_path_factory: pytest.TempPathFactory, settings: IcepackSettings) -> Iterator[str]:
    """Iceberg's REST catalog server 1.11.0 (ETags and 304 on loadTable) for this test run; its URL."""
    workdir = tmp_path_factory.mktemp("etag_rest_catalog")
    try:
        with rest_catalog_server(settings.spark.jar_cache, workdir, ETAG_REST_SERVER) as url:
            yield url
    except MissingComponentError as error:
        pytest.exit(f"required component missing: {error}", returncode=3)


@pytest.fixture
def rest_proxy(rest_server: str) -> Iterator[RecordingProxy]:
    """A recording proxy in front of the REST server, fresh for each test."""
    with RecordingProxy(rest_server) as proxy:
        yield proxy


@pytest.fixture
def etag_rest_proxy(etag_rest_server: str) -> Iterator[RecordingProxy]:
    """A recording proxy in front of the REST server that sends ETags, fresh for each test."""
    with RecordingProxy(etag_rest_server) as proxy:
        yield proxy


@pytest.fixture
def catalog_home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 and Glue APIs for this test run, its clock five days behind; its URL."""
    with moto_server(tmp_path_factory.mktemp("moto"), days_behind=STORE_DAYS_BEHIND) as url:
        yield url


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=S3_ACCESS_KEY_ID,
        aws_secret_access_key=S3_SECRET_ACCESS_KEY,
        region_name=S3_REGION,
    )


def s3_storage(endpoint: str) -> dict[str, Any]:
    """The `s3` settings of a catalog whose tables live on the test's S3 API."""
    return {
        "endpoint": endpoint,
        "region": S3_REGION,
        "path_style_access": True,
        "access_key_id": S3_ACCESS_KEY_ID,
        "secret_access_key": S3_SECRET_ACCESS_KEY,
    }


@pytest.fixture
def s3_bucket(s3_server: str, request: pytest.FixtureRequest) -> str:
    """A new, empty bucket for one test."""
    name = "wh-" + uuid.uuid5(uuid.NAMESPACE_URL, request.node.nodeid).hex[:12]
    s3_client(s3_server).create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="session")
def s3_catalog_database() -> Iterator[str]:
    """A PostgreSQL database for the SQL catalog of the S3 tests."""
    with fresh_database("icepack_s3") as name:
        yield name


def s3_catalog(database: str, endpoint: str, warehouse: str) -> dict[str, Any]:
    """A PostgreSQL-backed Iceberg SQL catalog whose warehouse is on the S3 API."""
    return {
        "kind": "postgres",
        "host": PG_HOST,
        "port": PG_PORT,
        "database": database,
        "user": PG_USER,
        "warehouse": warehouse,
        "s3": s3_storage(endpoint),
    }
