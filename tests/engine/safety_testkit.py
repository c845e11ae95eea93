"""Helpers for the engine's safety tests, all over real Spark and real Iceberg tables.

- a table's files on disk, aged and orphaned (the tables themselves: `tests/tables_testkit.py`);
- what a table references, read independently of the engine (Spark's metadata tables plus the
  statistics entries of the metadata);
- `StalledTaskSlots`: every Spark task slot held by a task that waits for a release, so an action
  submitted meanwhile is planned on the driver but cannot write or commit until the test lets it;
  another writer commits in that window, deterministically, without sleeps;
- row-level deletes committed as position delete files through Iceberg's Java API (driver side, so
  they commit while the task slots are held), the way a Flink or Trino writer would;
- `RecordingSpark`: a thin wrapper that forwards every call to the real SparkSession and records the
  SQL it is given.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.polling import wait_until
from tests.tables_testkit import local

FIVE_DAYS_AGO = time.time() - 5 * 24 * 3600
MOR_V2 = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}
DEADLINE_SECONDS = 120


def table_dir(catalogs: CatalogSet, key: TableKey) -> Path:
    return local(catalogs.get(key.catalog).load_table(key.identifier).location())


def files_under(root: Path) -> set[Path]:
    """Files below `root`, without hidden ones (Hadoop's .crc checksums; Iceberg ignores them too)."""
    return {p for p in root.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))}


def age_files(root: Path, when: float = FIVE_DAYS_AGO) -> None:
    for path in files_under(root):
        os.utime(path, (when, when))


def plant_orphan(catalogs: CatalogSet, key: TableKey) -> Path:
    """A copy of one data file that no metadata references, with every file of the table aged 5 days."""
    root = table_dir(catalogs, key)
    data_file = sorted(files_under(root / "data"))[0]
    orphan = data_file.with_name("orphan.parquet")
    orphan.write_bytes(data_file.read_bytes())
    age_files(root)
    return orphan


def referenced_files(spark: SparkSession, catalogs: CatalogSet, key: TableKey) -> set[Path]:
    """Every file the table's metadata reaches, read through Spark's metadata tables (all snapshots,
    branches and tags) and the statistics entries of the current metadata."""
    q = qualified_table(key.catalog, key)
    queries = (
        f"SELECT file_path FROM {q}.all_files",
        f"SELECT path FROM {q}.all_manifests",
        f"SELECT manifest_list FROM {q}.snapshots",
        f"SELECT file FROM {q}.metadata_log_entries",
    )
    found = {local(row[0]) for query in queries for row in spark.sql(query).collect()}
    metadata = catalogs.get(key.catalog).load_table(key.identifier).metadata
    found |= {local(s.statistics_path) for s in (*metadata.statistics, *metadata.partition_statistics)}
    return found


def snapshot_rows(spark: SparkSession, key: TableKey) -> list[Any]:
    q = qualified_table(key.catalog, key)
    return spark.sql(
        f"SELECT snapshot_id, parent_id, operation FROM {q}.snapshots ORDER BY committed_at, snapshot_id"
    ).collect()


class StalledTaskSlots:
    """Holds every task slot of the local Spark session until `release()`; see the module docstring."""

    GROUP = "safety-stall"

    def __init__(self, spark: SparkSession, flag: Path) -> None:
        self._sc = spark.sparkContext
        self._flag = flag
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        flag, slots = str(self._flag), self._sc.defaultParallelism
        deadline = time.time() + DEADLINE_SECONDS

        def wait(_: object) -> None:
            while not os.path.exists(flag) and time.time() < deadline:
                time.sleep(0.02)

        self._sc.setJobGroup(self.GROUP, "safety test: hold every task slot")
        self._sc.parallelize(range(slots), slots).foreach(wait)

    def __enter__(self) -> StalledTaskSlots:
        self._thread.start()
        tracker = self._sc.statusTracker()
        wait_until(
            lambda: _running_tasks(tracker, self.GROUP) >= self._sc.defaultParallelism,
            "the stall's tasks to hold every task slot", DEADLINE_SECONDS, 0.02,
        )
        return self

    def wait_for_other_job(self) -> None:
        """Returns once a job outside the stall is submitted: its action finished planning."""
        tracker = self._sc.statusTracker()
        wait_until(
            lambda: set(tracker.getActiveJobsIds()) - set(tracker.getJobIdsForGroup(self.GROUP)),
            "a Spark job outside the stall", DEADLINE_SECONDS, 0.02,
        )

    def release(self) -> None:
        self._flag.touch()
        self._thread.join(DEADLINE_SECONDS)

    def __exit__(self, *exc: object) -> None:
        self.release()


def _running_tasks(tracker: Any, group: str) -> int:
    running = 0
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            stage_info = tracker.getStageInfo(stage)
            running += stage_info.numActiveTasks if stage_info else 0
    return running


