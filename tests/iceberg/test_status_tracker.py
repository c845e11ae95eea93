"""Contract: `StatusTracker.refresh` re-statuses many tables. A table whose metadata file is unchanged
is not read at all (its status survives the loss of its metadata file) and only its ages move with
`now`; a changed table is read again, decoding only new manifests; a dropped table is a failure naming
it, the others are still measured. What a tracker knows can come from another process (`remember`, as
the platform seeds it from the last materialized status); a status measured under other file-size
limits is measured again. (With `from_summaries`, the default, an appended table may be measured
from its snapshot summaries instead: tests/iceberg/test_summary_status.py.) Tables are read in parallel
with the same results, in both catalogs. A SQL
catalog's table list is read from the catalog's own table, and the catalog is opened through PyIceberg
only when a table must be loaded: a refresh of unchanged tables never opens it. A catalog database
nothing ever opened (no `iceberg_tables` yet) has no tables; one that does not answer fails every table
of the refresh with a message naming the catalog.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pytest

from icepack_dagster.config.settings import load_settings
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.exceptions import CatalogUnavailableError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.incremental_status.status_tracker import StatusTracker
from icepack_dagster.iceberg.status_reader import read_status
from tests.iceberg.test_status_reader import _table
from tests.network import free_port

pytestmark = pytest.mark.spark

THRESHOLDS = HealthThresholds()
CATALOGS = pytest.mark.parametrize("catalog", ["lake", "pg"])


class WithoutListing(CatalogSet):
    """The real catalogs seen as catalogs without a location listing (REST, Glue) are: every table is
    loaded to learn its metadata file."""

    def metadata_locations(self, name: str, identifiers: list[tuple[str, ...]]) -> None:
        return None


class Opening(CatalogSet):
    """The real catalogs, counting each time a refresh asks for a catalog opened through PyIceberg."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.opened: list[str] = []

    def get(self, name: str) -> Any:
        self.opened.append(name)
        return super().get(name)


def _tables(spark: Any, catalogs: CatalogSet, catalog: str, namespace: str, count: int) -> list[TableKey]:
    keys = []
    for index in range(count):
        key, qualified = _table(catalogs, catalog, namespace, f"fleet_{index}")
        spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
        spark.sql(f"INSERT INTO {qualified} VALUES ({index})")
        keys.append(key)
    return keys


@CATALOGS
def test_refresh_reads_only_changed_tables(spark, catalogs, namespace, catalog) -> None:
    keys = _tables(spark, catalogs, catalog, namespace, 3)
    tracker, now = StatusTracker(from_summaries=False), datetime.now(UTC)  # summaries: test_summary_status

    first = tracker.refresh(catalogs, catalog, keys, THRESHOLDS, now)
    assert first.read == tuple(k.text for k in keys) and not first.unchanged and not first.failures

    changed, gone, kept = keys
    spark.sql(f"INSERT INTO {catalog}.{namespace}.fleet_0 VALUES (10)")
    kept_table = catalogs.get(catalog).load_table(kept.identifier)
    Path(urlparse(kept_table.metadata_location).path).unlink()  # reading it now would fail
    catalogs.get(catalog).drop_table(gone.identifier)
    later = now + timedelta(hours=1)

    second = tracker.refresh(catalogs, catalog, keys, THRESHOLDS, later)

    assert second.read == (changed.text,) and second.unchanged == (kept.text,)
    assert gone.text in second.failures[gone.text] and "does not exist" in second.failures[gone.text]
    assert tracker.cache.misses == 3 + 1  # the changed table decoded only its new manifest
    expected = read_status(catalogs.get(catalog).load_table(changed.identifier), changed, THRESHOLDS, later)
    assert second.statuses[changed.text] == expected
    aged = second.statuses[kept.text]
    assert aged == first.statuses[kept.text].model_copy(update={
        "collected_at": later,
        "oldest_snapshot_age_seconds": aged.oldest_snapshot_age_seconds,
        "newest_snapshot_age_seconds": aged.newest_snapshot_age_seconds,
    })
    old_age = first.statuses[kept.text].newest_snapshot_age_seconds or 0
    assert aged.newest_snapshot_age_seconds == pytest.approx(old_age + 3600)


