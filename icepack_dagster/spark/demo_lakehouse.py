"""The demo lakehouse: six small tables, built through Spark, each in one realistic kind of bad shape
(or, for one, healthy), so a first run of icepack has something to find and fix within a minute.

Rebuilding replaces the tables (`DROP TABLE ... PURGE`). Every table is tiny: the shapes come from how
the data was written (many commits, many files, row-level deletes, stray files), not from its volume.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.sql.procedures import quote_identifier, spark_catalog_name
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import ConfigurationError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

SMALL_FILES = 48
MANIFEST_COMMITS = 64
SNAPSHOT_COMMITS = 110
ORPHAN_FILES = 3
ORPHAN_AGE_SECONDS = 5 * 24 * 3600  # older than the default orphan threshold of 3 days
ORPHAN_PREFIX = "icepack-demo-orphan-"
# Merge-on-read with partition-scoped deletes, as tables written before Iceberg 1.8's file-scoped
# default were: every row-level change adds a delete file, and they pile up.
_MERGE_ON_READ = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
    "write.delete.granularity": "partition",
}


class _Builder:
    """Creates the demo tables of one namespace; every statement goes through `sql`."""

    def __init__(self, spark: SparkSession, catalog: str, namespace: str) -> None:
        self.spark = spark
        self.catalog = spark_catalog_name(catalog)
        self.namespace = namespace

    def key(self, name: str) -> TableKey:
        return TableKey(catalog=self.catalog, namespace=(self.namespace,), name=name)

    def table(self, name: str) -> str:
        return quote_identifier(self.catalog, self.namespace, name)

    def sql(self, statement: str) -> None:
        self.spark.sql(statement)

    def create(self, name: str, columns: str, properties: dict[str, str] | None = None) -> str:
        """Drop any earlier version with its files, then create the table empty."""
        table = self.table(name)
        self._remove_planted_orphans(table)
        self.sql(f"DROP TABLE IF EXISTS {table} PURGE")
        props = ", ".join(f"'{k}'='{v}'" for k, v in (properties or {}).items())
        tail = f" TBLPROPERTIES ({props})" if props else ""
        self.sql(f"CREATE TABLE {table} ({columns}) USING iceberg{tail}")
        return table

    def append(self, table: str, start: int, rows: int, files: int = 1) -> None:
        """One commit of `rows` generated rows written as `files` data files (the DataFrame writer
        skips SQL parsing, which matters across the demo's two hundred commits)."""
        generated = self.spark.range(start, start + rows, 1, files).selectExpr(
            "id",
            "timestamp_seconds(1700000000 + id * 37) AS ts",
            "concat('item-', id % 97) AS label",
            "id * 1.5 AS amount",
        )
        generated.writeTo(table).append()

    def data_files(self, table: str) -> list[str]:
        rows = self.spark.sql(f"SELECT file_path FROM {table}.files WHERE content = 0").collect()
        return [r[0] for r in rows]

    def _remove_planted_orphans(self, table: str) -> None:
        """Orphans are unreferenced, so PURGE leaves them: remove the ones an earlier build planted."""
        if not self.spark.catalog.tableExists(table):
            return
        rows = self.spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
        location = next((r.data_type for r in rows if r.col_name == "Location"), None)
        table_dir = _local_path(location) if location else None
        if table_dir is not None:
            for stray in table_dir.glob(f"data/{ORPHAN_PREFIX}*"):
                stray.unlink()


COLUMNS = "id bigint, ts timestamp, label string, amount double"


def _local_path(uri: str) -> Path | None:
    """The local path of a file: URI or plain path; None for object storage."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme in ("", "file") else None


def _events_small_files(b: _Builder) -> None:
    """Streaming-style ingestion: one commit that wrote a tiny file per task."""
    b.append(b.create("events_small_files", COLUMNS), 0, SMALL_FILES * 20, files=SMALL_FILES)


def _orders_many_manifests(b: _Builder) -> None:
    """Frequent small appends, each adding a manifest; manifest merging is off as in many tuned tables."""
    table = b.create("orders_many_manifests", COLUMNS, {"commit.manifest-merge.enabled": "false"})
    for commit in range(MANIFEST_COMMITS):
        b.append(table, commit * 10, 10)


def _clicks_snapshot_backlog(b: _Builder) -> None:
    """Many commits and no expiry; the policy keeps snapshots only minutes, so the backlog is due now."""
    table = b.create(
        "clicks_snapshot_backlog",
        COLUMNS,
        {"icepack.snapshot.max-age-hours": "0.01", "icepack.snapshot.retain-last": "5"},
    )
    for commit in range(SNAPSHOT_COMMITS):
        b.append(table, commit * 5, 5)


def _customers_with_deletes(b: _Builder) -> None:
    """Row-level deletes and a merge on a merge-on-read table: position delete files pile up."""
    table = b.create("customers_with_deletes", COLUMNS, _MERGE_ON_READ)
    b.append(table, 0, 400, files=4)
    for remainder in range(4):
        b.sql(f"DELETE FROM {table} WHERE id % 20 = {remainder}")
    b.sql(
        f"MERGE INTO {table} t USING (SELECT id, id * 3.0 AS amount FROM range(380, 420)) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.amount = s.amount "
        "WHEN NOT MATCHED THEN INSERT (id, ts, label, amount) "
        "VALUES (s.id, current_timestamp(), 'new', s.amount)"
    )


def _logs_with_orphans(b: _Builder) -> None:
    """Stray data files from writes that failed before committing, old enough for orphan removal."""
    table = b.create("logs_with_orphans", COLUMNS)
    for commit in range(3):
        b.append(table, commit * 50, 50)
    first_file = b.data_files(table)[0]
    source = _local_path(first_file)
    if source is None:
        raise ConfigurationError(
            f"the demo plants orphan files with local file operations, but {first_file} is not local: "
            "build the demo in an embedded catalog or a local warehouse"
        )
    old = utc_now().timestamp() - ORPHAN_AGE_SECONDS
    for index in range(ORPHAN_FILES):
        orphan = source.parent / f"{ORPHAN_PREFIX}{index}.parquet"
        shutil.copyfile(source, orphan)
        os.utime(orphan, (old, old))


def _dim_healthy(b: _Builder) -> None:
    """One compact write: nothing to do."""
    b.append(b.create("dim_healthy", COLUMNS), 0, 500)


DEMO_TABLES: dict[str, Callable[[_Builder], None]] = {
    "events_small_files": _events_small_files,
    "orders_many_manifests": _orders_many_manifests,
    "clicks_snapshot_backlog": _clicks_snapshot_backlog,
    "customers_with_deletes": _customers_with_deletes,
    "logs_with_orphans": _logs_with_orphans,
    "dim_healthy": _dim_healthy,
}


def build_demo_lakehouse(
    spark: SparkSession,
    catalog_name: str,
    namespace: str = "demo",
    on_progress: Callable[[str], None] | None = None,
    tables: Sequence[str] | None = None,
) -> list[str]:
    """(Re)build the demo tables (all, or the named ones) in `catalog_name`.`namespace`; returns them
    as `namespace.table`, the way the CLI names tables of its default catalog."""
    names = list(DEMO_TABLES if tables is None else tables)
    unknown = sorted(set(names) - set(DEMO_TABLES))
    if unknown:
        raise ConfigurationError(f"no demo table named {unknown}; the demo tables are {list(DEMO_TABLES)}")
    progress = on_progress or (lambda message: logger.info("%s", message))
    builder = _Builder(spark, catalog_name, namespace)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote_identifier(builder.catalog, namespace)}")

    def build(name: str) -> str:
        started = time.monotonic()
        DEMO_TABLES[name](builder)
        progress(f"demo table {builder.key(name).dotted} built in {time.monotonic() - started:.1f} s")
        return builder.key(name).dotted

    # Most of the time is per-commit latency on the driver, not work: two builds overlap well.
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="icepack-demo") as pool:
        return list(pool.map(build, names))
