"""Shared fixtures: one real local Spark session per test run, a real embedded SQL catalog and a real
PostgreSQL-backed catalog, both under a temporary home.

Required components are checked once, up front: a missing Java, jar or PostgreSQL fails the whole run
with what to install. Nothing is skipped because a part is missing. Every test that uses Spark carries
the `spark` marker (collection fails otherwise), and the run fails when a process a test started
outlives the tests (`tests/processes.py`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import hypothesis
import psycopg2
import pytest
from pyspark import SparkContext
from pyspark.sql import SparkSession

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.exceptions import MissingComponentError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.spark.jvm_artifacts import ICEBERG_AWS_BUNDLE, cached_jar
from icepack_dagster.spark.session import build_spark_session, require_java, resolve_jars
from tests import processes, tiers

PG_HOST = os.environ.get("ICEPACK_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("ICEPACK_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("ICEPACK_TEST_PG_USER", "postgres")
PG_ADMIN_DB = os.environ.get("ICEPACK_TEST_PG_DB", "postgres")


def _admin_connection() -> psycopg2.extensions.connection:
    try:
        connection = psycopg2.connect(
            host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=PG_ADMIN_DB, connect_timeout=5
        )
    except psycopg2.OperationalError as error:
        pytest.exit(
            f"PostgreSQL is required for the tests and is not reachable at {PG_HOST}:{PG_PORT} as {PG_USER}: "
            f"{error}. Install and start PostgreSQL (Debian: apt-get install postgresql) or set "
            "ICEPACK_TEST_PG_HOST/PORT/USER.",
            returncode=3,
        )
    connection.autocommit = True
    return connection


@contextlib.contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database named `<prefix>_<random>`, dropped on exit."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = _admin_connection()
    with admin.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test run, dropped afterwards."""
    with fresh_database("icepack_test") as name:
        yield name


@pytest.fixture(scope="session")
def icepack_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("icepack_home")


@pytest.fixture(scope="session")
def settings(icepack_home: Path, postgres_database: str) -> Iterator[IcepackSettings]:
    """Two real catalogs: `lake` (embedded SQLite) and `pg` (PostgreSQL-backed SQL catalog). The run's
    own ICEPACK_* variables are unset for the session (and restored after it)."""
    jar_cache = os.environ.get("ICEPACK_SPARK__JAR_CACHE")  # where scripts/setup put the jars
    with pytest.MonkeyPatch.context() as environment:
        for key in [k for k in os.environ if k.startswith("ICEPACK_")]:
            environment.delenv(key)
        yield _test_settings(icepack_home, postgres_database, jar_cache)


def _test_settings(icepack_home: Path, postgres_database: str, jar_cache: str | None) -> IcepackSettings:
    return load_settings(
        home=icepack_home,
        catalogs={
            "lake": {"kind": "embedded"},
            "pg": {
                "kind": "postgres",
                "host": PG_HOST,
                "port": PG_PORT,
                "database": postgres_database,
                "user": PG_USER,
                "warehouse": str(icepack_home / "pg_warehouse"),
            },
        },
        spark={
            "master": "local[2]", "driver_memory": "1g", **({"jar_cache": jar_cache} if jar_cache else {})
        },
    )


@pytest.fixture(scope="session")
def catalogs(settings: IcepackSettings) -> CatalogSet:
    catalog_set = CatalogSet(settings)
    for name in catalog_set.names:  # creates the catalog tables before Spark's JDBC catalog looks
        catalog_set.get(name)
    return catalog_set


@pytest.fixture(scope="session")
def spark(settings: IcepackSettings, catalogs: CatalogSet):  # type: ignore[no-untyped-def]
    """The one real local Spark session of this test run, with the AWS SDK bundle on its classpath for
    the suite's catalogs on S3 and Glue (tests/config/catalogs), which join this JVM."""
    try:
        require_java()
        jars = [*resolve_jars(settings), str(cached_jar(ICEBERG_AWS_BUNDLE, settings.spark.jar_cache))]
    except MissingComponentError as error:
        pytest.exit(f"required component missing: {error}", returncode=3)
    spark_settings = settings.spark.model_copy(update={"jars": jars})
    session = build_spark_session(settings.model_copy(update={"spark": spark_settings}))
    yield session
    _stop_with_its_jvm(session)