def test_refresh_without_a_location_listing_loads_but_does_not_remeasure(spark, catalogs, namespace) -> None:
    keys = _tables(spark, catalogs, "lake", namespace, 2)
    unlisted = WithoutListing(catalogs.settings)
    tracker = StatusTracker()
    now = datetime.now(UTC)

    first = tracker.refresh(unlisted, "lake", keys, THRESHOLDS, now)
    spark.sql(f"INSERT INTO lake.{namespace}.fleet_1 VALUES (5)")
    second = tracker.refresh(unlisted, "lake", keys, THRESHOLDS, now)

    assert len(first.read) == 2 and second.unchanged == (keys[0].text,) and second.read == (keys[1].text,)
    assert isinstance(second.statuses[keys[1].text], TableStatus)
    assert second.statuses[keys[1].text].total_records == 2


def test_invalid_tracker_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="table_workers"):
        StatusTracker(table_workers=0)


@CATALOGS
def test_a_remembered_status_spares_the_read_in_a_new_process(spark, catalogs, namespace, catalog) -> None:
    keys = _tables(spark, catalogs, catalog, namespace, 3)
    now = datetime.now(UTC)
    earlier = StatusTracker().refresh(catalogs, catalog, keys, THRESHOLDS, now)
    # What the platform keeps: the status as JSON in a materialization, decoded by the next run.
    remembered = {
        key: TableStatus.model_validate_json(earlier.statuses[key.text].model_dump_json()) for key in keys
    }
    spark.sql(f"INSERT INTO {catalog}.{namespace}.fleet_2 VALUES (7)")

    tracker = StatusTracker(table_workers=3, from_summaries=False)
    for key, status in remembered.items():
        tracker.remember(key, status)
    later = now + timedelta(minutes=15)
    refresh = tracker.refresh(catalogs, catalog, keys, THRESHOLDS, later)

    assert refresh.unchanged == (keys[0].text, keys[1].text) and refresh.read == (keys[2].text,)
    assert tracker.cache.misses == 2  # only the changed table's manifests: its old one and its new one
    kept = refresh.statuses[keys[0].text]
    assert kept.collected_at == later and kept.total_records == 1
    old_age = remembered[keys[0]].newest_snapshot_age_seconds or 0
    assert kept.newest_snapshot_age_seconds == pytest.approx(old_age + 900, abs=0.01)
    assert refresh.statuses[keys[2].text].total_records == 2


@CATALOGS
def test_unchanged_tables_are_aged_without_opening_the_catalog(spark, catalogs, namespace, catalog) -> None:
    keys = _tables(spark, catalogs, catalog, namespace, 3)
    now = datetime.now(UTC)
    measured = StatusTracker().refresh(catalogs, catalog, keys, THRESHOLDS, now)
    tracker = StatusTracker()
    for key in keys:
        tracker.remember(key, measured.statuses[key.text])
    opening = Opening(catalogs.settings)
    kept, gone, changed = keys
    catalogs.get(catalog).drop_table(gone.identifier)

    steady = tracker.refresh(opening, catalog, keys, THRESHOLDS, now + timedelta(minutes=15))

    assert steady.unchanged == (kept.text, changed.text) and list(steady.failures) == [gone.text]
    assert "does not exist" in steady.failures[gone.text]
    assert opening.opened == []  # listed, aged and found missing: no table was loaded

    spark.sql(f"INSERT INTO {catalog}.{namespace}.fleet_2 VALUES (5)")
    later = tracker.refresh(opening, catalog, [kept, changed], THRESHOLDS, now + timedelta(minutes=30))

    assert later.unchanged == (kept.text,) and later.read == (changed.text,)
    assert later.statuses[changed.text].total_records == 2 and opening.opened == [catalog]


