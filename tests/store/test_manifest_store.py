"""Contract: manifest summaries outlive the process in the state database (SQLite and PostgreSQL). A
new process (a fresh `Engine`, as every health-sync run is) re-measuring a table that changed decodes
only the manifests no earlier process read, and measures exactly what a full decode measures. A summary
survives the round trip unchanged; a path is stored once; an unusable database makes status slower,
never wrong or failed."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import SecretStr
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.manifest_cache import ManifestCache
from icepack_dagster.iceberg.manifest_summary import ManifestSummary, partition_id
from icepack_dagster.iceberg.status_reader import read_status
from icepack_dagster.store.manifest_store import ManifestSummaryStore, decode_summary, encode_summary
from tests.conftest import PG_HOST, PG_PORT, PG_USER

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])


@pytest.fixture(params=["sqlite", "postgres"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path, postgres_database: str) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
    else:
        yield f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{postgres_database}"


def _partitioned_table(catalogs: CatalogSet, namespace: str, name: str, appends: int) -> TableKey:
    """A real table partitioned by `day`, one append (one manifest) per day."""
    lake = catalogs.get("lake")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "day", StringType()))
    table = lake.create_table(
        f"{namespace}.{name}",
        schema=schema,
        partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "day")),
    )
    for i in range(appends):
        table.append(pa.table({"id": [i, i + 100], "day": [f"d{i}", f"d{i}"]}, schema=SCHEMA))
    return TableKey(catalog="lake", namespace=(namespace,), name=name)


def test_a_summary_survives_the_round_trip(catalogs: CatalogSet, namespace: str) -> None:
    key = _partitioned_table(catalogs, namespace, "round_trip", appends=3)
    cache = ManifestCache()
    read_status(catalogs.get("lake").load_table(key.identifier), key, _thresholds(), datetime.now(UTC),
                cache=cache)
    assert len(cache) == 3
    for (_path, _small), summary in cache._entries.items():
        assert decode_summary(encode_summary(summary)) == summary
        assert len(summary.partitions) == 1
    assert partition_id(("d0",)) == partition_id(("d0",)) != partition_id(("d1",))
    assert decode_summary(encode_summary(ManifestSummary())) == ManifestSummary()


def test_a_new_process_decodes_only_new_manifests(
    settings: IcepackSettings, catalogs: CatalogSet, namespace: str, state_url: str
) -> None:
    scoped = settings.model_copy(update={
        "state_url": SecretStr(state_url), "store_manifest_summaries": True, "status_from_summaries": False,
    })
    key = _partitioned_table(catalogs, namespace, "streaming", appends=4)

    first_run = Engine(scoped, catalogs=catalogs)
    earlier = first_run.refresh_statuses([key], {})
    assert first_run.manifest_cache.misses == 4 and earlier.read == (key.text,)

    table = catalogs.get("lake").load_table(key.identifier)
    table.append(pa.table({"id": [7], "day": ["d0"]}, schema=SCHEMA))  # a new manifest, a known day

    next_run = Engine(scoped, catalogs=catalogs)  # a new process: an empty in-memory cache
    known = {key: earlier.statuses[key.text]}
    now = datetime.now(UTC)
    later = next_run.refresh_statuses([key], known, now)  # type: ignore[arg-type]

    cache = next_run.manifest_cache
    assert later.read == (key.text,) and (cache.misses, cache.stored_hits) == (1, 4)
    fresh = read_status(catalogs.get("lake").load_table(key.identifier), key, scoped.thresholds, now)
    assert later.statuses[key.text] == fresh
    assert fresh.total_records == 9 and fresh.partition_count == 4


def test_a_path_is_stored_once(catalogs: CatalogSet, namespace: str, state_url: str) -> None:
    key = _partitioned_table(catalogs, namespace, "once", appends=2)
    store = ManifestSummaryStore(state_url)
    before = store.count()
    for _ in range(2):
        cache = ManifestCache(store=store)
        table = catalogs.get("lake").load_table(key.identifier)
        read_status(table, key, _thresholds(), datetime.now(UTC), cache=cache)
    assert store.count() == before + 2
    assert cache.stored_hits == 2 and cache.misses == 0


def test_an_unusable_database_measures_without_it(
    catalogs: CatalogSet, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = _partitioned_table(catalogs, namespace, "no_store", appends=2)
    secret_url = f"postgresql+psycopg2://{PG_USER}:s3cret@{PG_HOST}:{PG_PORT}/no_such_database_here"
    cache = ManifestCache(store=ManifestSummaryStore(secret_url))
    table = catalogs.get("lake").load_table(key.identifier)
    now = datetime.now(UTC)
    with caplog.at_level(logging.WARNING):
        status = read_status(table, key, _thresholds(), now, cache=cache)
    assert status == read_status(table, key, _thresholds(), now)
    assert cache.misses == 2 and cache.stored_hits == 0
    assert "could not be read" in caplog.text and "could not be stored" in caplog.text
    assert "s3cret" not in caplog.text


def _thresholds() -> HealthThresholds:
    return HealthThresholds()


def test_a_state_path_that_cannot_exist_measures_without_it(
    catalogs: CatalogSet, namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = _partitioned_table(catalogs, namespace, "bad_path", appends=1)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cache = ManifestCache(store=ManifestSummaryStore(f"sqlite:///{blocker / 'state.db'}"))
    table = catalogs.get("lake").load_table(key.identifier)
    with caplog.at_level(logging.WARNING):
        status = read_status(table, key, _thresholds(), datetime.now(UTC), cache=cache)
    assert status.total_records == 2 and cache.misses == 1
    assert "could not be read" in caplog.text


def test_credentials_in_state_urls_are_masked() -> None:
    from icepack_dagster.store.state_database import redacted_url

    masked = redacted_url("postgresql+psycopg2://icepack:s3cret@db:5432/state?sslmode=require&password=p4ss")
    assert "s3cret" not in masked and "p4ss" not in masked
    assert masked.startswith("postgresql+psycopg2://**********@db:5432/state?sslmode=require&password=")
