"""Where a table's compaction candidates are, partition by partition: the per-manifest `PartitionFiles`
merged per (partition spec, partition values), with each partition's last write, described in the
terms of `domain/table/partition_layout.py` that the compaction planner reads."""

from __future__ import annotations

from typing import Any

from pyiceberg.table.metadata import TableMetadata

from icepack_dagster.domain.table.partition_layout import (
    PartitionCandidates,
    PartitionField,
    PartitionLayout,
    PartitionSpecLayout,
)
from icepack_dagster.iceberg.manifest_reader import ManifestRef
from icepack_dagster.iceberg.manifest_summary import ManifestSummary, large_file_threshold


def _source(metadata: TableMetadata, source_id: int) -> tuple[str | None, str | None]:
    """Name and type of a partition source column, from the newest schema that still has it."""
    for schema in reversed(metadata.schemas):
        try:
            field = schema.find_field(source_id)
        except ValueError:
            continue
        return schema.find_column_name(source_id), str(field.field_type)
    return None, None


def spec_layouts(metadata: TableMetadata) -> tuple[PartitionSpecLayout, ...]:
    """Every partition spec the table has had, with its fields' transforms and source columns."""
    def field_layout(field: Any) -> PartitionField:
        column, column_type = _source(metadata, field.source_id)
        return PartitionField(
            name=field.name, transform=str(field.transform), source_column=column, source_type=column_type
        )

    return tuple(
        PartitionSpecLayout(spec_id=spec.spec_id, fields=tuple(field_layout(field) for field in spec.fields))
        for spec in metadata.partition_specs
    )


def partition_layout(
    metadata: TableMetadata, refs: list[ManifestRef], summaries: list[ManifestSummary], small: int
) -> PartitionLayout:
    """Rewrite candidates per (spec, partition) over all manifests, with each partition's last write."""
    commit_ms = {snapshot.snapshot_id: snapshot.timestamp_ms for snapshot in metadata.snapshots}
    merged: dict[tuple[int, tuple[Any, ...]], list[Any]] = {}
    for ref, summary in zip(refs, summaries, strict=True):
        for files in summary.partition_files:
            counts = merged.setdefault((ref.spec_id, files.values), [0] * 5 + [-1, 0, 0, 0, 0])
            found = (files.small_files, files.small_bytes, files.large_files, files.large_bytes)
            for index, value in enumerate((*found, files.delete_files)):
                counts[index] += value
            written = [commit_ms[s] for s in files.snapshot_ids if s in commit_ms]
            counts[5] = max([counts[5], *written])
            for index, count in ((6, files.position_delete_files), (7, files.position_delete_bytes)):
                counts[index] = None if count is None or counts[index] is None else counts[index] + count
            counts[8] += files.deletion_vectors
            counts[9] += files.deleted_rows
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
            deletion_vectors=c[8],
            deleted_rows=c[9],
        )
        for (spec_id, values), c in merged.items()
    )
    return PartitionLayout(
        current_spec_id=metadata.default_spec_id,
        specs=spec_layouts(metadata),
        large_file_threshold_bytes=large_file_threshold(small),
        candidates=candidates,
    )
