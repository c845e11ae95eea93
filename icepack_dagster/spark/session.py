"""Spark sessions for maintenance: Iceberg extensions, every configured catalog, the right jars.

The only package that imports pyspark. A missing Java or jar stops here with what to install. An
`sc://` master is a Spark Connect server (`spark/connect.py`): it owns the JVM, the jars and the static
configuration, so a Connect session gets only runtime SQL settings and needs no local Java or jar.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from icepack_dagster.config.catalogs import (
    POSTGRES_JDBC_JAR,
    SQLITE_JDBC_JAR,
    jdbc_driver_jars,
    needs_aws_bundle,
    redact_conf,
    spark_catalog_conf,
)
from icepack_dagster.config.settings import IcepackSettings, java_home
from icepack_dagster.exceptions import MissingComponentError
from icepack_dagster.spark.jvm_artifacts import ICEBERG_AWS_BUNDLE, ICEBERG_SPARK_RUNTIME, cached_jar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SPARK_REDACTION_REGEX = "(?i)secret|password|token|credential|access[.]key"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
_JAR_PACKAGES = {
    SQLITE_JDBC_JAR: "the Debian package libxerial-sqlite-jdbc-java",
    POSTGRES_JDBC_JAR: "the Debian package libpostgresql-jdbc-java",
}


def default_jars(settings: IcepackSettings) -> list[str]:
    """The pinned Iceberg runtime from the jar cache, the AWS bundle where a catalog reaches S3 or Glue,
    and the JDBC drivers of the SQL catalogs."""
    artifacts = [ICEBERG_SPARK_RUNTIME, *([ICEBERG_AWS_BUNDLE] if needs_aws_bundle(settings) else [])]
    cache = settings.spark.jar_cache
    return [str(cached_jar(artifact, cache)) for artifact in artifacts] + jdbc_driver_jars(settings)


def resolve_jars(settings: IcepackSettings) -> list[str]:
    """Configured jars (`spark.jars`), or `default_jars`. Every local jar must exist; a missing one names
    what provides it."""
    jars = settings.spark.jars if settings.spark.jars is not None else default_jars(settings)
    for jar in jars:
        if "://" not in jar and not Path(jar).is_file():
            hint = _JAR_PACKAGES.get(jar, "the artifact that provides it, or fix ICEPACK_SPARK__JARS")
            raise MissingComponentError(f"Spark jar {jar} is missing: install {hint}")
    return jars


def require_java() -> None:
    """Spark needs a JVM; say how to get one instead of failing deep inside py4j."""
    home = java_home()
    if home and Path(home, "bin", "java").is_file():
        return
    if shutil.which("java") is None:
        raise MissingComponentError(
            "Java is missing: Spark needs Java 17 (Debian: apt-get install openjdk-17-jre-headless)"
        )


def is_connect_master(master: str) -> bool:
    return master.startswith("sc://")


def is_connect_session(spark: SparkSession) -> bool:
    """A Spark Connect client session, which has no JVM on this side. Such a session exists only once
    pyspark's Connect module is imported, so a classic process never loads the Connect client for this."""
    connect = sys.modules.get("pyspark.sql.connect.session")
    return connect is not None and isinstance(spark, connect.SparkSession)


def statement_rows(session: SparkSession, result: DataFrame) -> list[dict[str, Any]]:
    """A statement's result rows: on Spark Connect the rows `sql()` already brought back for a command
    (`spark/connect.py`: no second round trip), else collected from the driver."""
    if is_connect_session(session):
        from icepack_dagster.spark.connect import command_rows  # loads the Connect client: sc:// only

        return command_rows(result)  # type: ignore[arg-type]
    return [row.asDict() for row in result.collect()]


