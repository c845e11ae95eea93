"""Contract: a health sync learns which tables changed without loading the unchanged ones, per catalog
kind. Glue (moto's Glue API, tables on its S3 API): one paginated `GetTables` listing per database,
through PyIceberg's own Glue client, gives every table's metadata file; only a changed table is loaded
and read, a dropped one is reported as not existing, a table of a database that does not exist too,
and the statuses are exactly those of loading every table; a Hive table is no Iceberg table. Loads are
counted on the real catalog object the tracker is handed. REST (Iceberg's REST catalog server behind a
recording proxy, which shows each loadTable request and its answer): where the server sends ETags
(1.11.0) each table is asked with a conditional load and only a changed one is transferred and read;
the suite's server (1.10.1) sends none, and every table is loaded as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.incremental_status.status_tracker import StatusTracker
from tests.config.catalogs.conftest import S3_ACCESS_KEY_ID, S3_REGION, S3_SECRET_ACCESS_KEY
from tests.config.catalogs.servers import Exchange, RecordingProxy
from tests.config.catalogs.test_glue_catalog import glue_settings
from tests.iceberg.test_status_tracker import WithoutListing
from tests.tables_testkit import append_rows, make_table

THRESHOLDS = HealthThresholds()


class CountingLoads(CatalogSet):
    """The real catalogs, each opened catalog's `load_table` counted before it runs as usual."""

    def __init__(self, settings: IcepackSettings) -> None:
        super().__init__(settings)
        self.loaded: list[tuple[str, ...]] = []

    def _open_uncached(self, name: str) -> Any:
        catalog = super()._open_uncached(name)
        load = catalog.load_table

        def counted(identifier: Any) -> Any:
            self.loaded.append(tuple(identifier))
            return load(identifier)

        catalog.load_table = counted
        return catalog


@pytest.fixture
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Glue credentials the way the default AWS credential chain finds them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET_ACCESS_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", S3_REGION)
    yield


def test_glue_loads_only_changed_tables_and_reports_dropped_ones(
    settings: IcepackSettings, s3_server: str, s3_bucket: str, aws_environment: None, tmp_path: Path
) -> None:
    glue = glue_settings(settings, tmp_path / "home", s3_server, s3_bucket)
    database = f"db_{uuid.uuid4().hex[:8]}"
    keys = [TableKey(catalog="glue", namespace=(database,), name=f"t{i}") for i in range(4)]
    writer = CatalogSet(glue)
    for key in keys:
        make_table(writer, key, commits=2)
    missing_database = TableKey(catalog="glue", namespace=(f"{database}_gone",), name="t")
    now = datetime.now(UTC)
    measured = StatusTracker().refresh(CatalogSet(glue), "glue", keys, THRESHOLDS, now)
    assert len(measured.read) == 4 and not measured.failures
    changed, dropped, *kept = keys
    append_rows(writer, changed, 100, 110)
    writer.get("glue").drop_table(dropped.identifier)

    counting = CountingLoads(glue)
    # a new process, seeded with the last statuses as the platform does; manifests read, to compare with a
    # full read (the summary path has its own tests: tests/iceberg/test_summary_status.py)
    tracker = StatusTracker(from_summaries=False)
    for key in keys:
        tracker.remember(key, measured.statuses[key.text])
    later = now + timedelta(minutes=15)
    steady = tracker.refresh(counting, "glue", [*keys, missing_database], THRESHOLDS, later)

    assert counting.loaded == [changed.identifier]
    assert steady.read == (changed.text,) and steady.unchanged == tuple(k.text for k in kept)
    assert set(steady.failures) == {dropped.text, missing_database.text}
    assert all("does not exist" in error for error in steady.failures.values())
    assert steady.statuses[changed.text].total_records == 30
    full = StatusTracker().refresh(WithoutListing(glue), "glue", [changed, *kept], THRESHOLDS, later)
    assert steady.statuses == full.statuses


def test_glue_listing_holds_only_the_iceberg_tables_asked_for(
    settings: IcepackSettings, s3_server: str, s3_bucket: str, aws_environment: None, tmp_path: Path
) -> None:
    """A Hive table beside them in the same database has no metadata file; a table not asked for is
    left out. (moto answers `GetTables` in one page, without `NextToken`: following pages is the
    paginator's, not exercised here.)"""
    catalogs = CatalogSet(glue_settings(settings, tmp_path / "home", s3_server, s3_bucket))
    database = f"db_{uuid.uuid4().hex[:8]}"
    asked, other = (TableKey(catalog="glue", namespace=(database,), name=n) for n in ("asked", "other"))
    make_table(catalogs, asked, commits=1)
    make_table(catalogs, other, commits=1)
    catalogs.get("glue").glue.create_table(  # type: ignore[attr-defined]
        DatabaseName=database, TableInput={"Name": "hive", "Parameters": {"table_type": "HIVE"}}
    )

    listed = catalogs.metadata_locations("glue", [asked.identifier, (database, "hive")])

    assert listed == {asked.identifier: catalogs.get("glue").load_table(asked.identifier).metadata_location}


def rest_settings(home: Path, url: str) -> IcepackSettings:
    return load_settings(home=home, catalogs={"rest": {"kind": "rest", "uri": url, "warehouse": "lake"}})


