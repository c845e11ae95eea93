"""Contract: orphan removal deletes only files nothing references and that are old enough.

On real tables it keeps every file any snapshot, branch or tag reaches (data and delete files,
manifests, manifest lists, statistics and partition statistics, previous metadata files) and every
version reads back identically. It never goes below 24 hours: a policy may only lengthen the age,
icepack's guard, Iceberg's guard and a session that switched Iceberg's guard off (`spark.testing`) all
refuse. A file written after the listing is never deleted. When the metadata references a listed file
under another scheme or authority, orphan removal stops with an error and deletes nothing; icepack
never passes the options that would widen that matching.
"""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions.maintenance_action import ActionResult, MaintenanceAction
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.sql.procedures import qualified_table, render_call
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import InvalidProcedureOptionError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.spark.runner import MaintenanceRunner
from tests.engine.safety_testkit import (
    MOR_V2,
    StalledTaskSlots,
    age_files,
    files_under,
    finished,
    referenced_files,
    run_in_thread,
    table_dir,
)
from tests.factories import make_action
from tests.tables_testkit import contents_by_version, local, make_table, table_fingerprint, table_key

pytestmark = pytest.mark.spark

A = MaintenanceAction
THREE_DAYS_AGO = (datetime.now(UTC) - timedelta(days=3)).isoformat()


def remove_orphans(spark: SparkSession, key: TableKey, older_than: str = THREE_DAYS_AGO) -> ActionResult:
    orphans = make_action(A.REMOVE_ORPHAN_FILES, older_than=older_than)
    [result] = MaintenanceRunner(spark, "lake").run(key, [orphans])
    return result


def plant(next_to: Path, name: str) -> Path:
    """An unreferenced copy of a real file: exactly what an orphan looks like."""
    orphan = next_to.with_name(name)
    shutil.copy(next_to, orphan)
    return orphan


def test_every_file_any_version_reaches_is_kept(spark: SparkSession, catalogs: CatalogSet, namespace) -> None:
    key = make_table(catalogs, table_key(namespace, "reachable"), commits=3, partitions=2, properties=MOR_V2)
    q = qualified_table("lake", key)
    first = spark.sql(f"SELECT snapshot_id FROM {q}.history ORDER BY made_current_at").first()[0]
    spark.sql(f"DELETE FROM {q} WHERE id IN (1, 12)")  # position delete files
    spark.sql(f"ALTER TABLE {q} CREATE TAG before_purge")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH etl AS OF VERSION {first}")
    spark.sql(f"INSERT INTO {q}.branch_etl VALUES (100, 0, 'branch only')")  # files only the branch has
    spark.sql(f"DELETE FROM {q} WHERE p = 0")  # whole files leave main; only older versions keep them
    spark.sql(f"CALL lake.system.compute_table_stats(table => '{key.dotted}')")
    spark.sql(f"CALL lake.system.compute_partition_stats(table => '{key.dotted}')")
    root = table_dir(catalogs, key)
    reachable = referenced_files(spark, catalogs, key)
    metadata = catalogs.get("lake").load_table(key.identifier).metadata
    assert metadata.statistics and metadata.partition_statistics
    assert spark.sql(f"SELECT count(*) FROM {q}.all_files WHERE content = 1").first()[0] >= 2
    assert len(list((root / "metadata").glob("*.metadata.json"))) > 5
    data_file = next(p for p in reachable if p.suffix == ".parquet" and "data" in p.parts)
    manifest = next(p for p in reachable if p.suffix == ".avro")
    planted = {plant(data_file, "orphan-data.parquet"), plant(manifest, "orphan-manifest.avro")}
    age_files(root)
    every_file = files_under(root)
    assert reachable <= every_file and not planted & reachable
    versions = contents_by_version(spark, key)

    result = remove_orphans(spark, key)

    assert result.status == "succeeded", result.error
    assert result.impact.orphan_files_removed == len(planted)
    assert files_under(root) == every_file - planted
    assert referenced_files(spark, catalogs, key) == reachable
    assert contents_by_version(spark, key) == versions


