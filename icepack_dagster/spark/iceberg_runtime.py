"""What a Spark session says about Iceberg: the version of the Iceberg runtime it runs (and of Spark
itself, which the session reports: on Spark Connect, the server's), and a table's format version as
that runtime reads it. The runtime and the format version are asked in SQL, so a classic
session and a Spark Connect server (where there is no JVM on this side) answer the same way:
`java_method('org.apache.iceberg.IcebergBuild', 'version')` calls Iceberg's own build information in
the server's JVM, and `SHOW TBLPROPERTIES ... ('format-version')` is Iceberg's table property.

Neither starts a Spark job: the probe selects from an inline `VALUES` row, which Spark evaluates on the
driver (a `SELECT` without `FROM` scans a one-row RDD, a job that waits for a free task slot on a busy
cluster), and `SHOW TBLPROPERTIES` is a command. So asking costs a round trip, never a task, and the
first job of a table's maintenance is its first action's. The format version's question is also the
runner's check that Spark can open the table (`table_probe`), and on Spark Connect its rows come with
`sql()`'s answer: one round trip per table for both. The runtime cannot change while a Spark
application runs, so a shared session asks it once (`spark/table_sessions.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from icepack_dagster.domain.sql.procedures import table_probe
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.spark.session import statement_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RUNTIME_PROBE = "SELECT java_method('org.apache.iceberg.IcebergBuild', 'version') AS version FROM VALUES (1)"


def iceberg_runtime(session: SparkSession) -> str | None:
    """The Iceberg runtime version of the Spark behind `session` (e.g. `1.11.0`); None when it cannot
    be told (no Iceberg on its classpath, or reflection disabled)."""
    try:
        rows = session.sql(RUNTIME_PROBE).collect()
    except (PySparkException, Py4JJavaError):
        return None
    return str(rows[0]["version"]) if rows and rows[0]["version"] else None


def spark_version(session: SparkSession) -> str | None:
    """The version of the Spark behind `session` (on Spark Connect, the server's, asked without a job);
    None when it cannot be told."""
    try:
        return str(session.version)
    except (PySparkException, Py4JJavaError):
        return None


def table_format_version(session: SparkSession, catalog: str, key: TableKey) -> int | None:
    """The table's format version as the session's Iceberg reads it; None when it does not say. Raises
    Spark's error when the session cannot open the table (TABLE_OR_VIEW_NOT_FOUND: it does not exist)."""
    rows = statement_rows(session, session.sql(table_probe(catalog, key)))
    value = str(rows[0]["value"]) if rows else ""
    return int(value) if value.isdecimal() else None
