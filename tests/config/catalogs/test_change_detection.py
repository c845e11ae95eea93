"""Contract: a health sync learns which tables changed without loading the unchanged ones, per catalog
kind. Glue (moto's Glue API, tables on its S3 API): one paginated `GetTables` listing per database,
through PyIceberg's own Glue client, gives every table's metadata file; only a changed table is loaded
and read, a dropped one is reported as not existing, a table of a database that does not exist too,
and the statuses are exactly those of loading every table; a Hive table is no Iceberg table. Loads are
counted on the real catalog object the tracker is handed. REST: Iceberg's REST test server of the
suite (1.10.1) sends no `ETag` on loadTable, so a REST catalog there keeps loading every table.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.status_tracker import StatusTracker
from tests.config.catalogs.conftest import S3_ACCESS_KEY_ID, S3_REGION, S3_SECRET_ACCESS_KEY
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
    tracker = StatusTracker()  # a new process: seeded with the last statuses, as the platform does
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


@pytest.mark.jvm_servers
def test_the_suites_rest_server_sends_no_etag_on_load_table(rest_server: str, tmp_path: Path) -> None:
    """Iceberg's REST test server 1.10.1 has no conditional loads (its `RESTCatalogAdapter` gained
    `If-None-Match` and `ETag` in 1.11.0): REST catalogs load every table, as before."""
    rest = load_settings(
        home=tmp_path, catalogs={"rest": {"kind": "rest", "uri": rest_server, "warehouse": "lake"}}
    )
    key = TableKey(catalog="rest", namespace=(f"ns_{uuid.uuid4().hex[:8]}",), name="t")
    make_table(CatalogSet(rest), key, commits=1)

    answer = requests.get(
        f"{rest_server}/v1/namespaces/{key.namespace[0]}/tables/{key.name}",
        headers={"If-None-Match": "*"},
        timeout=30,
    )

    assert answer.status_code == 200 and "ETag" not in answer.headers
    assert CatalogSet(rest).metadata_locations("rest", [key.identifier]) is None
