"""Contract: after plain appends to a table whose status the tracker knows, the status is taken from the
snapshot summaries and the manifest list (`depth == "summary"`), and it is exact where it claims to be:
every field but the carried ones equals a full `read_status` of the same table (and Spark's metadata
tables), the health is the full read's, the carried values are the full read's at `manifests_read_at`,
and the full read's values now are within the carried bounds. Spark and PyIceberg appends, format v1, v2
and v3, an evolved partition spec, branches and tags, and a chain of refreshes each extending the last.
Anything else is read from the manifests as before (`depth == "full"`): a delete, an overwrite, a
compaction, delete files, changed file-size limits, a summary without a key it needs or with totals that
disagree, and appends that could make the small files an issue.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pytest

from icepack_dagster.domain.health.judging import SMALL_FILES, assess_health
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.incremental_status.status_tracker import StatusTracker
from icepack_dagster.iceberg.incremental_status.summary_status import summary_status
from icepack_dagster.iceberg.status_reader import read_status
from tests.iceberg.test_status_reader import _table, spark_facts

pytestmark = pytest.mark.spark

THRESHOLDS = HealthThresholds()
CARRIED = {"small_file_count", "small_file_bytes", "file_size_histogram", "partition_count", "layout"}
PROVENANCE = {"depth", "manifests_read_at", "carried"}


def _full(catalogs: CatalogSet, key: TableKey, now: datetime) -> TableStatus:
    return read_status(catalogs.get(key.catalog).load_table(key.identifier), key, THRESHOLDS, now)


def _refresh(tracker: StatusTracker, catalogs: CatalogSet, key: TableKey, now: datetime) -> TableStatus:
    refresh = tracker.refresh(catalogs, key.catalog, [key], THRESHOLDS, now)
    assert not refresh.failures, refresh.failures
    return refresh.statuses[key.text]


def assert_exact_where_claimed(
    spark: Any, summary: TableStatus, full: TableStatus, at_read: TableStatus, qualified: str
) -> None:
    """`summary` against a full read now (`full`) and the full read its carried values come from."""
    assert summary.depth == "summary" and summary.manifests_read_at == at_read.snapshot_id
    skip = CARRIED | PROVENANCE
    assert summary.model_dump(exclude=skip) == full.model_dump(exclude=skip)
    assert assess_health(summary, THRESHOLDS) == assess_health(full, THRESHOLDS)
    values = CARRIED - {"layout"}
    assert summary.model_dump(include=values) == at_read.model_dump(include=values)
    carried = summary.carried
    assert carried is not None
    assert carried.small_files[0] <= full.small_file_count <= carried.small_files[1]
    assert carried.small_bytes[0] <= full.small_file_bytes <= carried.small_bytes[1]
    assert carried.partitions[0] <= full.partition_count <= carried.partitions[1]
    assert carried.data_files_added == full.live_data_files - at_read.live_data_files
    if full.layout is not None:
        assert summary.layout is not None and at_read.layout is not None
        assert (summary.layout.current_spec_id, summary.layout.specs) == (
            full.layout.current_spec_id, full.layout.specs,
        )
        assert summary.layout.candidates == at_read.layout.candidates
    entries_only = {"small_file_count", "small_file_bytes", "histogram", "partition_count"}
    expected = {k: v for k, v in spark_facts(spark, qualified, summary.small_file_threshold_bytes).items()
                if k not in entries_only}
    assert {name: summary.model_dump()[name] for name in expected} == expected


@pytest.mark.parametrize("version", [1, 2, 3])
def test_spark_appends_are_measured_from_summaries_and_chain(spark, catalogs, namespace, version) -> None:
    key, qualified = _table(catalogs, "lake", namespace, f"appends_v{version}")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint, p string) USING iceberg PARTITIONED BY (p) "
        f"TBLPROPERTIES ('format-version'='{version}')"
    )
    spark.sql(f"INSERT INTO {qualified} VALUES (1, 'x'), (2, 'y')")
    tracker, now = StatusTracker(), datetime.now(UTC)
    first = _refresh(tracker, catalogs, key, now)
    assert first.depth == "full"

    spark.sql(f"INSERT INTO {qualified} VALUES (3, 'x'), (4, 'z')")  # a known and a new partition
    later = now + timedelta(minutes=15)
    second = _refresh(tracker, catalogs, key, later)
    assert_exact_where_claimed(spark, second, _full(catalogs, key, later), first, qualified)
    assert second.carried is not None
    assert second.carried.partitions[0] == 2 < 3 <= second.carried.partitions[1]

    spark.sql(f"INSERT INTO {qualified} VALUES (5, 'w')")
    last = now + timedelta(minutes=30)
    third = _refresh(tracker, catalogs, key, last)
    assert_exact_where_claimed(spark, third, _full(catalogs, key, last), first, qualified)  # still from s0
    assert third.carried is not None and third.carried.data_files_added >= 3
    assert third.carried.small_files == (2, 2 + third.carried.data_files_added)


def test_pyiceberg_appends_are_measured_from_summaries(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "pyiceberg_appends")
    table = catalogs.get("lake").create_table(key.identifier, schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    tracker, now = StatusTracker(), datetime.now(UTC)
    first = _refresh(tracker, catalogs, key, now)

    for row in (3, 4):
        table.append(pa.table({"id": pa.array([row], pa.int64())}))
    second = _refresh(tracker, catalogs, key, now)

    assert_exact_where_claimed(spark, second, _full(catalogs, key, now), first, qualified)
    assert second.manifest_count == 3 and second.total_records == 4


def test_an_evolved_partition_spec_takes_todays_specs(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "evolved_summary")
    spark.sql(f"CREATE TABLE {qualified} (id bigint, cat string) USING iceberg PARTITIONED BY (cat)")
    spark.sql(f"INSERT INTO {qualified} VALUES (1, 'a'), (2, 'b'), (3, 'b')")
    tracker, now = StatusTracker(), datetime.now(UTC)
    first = _refresh(tracker, catalogs, key, now)

    spark.sql(f"ALTER TABLE {qualified} ADD PARTITION FIELD bucket(4, id)")
    spark.sql(f"INSERT INTO {qualified} VALUES (10, 'a'), (11, 'a'), (12, 'c')")
    second = _refresh(tracker, catalogs, key, now)

    full = _full(catalogs, key, now)
    assert_exact_where_claimed(spark, second, full, first, qualified)
    assert second.partition_spec_count == 2 and second.layout is not None and len(second.layout.specs) == 2


def test_branch_and_tag_commits_leave_main_exact(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "refs_summary")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {qualified} VALUES (1), (2)")
    tracker, now = StatusTracker(), datetime.now(UTC)
    first = _refresh(tracker, catalogs, key, now)

    spark.sql(f"ALTER TABLE {qualified} CREATE TAG release_1")
    spark.sql(f"ALTER TABLE {qualified} CREATE BRANCH audit")
    spark.sql(f"INSERT INTO {qualified}.branch_audit VALUES (3), (4), (5)")
    second = _refresh(tracker, catalogs, key, now)

    full = _full(catalogs, key, now)
    assert_exact_where_claimed(spark, second, full, first, qualified)
    assert second.model_dump(exclude=PROVENANCE) == full.model_dump(exclude=PROVENANCE)  # no append: all
    assert (second.branch_count, second.tag_count, second.snapshot_id) == (1, 1, first.snapshot_id)


def _appended_then(spark: Any, catalogs: CatalogSet, key: TableKey, qualified: str, change: str) -> str:
    """The reason the summary does not suffice after `change`, after checking the tracker read the
    manifests and got exactly the full read."""
    tracker, now = StatusTracker(), datetime.now(UTC)
    known = _refresh(tracker, catalogs, key, now)
    spark.sql(change.format(t=qualified))
    later = _refresh(tracker, catalogs, key, now)
    full = _full(catalogs, key, now)
    assert later == full and later.depth == "full"
    reason = summary_status(catalogs.get("lake").load_table(key.identifier), key, known, THRESHOLDS, now)
    assert isinstance(reason, str)
    return reason


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("DELETE FROM {t} WHERE id = 1", "not an append"),
        ("INSERT OVERWRITE {t} SELECT id + 100 FROM {t}", "not an append"),
        ("CALL lake.system.rewrite_data_files(table => '{t}', options => map('min-input-files', '2'))",
         "replace, not an append"),
        ("ALTER TABLE {t} SET TBLPROPERTIES ('icepack.small-file-threshold-bytes'='10')",
         "file-size limits changed"),
    ],
)
def test_anything_but_a_plain_append_reads_the_manifests(spark, catalogs, namespace, change, reason) -> None:
    key, qualified = _table(catalogs, "lake", namespace, f"changed_{uuid.uuid4().hex[:8]}")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {qualified} VALUES (1), (2)")
    spark.sql(f"INSERT INTO {qualified} VALUES (3)")
    change = change.replace("'{t}'", f"'{qualified.split('.', 1)[1]}'")
    assert reason in _appended_then(spark, catalogs, key, qualified, change)


def test_delete_files_read_the_manifests(spark, catalogs, namespace) -> None:
    key, qualified = _table(catalogs, "lake", namespace, "mor_summary")
    spark.sql(
        f"CREATE TABLE {qualified} (id bigint) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    spark.sql(f"INSERT INTO {qualified} SELECT id FROM range(0, 20, 1, 1)")
    assert "not an append" in _appended_then(spark, catalogs, key, qualified, "DELETE FROM {t} WHERE id = 3")
    # the known status now has a delete file: even a plain append is read from the manifests
    assert "delete files" in _appended_then(spark, catalogs, key, qualified, "INSERT INTO {t} VALUES (99)")


def test_appends_that_could_make_small_files_an_issue_read_the_manifests(spark, catalogs, namespace) -> None:
    """Six small files are no issue (fewer than `small_file_min_count`, 8); one more keeps the high bound
    at 7, three more could reach 9 of 9: the manifests are read, and they show the issue."""
    key, qualified = _table(catalogs, "lake", namespace, "small_summary")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
    for row in range(6):
        spark.sql(f"INSERT INTO {qualified} VALUES ({row})")
    tracker, now = StatusTracker(), datetime.now(UTC)
    first = _refresh(tracker, catalogs, key, now)
    assert first.small_file_count == 6 and not assess_health(first, THRESHOLDS).issues

    spark.sql(f"INSERT INTO {qualified} VALUES (6)")
    second = _refresh(tracker, catalogs, key, now)
    assert_exact_where_claimed(spark, second, _full(catalogs, key, now), first, qualified)

    spark.sql(f"INSERT INTO {qualified} VALUES (7)")
    spark.sql(f"INSERT INTO {qualified} VALUES (8)")
    third = _refresh(tracker, catalogs, key, now)
    assert third.depth == "full" and third == _full(catalogs, key, now)
    assert [issue.code for issue in assess_health(third, THRESHOLDS).issues] == [SMALL_FILES]


def _registered_with(catalogs: CatalogSet, key: TableKey, name: str, **summary: str | None) -> TableKey:
    """The table registered again under `name` from a copy of its metadata file whose current snapshot's
    summary has the keys of `summary` set (None: removed): a writer that keeps other summaries."""
    lake = catalogs.get("lake")
    metadata_location = lake.load_table(key.identifier).metadata_location
    metadata = json.loads(Path(urlparse(metadata_location).path).read_text())
    current = next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])
    for field, value in summary.items():
        if value is None:
            current["summary"].pop(field)
        else:
            current["summary"][field] = value
    copy = Path(urlparse(metadata_location).path).with_name(f"00099-{uuid.uuid4()}.metadata.json")
    copy.write_text(json.dumps(metadata))
    copied = TableKey(catalog="lake", namespace=key.namespace, name=name)
    lake.register_table(copied.identifier, copy.as_uri())
    return copied


@pytest.mark.parametrize(
    ("summary", "reason"),
    [
        ({"added-records": None}, "no usable added-records"),
        ({"total-records": None}, "no usable total-records"),
        ({"total-records": "1000"}, "total-records 1000 (expected 3)"),
    ],
)
def test_a_summary_without_a_key_or_with_wrong_totals_reads_the_manifests(
    spark, catalogs, namespace, summary, reason
) -> None:
    key, qualified = _table(catalogs, "lake", namespace, f"keys_{uuid.uuid4().hex[:8]}")
    spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {qualified} VALUES (1), (2)")
    now = datetime.now(UTC)
    known = _full(catalogs, key, now)
    spark.sql(f"INSERT INTO {qualified} VALUES (3)")
    copied = _registered_with(catalogs, key, f"{key.name}_copy", **summary)
    table = catalogs.get("lake").load_table(copied.identifier)

    found = summary_status(table, copied, known.model_copy(update={"table": copied.text}), THRESHOLDS, now)

    assert isinstance(found, str) and reason in found
    untouched = _registered_with(catalogs, key, f"{key.name}_same")
    same = catalogs.get("lake").load_table(untouched.identifier)
    assert isinstance(summary_status(same, untouched, known, THRESHOLDS, now), TableStatus)  # the edit alone