def test_a_policy_can_lengthen_the_orphan_age_never_shorten_it(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str
) -> None:
    key = make_table(catalogs, table_key(namespace, "orphan_age"), commits=2)
    q = qualified_table("lake", key)
    root = table_dir(catalogs, key)
    data_file = next(p for p in files_under(root / "data"))
    four_days, five_days = plant(data_file, "four-days.parquet"), plant(data_file, "five-days.parquet")
    age_files(root)
    os.utime(four_days, (time.time() - 96 * 3600,) * 2)
    before = table_fingerprint(spark, q)

    spark.sql(f"ALTER TABLE {q} SET TBLPROPERTIES ('icepack.orphan.older-than-hours'='23')")
    refused = engine.maintain(key, only=[A.REMOVE_ORPHAN_FILES])
    error = refused.first_error or ""
    assert refused.outcome == "failed" and key.text in error and "orphan" in error and "24" in error
    assert four_days.exists() and five_days.exists()

    spark.sql(f"ALTER TABLE {q} SET TBLPROPERTIES ('icepack.orphan.older-than-hours'='100')")
    report = engine.maintain(key, only=[A.REMOVE_ORPHAN_FILES])

    assert report.outcome == "succeeded", report.first_error
    assert [r.impact.orphan_files_removed for r in report.results] == [1]
    assert four_days.exists() and not five_days.exists()
    assert table_fingerprint(spark, q) == before


