"""What a manifest's live entries add up to: the `ManifestSummary` a status is summed from (files, bytes,
records, small files, the size histogram, partitions) and, per partition, the `PartitionFiles` that
compaction planning reads. Manifests are immutable once written, so a summary stays true for the
table's lifetime; `manifest_cache.py` keeps them, `store/manifest_store.py` between processes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

MiB = 1024 * 1024
# Upper bounds of the file-size histogram buckets; the last bucket is unbounded.
SIZE_BUCKET_BOUNDS = (1 * MiB, 8 * MiB, 32 * MiB, 128 * MiB, 512 * MiB)
SIZE_BUCKET_LABELS = ("<1 MiB", "1-8 MiB", "8-32 MiB", "32-128 MiB", "128-512 MiB", ">=512 MiB")


@dataclass(frozen=True, slots=True)
class PartitionFiles:
    """One partition's live files in one manifest, as far as compaction planning needs them: its data
    files outside the size range a rewrite leaves alone (small: below the small-file threshold; large:
    above `large_file_threshold`), its delete files, and the snapshots that added any of them.
    `values` are JSON-safe (bytes as a ("bytes", hex) pair)."""

    values: tuple[Any, ...]
    small_files: int = 0
    small_bytes: int = 0
    large_files: int = 0
    large_bytes: int = 0
    delete_files: int = 0
    snapshot_ids: tuple[int, ...] = ()
    # Position delete files (Parquet, Avro, ORC; not deletion vectors) among `delete_files` and their
    # bytes; None in a summary stored before they were counted (the position-delete planner then falls
    # back to whole-table estimates).
    position_delete_files: int | None = None
    position_delete_bytes: int | None = None
    # Deletion vectors (format v3: a Puffin blob per data file) among `delete_files`, and the rows they
    # delete (a deletion vector's record count is its cardinality).
    deletion_vectors: int = 0
    deleted_rows: int = 0


@dataclass(frozen=True, slots=True)
class ManifestSummary:
    """Aggregate of a manifest's live entries (status ADDED or EXISTING); deleted entries are ignored."""

    data_files: int = 0
    data_bytes: int = 0
    records: int = 0
    position_delete_files: int = 0  # deletion vectors included
    position_delete_records: int = 0
    deletion_vectors: int = 0  # content 1 in file format PUFFIN (format v3), not a position delete file
    deletion_vector_records: int = 0  # rows the deletion vectors delete (their cardinalities)
    equality_delete_files: int = 0
    equality_delete_records: int = 0
    delete_bytes: int = 0
    small_files: int = 0
    small_bytes: int = 0
    size_histogram: tuple[int, ...] = (0,) * len(SIZE_BUCKET_LABELS)
    partitions: frozenset[int] = frozenset()  # `partition_id` of each distinct partition of live data files
    partition_files: tuple[PartitionFiles, ...] = ()  # partitions with small, large or delete files


EMPTY_SUMMARY = ManifestSummary()


def partition_id(values: tuple[Any, ...]) -> int:
    """A stable 64-bit identity of a partition's values: counting distinct partitions needs only
    identities, which are small to keep and to store, and the same in every process."""
    return int.from_bytes(hashlib.blake2b(repr(values).encode(), digest_size=8).digest(), "big")


def large_file_threshold(small_threshold: int) -> int:
    """Files above this are split by a rewrite: Iceberg's max-file-size-bytes default is 1.8 x target
    and its min-file-size-bytes default (the small-file threshold) 0.75 x target, so 2.4 x small."""
    return small_threshold * 12 // 5


def json_safe(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Partition values as JSON can hold them: bytes (decimals, uuids, fixed, binary) as a tagged pair."""
    return tuple(("bytes", v.hex()) if isinstance(v, bytes) else v for v in values)
