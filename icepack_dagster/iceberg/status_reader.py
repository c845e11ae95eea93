"""Table status from Iceberg metadata alone: the metadata file for history, the current snapshot's
manifest list and manifests for what a query reads now. No Spark, no data file is opened.

Manifests are decoded in parallel (a thread pool overlaps object-store reads) by `manifest_reader`,
and their aggregates are reused through an optional `ManifestCache` shared between calls.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from fastavro.read import SchemaResolutionError
from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType

from icepack_dagster.domain.health_thresholds import HealthThresholds
from icepack_dagster.domain.iceberg_properties import TARGET_FILE_SIZE_BYTES, iceberg_value
from icepack_dagster.domain.partition_layout import (
    PartitionCandidates,
    PartitionField,
    PartitionLayout,
    PartitionSpecLayout,
)
from icepack_dagster.domain.property_text import parse_whole_number
from icepack_dagster.domain.snapshot_graph import RefFacts, SnapshotGraph
from icepack_dagster.domain.status import FileSizeBucket, TableStatus
from icepack_dagster.domain.table_key import TableKey
from icepack_dagster.exceptions import (
    CatalogUnavailableError,
    IcepackError,
    InvalidPolicyError,
    MetadataReadError,
)
from icepack_dagster.iceberg.catalog_errors import is_transient, with_retries
from icepack_dagster.iceberg.catalogs import load_table
from icepack_dagster.iceberg.manifest_reader import (
    MANIFEST_CONTENT_DELETES,
    SIZE_BUCKET_BOUNDS,
    SIZE_BUCKET_LABELS,
    ManifestCache,
    ManifestRef,
    ManifestSummary,
    large_file_threshold,
    read_manifest_list,
    summarize_manifest,
)

logger = logging.getLogger(__name__)

SMALL_FILE_THRESHOLD_PROPERTY = "icepack.small-file-threshold-bytes"

# What a damaged or unreadable manifest raises: I/O, truncated or corrupt Avro, a schema that is no manifest.
METADATA_READ_ERRORS = (
    OSError, EOFError, ValueError, KeyError, TypeError, IndexError, zlib.error, SchemaResolutionError
)


def unreadable_metadata(table: str, what: str, error: Exception) -> IcepackError:
    """The error to raise for a metadata file that could not be read, by what went wrong: storage that
    kept failing transiently (deferred, not the table's fault), a missing or damaged file, or an error
    that may be a bug in the decoder (said so, traceback logged)."""
    cause = f"{type(error).__name__}: {error}"
    if is_transient(error):
        return CatalogUnavailableError(
            f"table {table}: {what} could not be read: its storage kept failing ({cause}); nothing was "
            "changed, and maintenance is deferred until the storage answers again"
        )
    if isinstance(error, KeyError | TypeError | IndexError):
        logger.warning("unexpected error decoding %s of table %s", what, table, exc_info=error)
        return MetadataReadError(
            f"table {table}: {what} could not be decoded ({cause}); if the file is intact this is a bug "
            "in icepack's manifest decoder (the traceback is in the log), otherwise the file is damaged"
        )
    hint = "check that the file exists and the table's storage is reachable" if isinstance(
        error, OSError
    ) else "the file is damaged or not an Iceberg manifest file"
    return MetadataReadError(f"table {table}: {what} could not be read ({cause}); {hint}")


def _positive(table: str, name: str, raw: str, value: int) -> int:
    if value <= 0:
        raise InvalidPolicyError(table, name, raw, "must be greater than zero")
    return value


def file_size_limits(
    table: str, properties: Mapping[str, str], thresholds: HealthThresholds
) -> tuple[int, int]:
    """(target file size, small-file threshold) in bytes for a table, from its properties.

    The target is `write.target-file-size-bytes` as Iceberg reads it (or Iceberg's default); the
    threshold is `icepack.small-file-threshold-bytes` (plain ASCII digits, like every `icepack.*`
    number) when set, else the default ratio of the target.
    """
    target = iceberg_value(properties, TARGET_FILE_SIZE_BYTES)
    if target.error is not None:
        raise InvalidPolicyError(table, TARGET_FILE_SIZE_BYTES, target.raw or "", target.error)
    size = _positive(table, TARGET_FILE_SIZE_BYTES, target.raw or "", int(target.value))
    raw = properties.get(SMALL_FILE_THRESHOLD_PROPERTY)
    if raw is None:
        return size, max(1, int(size * thresholds.small_file_default_ratio))
    try:
        small = parse_whole_number(raw.strip())
    except ValueError as error:
        raise InvalidPolicyError(table, SMALL_FILE_THRESHOLD_PROPERTY, raw, f"{error} (bytes)") from None
    return size, _positive(table, SMALL_FILE_THRESHOLD_PROPERTY, raw, small)


def _summaries(
    table: str, io: FileIO, refs: list[ManifestRef], small: int, workers: int, cache: ManifestCache | None
) -> list[ManifestSummary]:
    """One summary per manifest, from the cache where possible, the rest decoded in parallel."""
    found = cache.get_many([ref.path for ref in refs], small) if cache is not None else [None] * len(refs)
    missing = [ref for ref, summary in zip(refs, found, strict=True) if summary is None]

    def load(ref: ManifestRef) -> ManifestSummary:
        try:
            return with_retries(lambda: summarize_manifest(io, ref, small))
        except METADATA_READ_ERRORS as error:
            raise unreadable_metadata(table, f"manifest {ref.path}", error) from error

    if workers == 1 or len(missing) <= 1:
        decoded = [load(ref) for ref in missing]
    else:
        with ThreadPoolExecutor(min(workers, len(missing)), thread_name_prefix="manifest") as pool:
            decoded = list(pool.map(load, missing))
    if cache is not None:
        cache.put_many(small, {ref.path: summary for ref, summary in zip(missing, decoded, strict=True)})
    fresh = iter(decoded)
    return [summary if summary is not None else next(fresh) for summary in found]


def _histogram(counts: list[int]) -> tuple[FileSizeBucket, ...]:
    lowers = (0, *SIZE_BUCKET_BOUNDS)
    uppers = (*SIZE_BUCKET_BOUNDS, None)
    return tuple(
        FileSizeBucket(label=label, lower_bytes=lower, upper_bytes=upper, file_count=count)
        for label, lower, upper, count in zip(SIZE_BUCKET_LABELS, lowers, uppers, counts, strict=True)
    )


def snapshot_span(metadata: TableMetadata) -> tuple[int, int] | None:
    """Timestamps (ms) of the oldest and newest retained snapshot; None with no snapshot."""
    stamps = [s.timestamp_ms for s in metadata.snapshots]
    return (min(stamps), max(stamps)) if stamps else None


def snapshot_ages(span: tuple[int, int] | None, now: datetime) -> tuple[float | None, float | None]:
    """Ages in seconds at `now` of the oldest and newest snapshot of `span` (never negative)."""
    if span is None:
        return None, None
    now_ms = now.timestamp() * 1000
    return max(0.0, (now_ms - span[0]) / 1000), max(0.0, (now_ms - span[1]) / 1000)


# The graph travels with every status (Dagster metadata, `status --json`): past this many snapshots it
# is left out, and expiry is estimated from the snapshot ages instead of predicted snapshot by snapshot.
MAX_GRAPH_SNAPSHOTS = 2000


def snapshot_graph(metadata: TableMetadata) -> SnapshotGraph | None:
    """Every snapshot's id, parent and commit time, and every ref with its own retention settings;
    None past MAX_GRAPH_SNAPSHOTS snapshots."""
    if len(metadata.snapshots) > MAX_GRAPH_SNAPSHOTS:
        return None
    return SnapshotGraph(
        snapshots=tuple((s.snapshot_id, s.parent_snapshot_id, s.timestamp_ms) for s in metadata.snapshots),
        refs=tuple(
            RefFacts(
                name=ref_name,
                kind="tag" if ref.snapshot_ref_type == SnapshotRefType.TAG else "branch",
                snapshot_id=ref.snapshot_id,
                min_snapshots_to_keep=ref.min_snapshots_to_keep,
                max_snapshot_age_ms=ref.max_snapshot_age_ms,
                max_ref_age_ms=ref.max_ref_age_ms,
            )
            for ref_name, ref in sorted(metadata.refs.items())
        ),
    )


def metadata_facts(table: Table, name: str, now: datetime) -> dict[str, Any]:
    """The status fields the metadata file alone determines, the same for full and light status."""
    metadata = table.metadata
    snapshot = table.current_snapshot()
    oldest, newest = snapshot_ages(snapshot_span(metadata), now)
    return {
        "table": name,
        "collected_at": now,
        "metadata_location": table.metadata_location,
        "location": metadata.location,
        "format_version": metadata.format_version,
        "snapshot_id": snapshot.snapshot_id if snapshot is not None else None,
        "partition_spec_count": len(metadata.partition_specs),
        "snapshot_count": len(metadata.snapshots),
        "oldest_snapshot_age_seconds": oldest,
        "newest_snapshot_age_seconds": newest,
        "metadata_log_entries": len(metadata.metadata_log),
        "branch_count": sum(
            1
            for ref_name, ref in metadata.refs.items()
            if ref.snapshot_ref_type == SnapshotRefType.BRANCH and ref_name != MAIN_BRANCH
        ),
        "tag_count": sum(1 for ref in metadata.refs.values() if ref.snapshot_ref_type == SnapshotRefType.TAG),
        "properties": dict(metadata.properties),
    }


def current_manifests(table: Table, name: str) -> list[ManifestRef]:
    """The manifests of the table's current snapshot (none without a snapshot), from its manifest list;
    an unreadable list is a `MetadataReadError` naming the table, the list and the snapshot."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    try:
        return with_retries(lambda: read_manifest_list(table.io, snapshot.manifest_list))
    except METADATA_READ_ERRORS as error:
        what = f"manifest list {snapshot.manifest_list} of snapshot {snapshot.snapshot_id}"
        raise unreadable_metadata(name, what, error) from error


def _source(metadata: TableMetadata, source_id: int) -> tuple[str | None, str | None]:
    """Name and type of a partition source column, from the newest schema that still has it."""
    for schema in reversed(metadata.schemas):
        try:
            field = schema.find_field(source_id)
        except ValueError:
            continue
        return schema.find_column_name(source_id), str(field.field_type)
    return None, None


def partition_layout(
    metadata: TableMetadata, refs: list[ManifestRef], summaries: list[ManifestSummary], small: int
) -> PartitionLayout:
    """Rewrite candidates per (spec, partition) over all manifests, with each partition's last write."""
    commit_ms = {snapshot.snapshot_id: snapshot.timestamp_ms for snapshot in metadata.snapshots}
    merged: dict[tuple[int, tuple[Any, ...]], list[Any]] = {}
    for ref, summary in zip(refs, summaries, strict=True):
        for files in summary.partition_files:
            counts = merged.setdefault((ref.spec_id, files.values), [0] * 5 + [-1, 0, 0])
            found = (files.small_files, files.small_bytes, files.large_files, files.large_bytes)
            for index, value in enumerate((*found, files.delete_files)):
                counts[index] += value
            written = [commit_ms[s] for s in files.snapshot_ids if s in commit_ms]
            counts[5] = max([counts[5], *written])
            for index, count in ((6, files.position_delete_files), (7, files.position_delete_bytes)):
                counts[index] = None if count is None or counts[index] is None else counts[index] + count
    specs = tuple(
        PartitionSpecLayout(
            spec_id=spec.spec_id,
            fields=tuple(
                PartitionField(
                    name=field.name,
                    transform=str(field.transform),
                    source_column=_source(metadata, field.source_id)[0],
                    source_type=_source(metadata, field.source_id)[1],
                )
                for field in spec.fields
            ),
        )
        for spec in metadata.partition_specs
    )
    candidates = tuple(
        PartitionCandidates(
            spec_id=spec_id,
            values=values,
            small_files=c[0],
            small_bytes=c[1],
            large_files=c[2],
            large_bytes=c[3],
            delete_files=c[4],
            last_write_ms=c[5] if c[5] >= 0 else None,
            position_delete_files=c[6],
            position_delete_bytes=c[7],
        )
        for (spec_id, values), c in merged.items()
    )
    return PartitionLayout(
        current_spec_id=metadata.default_spec_id,
        specs=specs,
        large_file_threshold_bytes=large_file_threshold(small),
        candidates=candidates,
    )


def read_status(
    table: Table,
    key: TableKey,
    thresholds: HealthThresholds,
    now: datetime,
    workers: int = 8,
    cache: ManifestCache | None = None,
) -> TableStatus:
    """Measure one loaded table. `now` (timezone-aware) is the collection time snapshot ages are
    measured from; `workers` manifests are read at once; `cache` keeps manifest aggregates between calls.
    """
    name = key.text
    if now.tzinfo is None:
        raise ValueError(f"table {name}: 'now' must be timezone-aware (snapshot times are UTC), got {now!r}")
    if workers < 1:
        raise ValueError(f"table {name}: 'workers' must be at least 1, got {workers}")
    metadata = table.metadata
    target, small = file_size_limits(name, metadata.properties, thresholds)

    refs = current_manifests(table, name)
    summaries = _summaries(name, table.io, refs, small, workers, cache)

    histogram = [0] * len(SIZE_BUCKET_LABELS)
    partitions: set[tuple[int, int]] = set()
    for ref, summary in zip(refs, summaries, strict=True):
        for index, count in enumerate(summary.size_histogram):
            histogram[index] += count
        partitions.update((ref.spec_id, values) for values in summary.partitions)

    position_files = sum(s.position_delete_files for s in summaries)
    equality_files = sum(s.equality_delete_files for s in summaries)
    return TableStatus(
        **metadata_facts(table, name, now),
        snapshot_span_ms=snapshot_span(metadata),
        live_data_files=sum(s.data_files for s in summaries),
        live_position_delete_files=position_files,
        live_equality_delete_files=equality_files,
        live_delete_files=position_files + equality_files,
        live_data_bytes=sum(s.data_bytes for s in summaries),
        live_delete_bytes=sum(s.delete_bytes for s in summaries),
        total_records=sum(s.records for s in summaries),
        position_delete_records=sum(s.position_delete_records for s in summaries),
        equality_delete_records=sum(s.equality_delete_records for s in summaries),
        target_file_size_bytes=target,
        small_file_threshold_bytes=small,
        small_file_count=sum(s.small_files for s in summaries),
        small_file_bytes=sum(s.small_bytes for s in summaries),
        file_size_histogram=_histogram(histogram),
        manifest_count=len(refs),
        data_manifest_count=sum(1 for ref in refs if ref.content != MANIFEST_CONTENT_DELETES),
        delete_manifest_count=sum(1 for ref in refs if ref.content == MANIFEST_CONTENT_DELETES),
        manifest_bytes=sum(ref.length for ref in refs),
        partition_count=len(partitions),
        layout=partition_layout(metadata, refs, summaries, small),
        snapshot_graph=snapshot_graph(metadata),
    )


def collect_status(
    catalog: Catalog,
    key: TableKey,
    thresholds: HealthThresholds,
    now: datetime,
    workers: int = 8,
    cache: ManifestCache | None = None,
) -> TableStatus:
    """Load the table from its catalog and measure it; failures name the table and what went wrong."""
    return read_status(load_table(catalog, key), key, thresholds, now, workers, cache)