def test_the_24_hour_guard_holds_in_icepack_and_in_iceberg(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    key = make_table(catalogs, table_key(namespace, "young_orphans"), commits=2)
    q = qualified_table("lake", key)
    root = table_dir(catalogs, key)
    young = plant(next(p for p in files_under(root / "data")), "two-hours-old.parquet")
    age_files(root)
    os.utime(young, (time.time() - 2 * 3600,) * 2)
    every_file, before = files_under(root), table_fingerprint(spark, q)
    one_hour_ago = (datetime.now(UTC) - timedelta(hours=1)).isoformat()

    assert "24 hours" in (remove_orphans(spark, key, one_hour_ago).error or "")
    with pytest.raises(Exception, match="interval less than 24 hours"):  # Iceberg's own guard is on
        spark.sql(
            f"CALL lake.system.remove_orphan_files(table => '{key.dotted}', older_than => "
            f"TIMESTAMP '{one_hour_ago}')"
        ).collect()
    assert files_under(root) == every_file

    def guard_off() -> SparkSession:  # what a platform setting spark.testing=true amounts to
        session = spark.newSession()
        session.sql("SET spark.sql.legacy.setCommandRejectsSparkCoreConfs=false")
        session.sql("SET spark.testing=true")
        return session

    class GuardOff:
        def newSession(self) -> SparkSession:  # noqa: N802 - SparkSession's own name
            return guard_off()

    result = remove_orphans(GuardOff(), key)  # type: ignore[arg-type]
    assert result.status == "failed" and result.statements == ()
    assert key.text in (result.error or "") and "spark.testing" in (result.error or "")
    assert files_under(root) == every_file
    # the refusal matters: in such a session Iceberg itself would take the two-hour-old file
    listed = (
        guard_off()
        .sql(
            f"CALL lake.system.remove_orphan_files(table => '{key.dotted}', older_than => "
            f"TIMESTAMP '{one_hour_ago}', dry_run => true)"
        )
        .collect()
    )
    assert [local(row[0]) for row in listed] == [young]
    assert table_fingerprint(spark, q) == before


def test_files_written_after_the_listing_are_never_deleted(
    spark: SparkSession, catalogs: CatalogSet, namespace: str, tmp_path: Path
) -> None:
    key = make_table(catalogs, table_key(namespace, "listing_race"), commits=2)
    q = qualified_table("lake", key)
    root = table_dir(catalogs, key)
    old_orphan = plant(next(p for p in files_under(root / "data")), "old-orphan.parquet")
    age_files(root)
    before_snapshot = catalogs.get("lake").load_table(key.identifier).metadata.current_snapshot_id
    before = table_fingerprint(spark, q)
    pyiceberg_table = catalogs.get("lake").load_table(key.identifier)
    late_rows = pa.table(
        {
            "id": pa.array(range(1000, 1005), pa.int64()),
            "p": pa.array([0] * 5, pa.int32()),
            "payload": pa.array(["late"] * 5),
        }
    )

    with StalledTaskSlots(spark, tmp_path / "release") as stall:
        thread, outcome = run_in_thread(lambda: remove_orphans(spark, key))
        stall.wait_for_other_job()  # listed, metadata loaded; now another writer writes and commits
        pyiceberg_table.append(late_rows)
        in_flight = plant(local(pyiceberg_table.inspect.files()["file_path"][0].as_py()), "in-flight.parquet")
        stall.release()
        result = finished(thread, outcome)

    assert result.status == "succeeded", result.error
    assert result.impact.orphan_files_removed == 1 and not old_orphan.exists() and in_flight.exists()
    assert referenced_files(spark, catalogs, key) <= files_under(root)
    assert spark.sql(f"SELECT count(*) FROM {q} WHERE payload = 'late'").first()[0] == 5
    assert table_fingerprint(spark, f"{q} VERSION AS OF {before_snapshot}") == before
    assert table_fingerprint(spark, q)[0] == before[0] + 5


@pytest.mark.parametrize(
    "foreign_prefix", ["file://otherhost", "s3a://other-bucket"], ids=["authority", "scheme"]
)
def test_a_scheme_or_authority_mismatch_stops_orphan_removal(
    spark: SparkSession, catalogs: CatalogSet, namespace: str, foreign_prefix: str
) -> None:
    """A branch references a file of the table's own directory through another authority or scheme:
    the path matches a listed file, the prefix does not, so nobody can tell whether it is an orphan."""
    key = make_table(catalogs, table_key(namespace, "foreign_paths"), commits=2)
    q = qualified_table("lake", key)
    root = table_dir(catalogs, key)
    data_file = next(p for p in files_under(root / "data"))
    twin = plant(data_file, "referenced-elsewhere.parquet")
    plant(data_file, "true-orphan.parquet")
    jvm = spark._jvm  # type: ignore[attr-defined]
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, q)  # type: ignore[attr-defined]
    table.manageSnapshots().createBranch("foreign", table.currentSnapshot().snapshotId()).commit()
    foreign = (
        jvm.org.apache.iceberg.DataFiles.builder(table.spec())
        .withPath(foreign_prefix + str(twin))
        .withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
        .withFileSizeInBytes(twin.stat().st_size)
        .withRecordCount(10)
        .build()
    )
    table.newAppend().appendFile(foreign).toBranch("foreign").commit()
    age_files(root)
    every_file, before = files_under(root), table_fingerprint(spark, q)

    result = remove_orphans(spark, key)

    assert result.status == "failed"
    assert key.text in (result.error or "") and "nothing was deleted" in (result.error or "")
    assert "scheme or authority" in (result.error or "")
    assert "prefix_mismatch_mode" not in result.statements[-1] and "equal_" not in result.statements[-1]
    assert files_under(root) == every_file  # the true orphan too: nothing at all is deleted
    assert table_fingerprint(spark, q) == before


@pytest.mark.parametrize("option", sorted(definition(A.REMOVE_ORPHAN_FILES).refused_options))
@pytest.mark.parametrize("value", ["DELETE", "IGNORE", "map('s3a', 's3')", "/", "true"])
def test_options_that_widen_orphan_matching_are_never_rendered(option: str, value: str) -> None:
    key = TableKey(catalog="lake", namespace=("sales",), name="orders")
    with pytest.raises(InvalidProcedureOptionError) as caught:
        render_call("lake", key, A.REMOVE_ORPHAN_FILES, {"older_than": THREE_DAYS_AGO, option: value})
    assert (caught.value.table, caught.value.field) == (key.text, option)
    assert "icepack ever passes" in str(caught.value)