def _stop_with_its_jvm(session: SparkSession) -> None:
    """Stop the session and end its JVM, which pyspark otherwise leaves running until this process
    exits: the gateway JVM exits when its stdin closes (pyspark's own contract, `java_gateway.py`)."""
    context = session.sparkContext
    gateway = context._gateway
    session.stop()
    if gateway is None:
        return
    gateway.shutdown()
    jvm = gateway.proc
    jvm.stdin.close()
    try:
        jvm.wait(timeout=60)
    except subprocess.TimeoutExpired:
        jvm.kill()
        jvm.wait(timeout=60)
    SparkContext._gateway = None
    SparkContext._jvm = None


@pytest.fixture
def namespace(request: pytest.FixtureRequest, catalogs: CatalogSet) -> str:
    """A fresh namespace in the embedded catalog for one test."""
    name = "t_" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:12]
    catalogs.get("lake").create_namespace_if_not_exists(name)
    return name


def pytest_configure(config: pytest.Config) -> None:
    """Property tests judge correctness, not speed: Hypothesis's per-example deadline (200 ms) fails
    healthy examples on a loaded 2-core machine, so it is off for the whole run. The examples are the
    same on every run (`derandomize`), so a submission's result does not depend on its luck; set
    ICEPACK_HYPOTHESIS_PROFILE=explore to draw new examples when hunting for bugs."""
    hypothesis.settings.register_profile("icepack", deadline=None, derandomize=True)
    hypothesis.settings.register_profile("explore", deadline=None)
    hypothesis.settings.load_profile(os.environ.get("ICEPACK_HYPOTHESIS_PROFILE", "icepack"))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Fail fast, naming the missing part, before any test runs; mark the processes the run starts."""
    _RUN_ENVIRONMENT.setenv(processes.RUN_MARKER, _RUN_ID)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.exit("Java 17 is required (Spark): apt-get install openjdk-17-jre-headless", returncode=3)
    for jar, package in [
        ("/usr/share/java/sqlite-jdbc.jar", "libxerial-sqlite-jdbc-java"),
        ("/usr/share/java/postgresql.jar", "libpostgresql-jdbc-java"),
    ]:
        if not Path(jar).is_file():
            pytest.exit(f"{jar} is required (Spark's JDBC catalog): apt-get install {package}", returncode=3)


_RUN_ID = uuid.uuid4().hex
_RUN_ENVIRONMENT = pytest.MonkeyPatch()
_SURVIVOR_GRACE_SECONDS = 15.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that uses the Spark session carries the `spark` marker, so `-m` selects honestly."""
    unmarked = sorted(
        {item.nodeid.split("::")[0] for item in items
         if "spark" in getattr(item, "fixturenames", ()) and item.get_closest_marker("spark") is None}
    )
    if unmarked:
        raise pytest.UsageError(f"these modules use the spark fixture without the spark marker: {unmarked}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the test's fixtures start anything: which slow tiers it is marked with (`tests/tiers.py`)."""
    tiers.entering(frozenset(marker.name for marker in item.iter_markers()))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a process a test started is still alive (and end it, so nothing is left)."""
    _RUN_ENVIRONMENT.undo()
    alive = processes.survivors(_RUN_ID, _SURVIVOR_GRACE_SECONDS)
    if not alive:
        return
    described = [processes.describe(process) for process in alive]
    processes.end(alive)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")
        reporter.write_sep("=", "processes started by the tests outlived them (now ended)", red=True)
        for line in described:
            reporter.write_line(f"  {line}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