def test_a_status_measured_under_other_file_size_limits_is_read_again(spark, catalogs, namespace) -> None:
    keys = _tables(spark, catalogs, "lake", namespace, 1)
    now = datetime.now(UTC)
    status = StatusTracker().refresh(catalogs, "lake", keys, THRESHOLDS, now).statuses[keys[0].text]
    tracker = StatusTracker()
    tracker.remember(keys[0], status)
    assert tracker.refresh(catalogs, "lake", keys, THRESHOLDS, now).unchanged == (keys[0].text,)

    wider = THRESHOLDS.model_copy(update={"small_file_default_ratio": 0.5})
    again = tracker.refresh(catalogs, "lake", keys, wider, now)
    assert again.read == (keys[0].text,)
    assert again.statuses[keys[0].text].small_file_threshold_bytes != status.small_file_threshold_bytes


def test_parallel_reads_give_the_same_statuses(spark, catalogs, namespace) -> None:
    keys = _tables(spark, catalogs, "lake", namespace, 4)
    now = datetime.now(UTC)
    one = StatusTracker().refresh(catalogs, "lake", keys, THRESHOLDS, now)
    four = StatusTracker(table_workers=4).refresh(catalogs, "lake", keys, THRESHOLDS, now)
    assert one == four and len(four.read) == 4


@CATALOGS
def test_locations_of_chosen_tables_in_nested_namespaces(catalogs, namespace, catalog) -> None:
    lake = catalogs.get(catalog)
    nested = (namespace, "inner")
    lake.create_namespace_if_not_exists(nested)
    schema = pa.schema([("id", pa.int64())])
    tables = {name: lake.create_table((*nested, name), schema=schema) for name in ("a.dotted", "b")}
    lake.create_table((namespace, "b"), schema=schema)  # same name, other namespace: not asked for

    asked = [(*nested, "a.dotted"), (*nested, "b"), (*nested, "missing")]
    found = catalogs.metadata_locations(catalog, asked)

    assert found == {(*nested, name): table.metadata_location for name, table in tables.items()}


def test_ages_stay_exact_when_a_snapshot_was_ahead_of_the_collectors_clock(
    spark, catalogs, namespace
) -> None:
    """A snapshot committed by a writer whose clock runs ahead has age 0 when measured; later, its age
    is counted from its own commit time, not from when it was measured."""
    (key,) = _tables(spark, catalogs, "lake", namespace, 1)
    table = catalogs.get("lake").load_table(key.identifier)
    committed_ms = table.current_snapshot().timestamp_ms  # type: ignore[union-attr]
    early = datetime.fromtimestamp(committed_ms / 1000, UTC) - timedelta(minutes=10)
    measured = read_status(table, key, THRESHOLDS, early)
    assert measured.newest_snapshot_age_seconds == 0.0  # clamped: the commit is "in the future"

    tracker = StatusTracker()
    tracker.remember(key, TableStatus.model_validate_json(measured.model_dump_json()))
    later = early + timedelta(hours=1)
    aged = tracker.refresh(catalogs, "lake", [key], THRESHOLDS, later).statuses[key.text]

    assert aged.newest_snapshot_age_seconds == pytest.approx(50 * 60, abs=0.01)


def test_a_catalog_never_opened_has_no_tables_and_one_that_does_not_answer_is_unavailable(
    tmp_path: Path,
) -> None:
    down = {"kind": "postgres", "host": "127.0.0.1", "port": free_port(), "database": "none", "user": "x",
            "warehouse": str(tmp_path / "down")}
    fresh = Opening(load_settings(home=tmp_path, catalogs={"lake": {"kind": "embedded"}, "down": down}))
    key = TableKey(catalog="lake", namespace=("ns",), name="t")
    now = datetime.now(UTC)

    assert fresh.metadata_locations("lake", [key.identifier]) == {}
    refresh = StatusTracker().refresh(fresh, "lake", [key], THRESHOLDS, now)
    assert "does not exist" in refresh.failures[key.text] and fresh.opened == []

    with pytest.raises(CatalogUnavailableError, match="catalog 'down': its table list could not be read"):
        fresh.metadata_locations("down", [("ns", "t")])
    gone = TableKey(catalog="down", namespace=("ns",), name="t")
    failed = StatusTracker().refresh(fresh, "down", [gone], THRESHOLDS, now).failures[gone.text]
    assert "catalog 'down'" in failed and fresh.opened == []