def wait_past_newest_snapshot(catalogs: CatalogSet, key: TableKey) -> None:
    """Return once the table's newest snapshot is more than a second old: expiry's `older_than` is
    floored to the second, so a snapshot committed in the current second is never expired."""
    metadata = catalogs.get(key.catalog).load_table(key.identifier).metadata
    newest = max(s.timestamp_ms for s in metadata.snapshots) / 1000
    wait_until(lambda: time.time() >= int(newest) + 1.0, "the next second", DEADLINE_SECONDS, 0.02)


def run_in_thread(target: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Starts `target()` in a thread; the dict receives its return value (or exception) when done."""
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["value"] = target()
        except BaseException as error:  # handed to the test, which re-raises it
            outcome["error"] = error

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, outcome


def finished(thread: threading.Thread, outcome: dict[str, Any]) -> Any:
    thread.join(DEADLINE_SECONDS)
    assert not thread.is_alive(), "the action did not finish before the deadline"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


Located = dict[tuple[str, str | None], list[int]]


def locate_rows(spark: SparkSession, key: TableKey, ids: list[int]) -> Located:
    """(data file, partition path) -> row positions of the given ids (a Spark job: call it before
    stalling)."""
    q = qualified_table("lake", key)
    listed = ", ".join(str(i) for i in ids)
    found: Located = {}
    for row in spark.sql(f"SELECT _file, _pos FROM {q} WHERE id IN ({listed})").collect():
        parent = local(row[0]).parent.name
        found.setdefault((row[0], parent if "=" in parent else None), []).append(int(row[1]))
    return found


def commit_position_deletes(spark: SparkSession, key: TableKey, located: Located) -> int:
    """Commits one position delete file per data file (written with pyarrow next to the data file,
    committed as a RowDelta through Iceberg's Java API on the driver); returns the new snapshot id."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession,
        qualified_table("lake", key),  # type: ignore[attr-defined]
    )
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": "2147483546"}),
            pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "2147483545"}),
        ]
    )
    delta = table.newRowDelta()
    for (data_file, partition), positions in located.items():
        path = local(data_file).with_name(f"pos-deletes-{uuid.uuid4().hex}.parquet")
        rows = pa.table({"file_path": [data_file] * len(positions), "pos": sorted(positions)}, schema=schema)
        pq.write_table(rows, path)
        builder = (
            jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec())
            .ofPositionDeletes()
            .withPath(f"file:{path}")  # not as_uri(): Hadoop would not decode p%3D1
            .withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
            .withFileSizeInBytes(path.stat().st_size)
            .withRecordCount(len(positions))
        )
        if partition is not None:
            builder = builder.withPartitionPath(partition)
        delta = delta.addDeletes(builder.build())
    delta.commit()
    table.refresh()
    return int(table.currentSnapshot().snapshotId())


class RecordingSpark:
    """The real SparkSession, every call forwarded; `sql` and `table` calls are also recorded."""

    def __init__(self, session: Any, log: list[str]) -> None:
        self._session = session
        self.log = log

    def newSession(self) -> RecordingSpark:  # noqa: N802 - SparkSession's own name
        return RecordingSpark(self._session.newSession(), self.log)

    def sql(self, statement: str, *args: Any, **kwargs: Any) -> Any:
        self.log.append(statement)
        return self._session.sql(statement, *args, **kwargs)

    def table(self, name: str) -> Any:
        self.log.append(f"TABLE {name}")
        return self._session.table(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def commit_dropping_a_data_file(spark: SparkSession, key: TableKey, path: str) -> int:
    """A faulty maintenance commit, made for real: a `replace` (Iceberg's RewriteFiles, through the Java
    API on the driver, so no Spark job) that removes the live data file `path` and adds nothing, so its
    rows are gone. Returns the file's record count."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    q = qualified_table(key.catalog, key)
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, q)  # type: ignore[attr-defined]
    tasks = table.newScan().planFiles().iterator()
    while tasks.hasNext():
        data_file = tasks.next().file()
        if str(data_file.location()) == path:
            head = table.currentSnapshot().snapshotId()  # validated against the state it commits on
            table.newRewrite().validateFromSnapshot(head).deleteFile(data_file).commit()
            return int(data_file.recordCount())
    raise AssertionError(f"no live data file {path} in {q}")


def a_data_file(spark: SparkSession, key: TableKey, where: str = "true") -> str:
    """The path of one live data file holding rows that match `where` (a Spark job)."""
    q = qualified_table(key.catalog, key)
    return str(spark.sql(f"SELECT _file FROM {q} WHERE {where} ORDER BY _file LIMIT 1").first()[0])


def expire_snapshot_by_id(spark: SparkSession, key: TableKey, snapshot_id: int) -> None:
    """Removes one snapshot for real through Iceberg's Java API (`ExpireSnapshots.expireSnapshotId`),
    whatever retention says: what a faulty expiry would commit."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    q = qualified_table(key.catalog, key)
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, q)  # type: ignore[attr-defined]
    table.expireSnapshots().expireSnapshotId(snapshot_id).cleanExpiredFiles(False).commit()
