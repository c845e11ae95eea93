"""Incremental status of many tables: read only the tables whose metadata file changed.

An Iceberg table's facts are fixed by its metadata file; only the snapshot ages move with the clock. So
a tracker that knows a table's last status and the metadata file it came from need not read the table
again while that file is current. A listing gives every table's current metadata location (SQL
catalogs: one query, `catalog_listings/sql_listing.py`; Glue: one paginated listing per database,
`catalog_listings/glue_listing.py`); REST catalogs are asked per table, with the status's `ETag` as
`If-None-Match` where the server sends ETags (`catalog_listings/rest_conditional_loads.py`: a 304 is an
unchanged table, neither transferred nor parsed), else by loading it. A changed table is read again,
decoding only manifests the tracker's `ManifestCache` has not seen, or not even those: when only appends
came since the known status and they cannot change the table's health or plan, its status is taken from
the snapshot summaries and the manifest list (`summary_status.py`, which states the rule; the status
says so in `depth` and bounds what it carries). The catalog is opened through
PyIceberg only when some table must be loaded, so a refresh of unchanged tables of a SQL catalog never
imports PyIceberg.

What the tracker knows comes from its own earlier refreshes or, in a new process, from `remember`
(the platform seeds it with each table's last materialized status).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.file_size_limits import file_size_limits
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus, snapshot_ages
from icepack_dagster.exceptions import IcepackError, TableNotFoundError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.manifest_cache import ManifestCache

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table


class FleetRefresh(FrozenModel):
    """One refresh of many tables: a status per table that could be measured, and why others could not."""

    statuses: dict[str, TableStatus] = Field(description="Table key text -> status")
    read: tuple[str, ...] = Field(description="Tables read: new, or their metadata file changed")
    unchanged: tuple[str, ...] = Field(description="Tables not read at all: same metadata file as before")
    failures: dict[str, str] = Field(default_factory=dict, description="Table key text -> error")


class _Known(FrozenModel):
    metadata_location: str
    status: TableStatus
    snapshot_span: tuple[int, int] | None  # oldest and newest snapshot (ms), for ages at a later `now`


class _Outcome(FrozenModel):
    """What refreshing one table found: a status (read or aged) or an error."""

    status: TableStatus | None = None
    known: _Known | None = None  # what to know from now on: set when the table was loaded
    read: bool = False  # measured anew (else its known status was aged)
    error: str | None = None


class StatusTracker:
    """Statuses of many tables of one catalog, kept between refreshes (one tracker per catalog and
    process; `refresh` is not reentrant). Changed tables are measured from their snapshot summaries
    where `summary_status` allows it (unless `from_summaries` is false), else read with `read_status` and
    the tracker's `ManifestCache`. `table_workers` tables are loaded and read at once (object stores and
    REST catalogs are latency-bound); `workers` manifests per table."""

    def __init__(
        self,
        cache: ManifestCache | None = None,
        workers: int = 8,
        table_workers: int = 1,
        from_summaries: bool = True,
    ) -> None:
        if table_workers < 1:
            raise ValueError(f"StatusTracker table_workers must be at least 1, got {table_workers}")
        self.cache = cache if cache is not None else ManifestCache()
        self.workers = workers
        self.table_workers = table_workers
        self.from_summaries = from_summaries
        self._known: dict[TableKey, _Known] = {}

    def remember(self, key: TableKey, status: TableStatus) -> None:
        """Take a status measured earlier (by another process) as known, so the table is not read again
        while its metadata file is the same. A status without its metadata file is ignored."""
        if status.metadata_location is None:
            return
        self._known[key] = _Known(
            metadata_location=status.metadata_location, status=status, snapshot_span=_span_of(status)
        )

    def refresh(
        self,
        catalogs: CatalogSet,
        name: str,
        keys: Iterable[TableKey],
        thresholds: HealthThresholds,
        now: datetime,
    ) -> FleetRefresh:
        """A status for each of `keys` (tables of catalog `name`) at `now`, reading only tables whose
        metadata file changed; the catalog is opened only if one must be read."""
        if now.tzinfo is None:
            raise ValueError(f"StatusTracker.refresh: 'now' must be timezone-aware, got {now!r}")
        keys = list(keys)
        try:
            locations = catalogs.metadata_locations(name, [key.identifier for key in keys])
        except IcepackError as error:
            for key in keys:
                self._known.pop(key, None)
            failed = {key.text: str(error) for key in keys}
            return FleetRefresh(statuses={}, read=(), unchanged=(), failures=failed)
        kept = {key: self._kept(key, thresholds, locations) for key in keys}
        catalog: Catalog | IcepackError | None = None
        if any(kept[key] is None and (locations is None or key.identifier in locations) for key in keys):
            try:
                catalog = catalogs.get(name)
            except IcepackError as error:
                catalog = error  # each table that must be loaded fails with it; the others are aged
        outcomes = self._outcomes(catalogs, catalog, keys, kept, thresholds, now, locations)
        statuses: dict[str, TableStatus] = {}
        read: list[str] = []
        unchanged: list[str] = []
        failures: dict[str, str] = {}
        for key, outcome in zip(keys, outcomes, strict=True):
            if outcome.error is not None:
                self._known.pop(key, None)
                failures[key.text] = outcome.error
                continue
            assert outcome.status is not None
            statuses[key.text] = outcome.status
            if outcome.known is not None:
                self._known[key] = outcome.known
            (read if outcome.read else unchanged).append(key.text)
        return FleetRefresh(
            statuses=statuses, read=tuple(read), unchanged=tuple(unchanged), failures=failures
        )

    def _kept(
        self, key: TableKey, thresholds: HealthThresholds, locations: dict[tuple[str, ...], str] | None
    ) -> _Known | None:
        """What the tracker knows of the table, if it still holds without loading the table: measured
        under today's file-size limits, from the metadata file the catalog lists now."""
        known = self._known.get(key)
        if known is None or locations is None or locations.get(key.identifier) != known.metadata_location:
            return None
        return known if _same_limits(key, known.status, thresholds) else None

    def _outcomes(
        self,
        catalogs: CatalogSet,
        catalog: Catalog | IcepackError | None,
        keys: Sequence[TableKey],
        kept: dict[TableKey, _Known | None],
        thresholds: HealthThresholds,
        now: datetime,
        locations: dict[tuple[str, ...], str] | None,
    ) -> list[_Outcome]:
        def one(key: TableKey) -> _Outcome:
            still = kept[key]
            if still is not None:
                return _Outcome(status=_aged(still, now))
            return self._refresh_one(catalogs, catalog, key, thresholds, now, locations)

        if self.table_workers == 1 or len(keys) <= 1:
            return [one(key) for key in keys]
        with ThreadPoolExecutor(max_workers=min(self.table_workers, len(keys))) as pool:
            return list(pool.map(one, keys))

    def _refresh_one(
        self,
        catalogs: CatalogSet,
        catalog: Catalog | IcepackError | None,
        key: TableKey,
        thresholds: HealthThresholds,
        now: datetime,
        locations: dict[tuple[str, ...], str] | None,
    ) -> _Outcome:
        """Load the table and read its status, unless its catalog says it is unchanged (a REST server's
        304) or its metadata file is the one already measured."""
        known = self._known.get(key)
        if known is not None and not _same_limits(key, known.status, thresholds):
            known = None  # thresholds changed since: small-file counts must be taken again
        try:
            listed = locations.get(key.identifier) if locations is not None else None
            if locations is not None and listed is None:
                raise TableNotFoundError(f"table {key.text} does not exist in catalog {key.catalog!r}")
            if isinstance(catalog, IcepackError):
                raise catalog
            assert catalog is not None, "refresh opens the catalog whenever a table must be loaded"
            etag = known.status.catalog_etag if known is not None else None
            loaded = catalogs.load_if_changed(catalog, key, etag)
            if loaded.table is None:
                assert known is not None, "only a load that sent the known status's ETag is answered 304"
                return _Outcome(status=_aged(known, now))
            table = loaded.table
            if known is not None and table.metadata_location == known.metadata_location:
                if loaded.etag == known.status.catalog_etag:
                    return _Outcome(status=_aged(known, now))  # a catalog without a location listing
                # the same table under a new ETag (a status from before ETags): keep the ETag from now on
                renewed = known.status.model_copy(update={"catalog_etag": loaded.etag})
                known = known.model_copy(update={"status": renewed})
                return _Outcome(status=_aged(known, now), known=known)
            status, span = self._read(table, key, thresholds, now, known.status if known else None)
            status = status.model_copy(update={"catalog_etag": loaded.etag})
        except IcepackError as error:
            return _Outcome(error=str(error))
        except Exception as error:  # storage and catalog clients raise their own errors: one table fails
            problem = f"{type(error).__name__}: {error}"
            return _Outcome(error=f"table {key.text}: status could not be read ({problem})")
        # The listed location, when older than the loaded one, makes the next refresh read again: safe.
        known = _Known(metadata_location=listed or table.metadata_location, status=status, snapshot_span=span)
        return _Outcome(status=status, known=known, read=True)

    def _read(
        self,
        table: Table,
        key: TableKey,
        thresholds: HealthThresholds,
        now: datetime,
        known: TableStatus | None,
    ) -> tuple[TableStatus, tuple[int, int] | None]:
        """The table's status, from its summaries where they suffice, and its snapshot span (PyIceberg's
        readers, imported only when a table is read)."""
        from icepack_dagster.iceberg.incremental_status.summary_status import summary_status
        from icepack_dagster.iceberg.status_reader import read_status, snapshot_span

        found = summary_status(table, key, known, thresholds, now) if known and self.from_summaries else None
        if not isinstance(found, TableStatus):
            found = read_status(table, key, thresholds, now, self.workers, self.cache)
        return found, snapshot_span(table.metadata)


