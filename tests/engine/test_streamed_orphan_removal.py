"""Contract: a large orphan removal streams its results (`stream_results`, Iceberg 1.11.0) and still
reports exactly how many files it deleted.

On the suite's Iceberg 1.11.0 runtime a streamed removal returns a sample of at most 20,000 of the
deleted locations: below that the rows are every file; a full sample is counted by the engine from
its listings before and after the removal. Every planted orphan goes, nothing else does, and every
version of the table reads back identically. The threshold that turns streaming on is lowered here
(it is 100,000 predicted orphans) so that a table of a few thousand files stays cheap.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.domain.actions import remove_orphan_files
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.engine.safety_testkit import age_files, files_under, table_dir
from tests.tables_testkit import contents_by_version, make_table, table_fingerprint, table_key

pytestmark = pytest.mark.spark

A = MaintenanceAction


def plant_many(directory: Path, count: int) -> set[Path]:
    """`count` unreferenced files: orphan removal compares locations, never contents."""
    directory.mkdir(parents=True, exist_ok=True)
    planted = {directory / f"orphan-{n:06d}.parquet" for n in range(count)}
    for path in planted:
        path.write_bytes(b"PAR1")
    return planted


@pytest.mark.parametrize(
    ("planted_count", "reported"),
    [(3, "orphan_file_count"), (remove_orphan_files.STREAMED_SAMPLE_SIZE + 7, "orphan_file_sample_count")],
    ids=["below_the_sample", "beyond_the_sample"],
)
def test_a_streamed_removal_deletes_every_orphan_and_counts_them_exactly(
    spark: SparkSession,
    catalogs: CatalogSet,
    engine: Engine,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    planted_count: int,
    reported: str,
) -> None:
    key = make_table(catalogs, table_key(namespace, f"streamed_{planted_count}"), commits=2, partitions=2)
    q = qualified_table("lake", key)
    spark.sql(f"ALTER TABLE {q} CREATE TAG before_orphans")
    root = table_dir(catalogs, key)
    planted = plant_many(root / "data" / "stray", planted_count)
    age_files(root)
    every_file, before = files_under(root), table_fingerprint(spark, q)
    versions = contents_by_version(spark, key)
    monkeypatch.setattr(remove_orphan_files, "STREAM_RESULTS_FROM", planted_count)

    report = engine.maintain(key, only=[A.REMOVE_ORPHAN_FILES])

    [result] = report.results
    assert result.status == "succeeded", result.error
    assert "stream_results => true" in result.statements[-1]
    returned = min(planted_count, remove_orphan_files.STREAMED_SAMPLE_SIZE)
    assert result.impact.procedure_output == {reported: returned}  # Iceberg's sample, as read
    assert result.impact.orphan_files_removed == planted_count
    assert files_under(root) == every_file - planted
    assert contents_by_version(spark, key) == versions
    assert table_fingerprint(spark, q) == before


def test_a_removal_predicted_below_the_threshold_is_not_streamed(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str
) -> None:
    key = make_table(catalogs, table_key(namespace, "not_streamed"), commits=2)
    root = table_dir(catalogs, key)
    planted = plant_many(root / "data" / "stray", 2)
    age_files(root)
    every_file, versions = files_under(root), contents_by_version(spark, key)

    report = engine.maintain(key, only=[A.REMOVE_ORPHAN_FILES])

    [result] = report.results
    assert result.status == "succeeded", result.error
    assert "stream_results" not in result.statements[-1]
    assert result.impact.orphan_files_removed == len(planted)
    assert files_under(root) == every_file - planted
    assert contents_by_version(spark, key) == versions
