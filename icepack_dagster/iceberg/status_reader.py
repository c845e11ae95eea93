"""Table status from Iceberg metadata alone: the metadata file for history, the current snapshot's
manifest list and manifests for what a query reads now. No Spark, no data file is opened.

Manifests are decoded in parallel (a thread pool overlaps object-store reads) by `manifest_reader`,
and their aggregates are reused through an optional `ManifestCache` shared between calls.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO
from pyiceberg.schema import Schema, index_by_id, index_name_by_id
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType

from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.file_size_limits import file_size_limits
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.snapshot_graph import RefFacts, SnapshotGraph
from icepack_dagster.domain.table.status import FileSizeBucket, TableStatus, snapshot_ages
from icepack_dagster.iceberg.catalog_errors import METADATA_READ_ERRORS, unreadable_metadata, with_retries
from icepack_dagster.iceberg.catalogs import load_table
from icepack_dagster.iceberg.manifest_cache import ManifestCache
from icepack_dagster.iceberg.manifest_reader import (
    MANIFEST_CONTENT_DELETES,
    ManifestRef,
    read_manifest_list,
    summarize_manifest,
)
from icepack_dagster.iceberg.manifest_summary import (
    SIZE_BUCKET_BOUNDS,
    SIZE_BUCKET_LABELS,
    ManifestSummary,
)
from icepack_dagster.iceberg.partition_layout_reader import partition_layout
from icepack_dagster.iceberg.statistics_reader import read_statistics_freshness


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


_TYPE_PARAMETERS = re.compile(r"[(\[]")

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


def schema_types(schema: Schema) -> dict[str, str]:
    """Each primitive type name of `schema` (`decimal(10, 2)` is `decimal`) with the first column, by
    field id, that holds it; nested fields included."""
    names = index_name_by_id(schema)
    found: dict[str, str] = {}
    for field_id, field in sorted(index_by_id(schema).items()):
        if field.field_type.is_primitive:
            found.setdefault(_TYPE_PARAMETERS.split(str(field.field_type), maxsplit=1)[0], names[field_id])
    return found


def metadata_facts(table: Table, name: str, now: datetime) -> dict[str, Any]:
    """The status fields the metadata file alone determines (no manifest read)."""
    metadata = table.metadata
    snapshot = table.current_snapshot()
    oldest, newest = snapshot_ages(snapshot_span(metadata), now)
    return {
        "table": name,
        "collected_at": now,
        "metadata_location": table.metadata_location,
        "table_uuid": str(metadata.table_uuid),
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
        "schema_types": schema_types(table.schema()),
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


def manifest_facts(refs: list[ManifestRef]) -> dict[str, Any]:
    """The status fields the manifest list alone determines."""
    return {
        "manifest_count": len(refs),
        "data_manifest_count": sum(1 for ref in refs if ref.content != MANIFEST_CONTENT_DELETES),
        "delete_manifest_count": sum(1 for ref in refs if ref.content == MANIFEST_CONTENT_DELETES),
        "manifest_bytes": sum(ref.length for ref in refs),
    }


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
        live_deletion_vectors=sum(s.deletion_vectors for s in summaries),
        live_equality_delete_files=equality_files,
        live_delete_files=position_files + equality_files,
        live_data_bytes=sum(s.data_bytes for s in summaries),
        live_delete_bytes=sum(s.delete_bytes for s in summaries),
        total_records=sum(s.records for s in summaries),
        position_delete_records=sum(s.position_delete_records for s in summaries),
        deletion_vector_records=sum(s.deletion_vector_records for s in summaries),
        equality_delete_records=sum(s.equality_delete_records for s in summaries),
        target_file_size_bytes=target,
        small_file_threshold_bytes=small,
        small_file_count=sum(s.small_files for s in summaries),
        small_file_bytes=sum(s.small_bytes for s in summaries),
        file_size_histogram=_histogram(histogram),
        **manifest_facts(refs),
        partition_count=len(partitions),
        layout=partition_layout(metadata, refs, summaries, small),
        snapshot_graph=snapshot_graph(metadata),
        statistics=read_statistics_freshness(metadata),
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