def _same_limits(key: TableKey, status: TableStatus, thresholds: HealthThresholds) -> bool:
    """Whether the file-size limits the status was measured with still hold under `thresholds`."""
    try:
        limits = file_size_limits(key.text, status.properties, thresholds)
    except IcepackError:
        return False
    return limits == (status.target_file_size_bytes, status.small_file_threshold_bytes)


def _span_of(status: TableStatus) -> tuple[int, int] | None:
    """The oldest and newest snapshot times (ms) a status's ages were measured from: recorded in a full
    status, else worked back from its ages (exact unless a snapshot was ahead of the collector's clock)."""
    if status.snapshot_span_ms is not None:
        return status.snapshot_span_ms
    oldest, newest = status.oldest_snapshot_age_seconds, status.newest_snapshot_age_seconds
    if oldest is None or newest is None:
        return None
    at_ms = status.collected_at.timestamp() * 1000
    return round(at_ms - oldest * 1000), round(at_ms - newest * 1000)


def _aged(known: _Known, now: datetime) -> TableStatus:
    """The kept status with `collected_at` and snapshot ages moved to `now`; nothing else can change
    while the metadata file is the same."""
    oldest, newest = snapshot_ages(known.snapshot_span, now)
    ages = {"oldest_snapshot_age_seconds": oldest, "newest_snapshot_age_seconds": newest}
    return known.status.model_copy(update={"collected_at": now, **ages})