# A Spark Connect server keeps compiling generated code a plain session compiles once. Spark 3.5 runs each
# statement under a class loader of its own and keys its cache of compiled code by class loader, so
# every statement compiles again: 21-36 classes loaded per small table, against about one in a plain
# session. Spark 4.0 and 4.1 still compiled 718-740 times for 40 small tables, mostly in executor tasks
# (bench/HISTORY.md, 27 November 2026, afternoon). With the whole server interpreted (a scratch
# measure) it loaded 2-5 classes per table.
INTERPRETED_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def connect_batch_conf(settings: IcepackSettings) -> dict[str, str]:
    """What the shared sessions of a batch run (small tables only) set over `runtime_conf`: on an `sc://`
    master, Spark's code generation off (`INTERPRETED_CONF`), unless `spark.connect_batch_codegen` keeps
    it or `spark.conf` sets the key itself. A classic session's cache works, so it keeps its codegen."""
    if not is_connect_master(settings.spark.master) or settings.spark.connect_batch_codegen:
        return {}
    return {key: value for key, value in INTERPRETED_CONF.items() if key not in settings.spark.conf}


def runtime_conf(settings: IcepackSettings) -> dict[str, str]:
    """What a running session may set: the catalogs, the time zone and `settings.spark.conf` (only
    `spark.sql.*` for an `sc://` master). All a Spark Connect session gets: jars, SQL extensions and
    driver settings are the server's."""
    conf = {"spark.sql.session.timeZone": "UTC"}
    for name, catalog in settings.catalogs.items():
        conf |= spark_catalog_conf(name, catalog, settings)
    return conf | settings.spark.conf


def spark_conf(settings: IcepackSettings) -> dict[str, str]:
    """The Spark configuration of a maintenance session (contains secrets: see `redact_conf`): in full
    for a classic session, `runtime_conf` for an `sc://` master."""
    if is_connect_master(settings.spark.master):
        return runtime_conf(settings)
    conf = {
        "spark.app.name": settings.spark.app_name,
        "spark.master": settings.spark.master,
        "spark.jars": ",".join(resolve_jars(settings)),
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        "spark.driver.memory": settings.spark.driver_memory,
        "spark.ui.showConsoleProgress": "false",
        # Spark masks conf values whose keys match this in its UI, event logs and REST API; its default
        # misses `credential` (REST catalogs' OAuth2 client secret), so every secret key is named.
        "spark.redaction.regex": SPARK_REDACTION_REGEX,
    }
    log_config = Path(__file__).with_name("log4j2.properties")
    conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={log_config.as_uri()}"
    return conf | local_master_conf(settings.spark.master) | runtime_conf(settings)


def local_master_conf(master: str) -> dict[str, str]:
    """For a `local[N]` master (a classic session or a Connect server on one machine): no UI, loopback
    only, and 4 shuffle partitions instead of Spark's 200, which would make orphan removal's anti-join
    on a small table mostly task scheduling."""
    if not master.startswith("local"):
        return {}
    return {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }


def describe_spark_conf(settings: IcepackSettings) -> dict[str, str]:
    """What `spark_conf` would set, safe to print."""
    return redact_conf(spark_conf(settings))


def build_spark_session(settings: IcepackSettings) -> SparkSession:
    """Start (or join) the process's Spark session with icepack's configuration; for an `sc://` master,
    open a session on that Spark Connect server once it answers."""
    if is_connect_master(settings.spark.master):
        from icepack_dagster.spark.connect import connect_session

        remote = connect_session(
            settings.spark.master,
            runtime_conf(settings),
            settings.spark.connect_timeout_seconds,
            settings.spark.connect_ui_url,
        )
        return cast("SparkSession", remote)  # pyspark's Connect session mirrors the classic API
    require_java()
    # py4j logs every JVM command at DEBUG, including catalog passwords set below: never below INFO.
    py4j_logger = logging.getLogger("py4j")
    if py4j_logger.getEffectiveLevel() < logging.INFO:
        py4j_logger.setLevel(logging.INFO)
    conf = spark_conf(settings)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    # Spark's own warnings and errors go to the JVM's stderr (`log4j2.properties`): a JVM started inside a
    # Dagster step inherits the step's captured stderr, so they land in the step's compute log.
    return builder.getOrCreate()