def measured_rest_fleet(
    writer: CatalogSet, count: int, now: datetime
) -> tuple[list[TableKey], dict[str, TableStatus]]:
    """`count` new tables of two commits each in a new namespace of the REST catalog, and their
    statuses as a first refresh measures them."""
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    keys = [TableKey(catalog="rest", namespace=(namespace,), name=f"t{i}") for i in range(count)]
    for key in keys:
        make_table(writer, key, commits=2)
    measured = StatusTracker().refresh(writer, "rest", keys, THRESHOLDS, now)
    assert len(measured.read) == count and not measured.failures
    return keys, measured.statuses


def table_loads(proxy: RecordingProxy, keys: list[TableKey]) -> dict[str, list[Exchange]]:
    """The loadTable requests that crossed the proxy, per table key text."""
    paths = {f"/v1/namespaces/{k.namespace[0]}/tables/{k.name}": k.text for k in keys}
    loads: dict[str, list[Exchange]] = {}
    for exchange in proxy.exchanges:
        path = exchange.path.split("?")[0]
        if exchange.method == "GET" and path in paths:
            loads.setdefault(paths[path], []).append(exchange)
    return loads


@pytest.mark.jvm_servers
def test_rest_with_etags_loads_only_changed_tables_and_is_answered_304_for_the_others(
    etag_rest_server: str, etag_rest_proxy: RecordingProxy, tmp_path: Path
) -> None:
    """Iceberg's REST server 1.11.0: each table is asked once, unchanged ones with their status's ETag
    as `If-None-Match` and answered 304 (no body: neither transferred nor read), the changed one
    answered 200 and read from that same answer; a dropped one is reported as not existing. A status
    from before ETags is answered 200 once and keeps the ETag from then on. Statuses are exactly those
    of loading every table."""
    writer = CatalogSet(rest_settings(tmp_path / "writer", etag_rest_server))
    now = datetime.now(UTC)
    keys, measured = measured_rest_fleet(writer, 5, now)
    assert all(status.catalog_etag for status in measured.values())
    changed, dropped, before_etags, *kept = keys
    append_rows(writer, changed, 100, 110)
    writer.get("rest").drop_table(dropped.identifier)

    catalogs = CatalogSet(rest_settings(tmp_path / "home", etag_rest_proxy.url))
    # a new process, seeded with the last statuses as the platform does; manifests read, to compare with a
    # full read (the summary path has its own tests: tests/iceberg/test_summary_status.py)
    tracker = StatusTracker(from_summaries=False)
    for key in keys:
        status = measured[key.text]
        if key == before_etags:
            status = status.model_copy(update={"catalog_etag": None})
        tracker.remember(key, status)
    later = now + timedelta(minutes=15)
    steady = tracker.refresh(catalogs, "rest", keys, THRESHOLDS, later)

    loads = table_loads(etag_rest_proxy, keys)
    answers = {text: [(e.if_none_match, e.status) for e in exchanges] for text, exchanges in loads.items()}
    etag_of = {key: measured[key.text].catalog_etag for key in keys}
    assert answers == {
        changed.text: [(etag_of[changed], 200)],
        dropped.text: [(etag_of[dropped], 404)],
        before_etags.text: [(None, 200)],
        **{key.text: [(etag_of[key], 304)] for key in kept},
    }
    assert steady.read == (changed.text,)
    assert steady.unchanged == (before_etags.text, *(key.text for key in kept))
    assert list(steady.failures) == [dropped.text] and "does not exist" in steady.failures[dropped.text]
    assert steady.statuses[changed.text].total_records == 30
    assert steady.statuses[before_etags.text].catalog_etag == etag_of[before_etags]
    full = StatusTracker().refresh(catalogs, "rest", [changed, before_etags, *kept], THRESHOLDS, later)
    assert steady.statuses == full.statuses

    etag_rest_proxy.exchanges.clear()
    again = tracker.refresh(catalogs, "rest", [before_etags], THRESHOLDS, later)
    assert again.unchanged == (before_etags.text,)
    assert [e.status for e in table_loads(etag_rest_proxy, keys)[before_etags.text]] == [304]


@pytest.mark.jvm_servers
def test_rest_without_etags_loads_every_table_as_before(
    rest_server: str, rest_proxy: RecordingProxy, tmp_path: Path
) -> None:
    """Iceberg's REST server 1.10.1, the suite's, sends no `ETag` (its `RESTCatalogAdapter` gained
    `If-None-Match` and `ETag` in 1.11.0): every table is loaded, with no `If-None-Match`, and the
    unchanged ones are recognised by their metadata file, as before conditional loads; statuses carry
    no ETag. After the first answer without one, tables load through PyIceberg's own `load_table`."""
    writer = CatalogSet(rest_settings(tmp_path / "writer", rest_server))
    now = datetime.now(UTC)
    keys, measured = measured_rest_fleet(writer, 3, now)
    assert all(status.catalog_etag is None for status in measured.values())
    changed, *kept = keys
    append_rows(writer, changed, 100, 110)

    counting = CountingLoads(rest_settings(tmp_path / "home", rest_proxy.url))
    tracker = StatusTracker()
    for key in keys:
        tracker.remember(key, measured[key.text])
    steady = tracker.refresh(counting, "rest", keys, THRESHOLDS, now + timedelta(minutes=15))

    loads = table_loads(rest_proxy, keys)
    answers = {text: [(e.if_none_match, e.status) for e in exchanges] for text, exchanges in loads.items()}
    assert answers == {key.text: [(None, 200)] for key in keys}
    assert steady.read == (changed.text,) and steady.unchanged == tuple(k.text for k in kept)
    assert counting.loaded == [k.identifier for k in keys[1:]]
    assert counting.metadata_locations("rest", [changed.identifier]) is None
