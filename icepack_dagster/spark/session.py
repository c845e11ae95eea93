"""Spark sessions for maintenance: Iceberg extensions, every configured catalog, the right jars.

The only package that imports pyspark. A missing Java or jar stops here with what to install.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from icepack_dagster.catalog_config import jdbc_driver_jars, redact_conf, spark_catalog_conf
from icepack_dagster.exceptions import MissingComponentError
from icepack_dagster.settings import IcepackSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
_JAR_PACKAGES = {
    "/usr/share/java/sqlite-jdbc.jar": "the Debian package libxerial-sqlite-jdbc-java",
    "/usr/share/java/postgresql.jar": "the Debian package libpostgresql-jdbc-java",
}


def bundled_iceberg_runtime_jar() -> str:
    """The Iceberg Spark runtime shipped in the PyPI package snowpark-connect-deps-iceberg==1.0.2."""
    spec = importlib.util.find_spec("snowpark_connect_deps_iceberg")
    if spec is None or not spec.submodule_search_locations:
        raise MissingComponentError(
            "the Iceberg Spark runtime jar is missing: pip install 'snowpark-connect-deps-iceberg==1.0.2' "
            "or list your own jar in ICEPACK_SPARK__JARS"
        )
    jar = Path(next(iter(spec.submodule_search_locations))) / "jars" / ICEBERG_RUNTIME_JAR
    if not jar.is_file():
        raise MissingComponentError(f"{jar} is missing: reinstall snowpark-connect-deps-iceberg==1.0.2")
    return str(jar)


def resolve_jars(settings: IcepackSettings) -> list[str]:
    """Configured jars, or the bundled Iceberg runtime plus the JDBC drivers the catalogs need.
    Every local jar must exist; a missing one names the package that provides it."""
    jars = (
        settings.spark.jars
        if settings.spark.jars is not None
        else [
            bundled_iceberg_runtime_jar(),
            *jdbc_driver_jars(settings),
        ]
    )
    for jar in jars:
        if "://" not in jar and not Path(jar).is_file():
            hint = _JAR_PACKAGES.get(jar, "the artifact that provides it, or fix ICEPACK_SPARK__JARS")
            raise MissingComponentError(f"Spark jar {jar} is missing: install {hint}")
    return jars


def require_java() -> None:
    """Spark needs a JVM; say how to get one instead of failing deep inside py4j."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").is_file():
        return
    if shutil.which("java") is None:
        raise MissingComponentError(
            "Java is missing: Spark needs Java 17 (Debian: apt-get install openjdk-17-jre-headless)"
        )


def spark_conf(settings: IcepackSettings) -> dict[str, str]:
    """The full Spark configuration for a maintenance session (contains secrets: see `redact_conf`)."""
    conf = {
        "spark.app.name": settings.spark.app_name,
        "spark.master": settings.spark.master,
        "spark.jars": ",".join(resolve_jars(settings)),
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        "spark.driver.memory": settings.spark.driver_memory,
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    log_config = Path(__file__).with_name("log4j2.properties")
    conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={log_config.as_uri()}"
    if settings.spark.master.startswith("local"):
        conf |= {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        }
    for name, catalog in settings.catalogs.items():
        conf |= spark_catalog_conf(name, catalog, settings)
    return conf | settings.spark.conf


def describe_spark_conf(settings: IcepackSettings) -> dict[str, str]:
    """What `spark_conf` would set, safe to print."""
    return redact_conf(spark_conf(settings))


def build_spark_session(settings: IcepackSettings) -> SparkSession:
    """Start (or join) the process's Spark session with icepack's configuration."""
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
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
