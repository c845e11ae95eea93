"""Manifest lists and manifests read straight from Avro, and a cache of per-manifest aggregates.

The manifest list is one record per manifest, so fastavro reads it quickly enough; manifest entries are
decoded by `manifest_entries` (fastavro is too slow on their column statistics). Entries are folded into
a `ManifestSummary` one by one; nothing holds all entries of a table at once. Manifests are immutable
once written, so a summary cached by path stays true for the table's lifetime.
"""

from __future__ import annotations

import hashlib
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import Any, Protocol, cast

import fastavro
from pyiceberg.io import FileIO

from icepack_dagster.iceberg.avro_walk import decode_long, encode_long
from icepack_dagster.iceberg.manifest_entries import ManifestEntries

MiB = 1024 * 1024
# Upper bounds of the file-size histogram buckets; the last bucket is unbounded.
SIZE_BUCKET_BOUNDS = (1 * MiB, 8 * MiB, 32 * MiB, 128 * MiB, 512 * MiB)
SIZE_BUCKET_LABELS = ("<1 MiB", "1-8 MiB", "8-32 MiB", "32-128 MiB", "128-512 MiB", ">=512 MiB")

ENTRY_DELETED = 2
CONTENT_DATA, CONTENT_POSITION_DELETES, CONTENT_EQUALITY_DELETES = 0, 1, 2
MANIFEST_CONTENT_DELETES = 1

# Iceberg field ids -> the names our projection gives them (writers may spell names differently).
_MANIFEST_FILE_FIELDS = {
    500: "manifest_path",
    501: "manifest_length",
    502: "partition_spec_id",
    503: "added_snapshot_id",
    517: "content",
    504: "added_files_count",
    505: "existing_files_count",
    506: "deleted_files_count",
    512: "added_rows_count",
    513: "existing_rows_count",
}


@dataclass(frozen=True, slots=True)
class ManifestRef:
    """One manifest as the manifest list describes it."""

    path: str
    length: int
    spec_id: int
    content: int
    live_files: int | None  # added + existing entries; None when the (v1) list leaves the counts out
    live_rows: int | None = None  # records in added + existing entries; None when the list leaves it out
    entries: int | None = None  # all entries, deleted ones included; None when unknown
    added_snapshot_id: int | None = None  # the snapshot that wrote the manifest (entries may inherit it)


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
    # Position delete files among `delete_files` and their bytes; None in a summary stored before
    # they were counted (the position-delete planner then falls back to whole-table estimates).
    position_delete_files: int | None = None
    position_delete_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class ManifestSummary:
    """Aggregate of a manifest's live entries (status ADDED or EXISTING); deleted entries are ignored."""

    data_files: int = 0
    data_bytes: int = 0
    records: int = 0
    position_delete_files: int = 0
    position_delete_records: int = 0
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


class SummaryStore(Protocol):
    """Where summaries outlive the process (`state.manifest_store.ManifestSummaryStore`)."""

    def get_many(self, paths: Sequence[str], small_threshold: int) -> dict[str, ManifestSummary]: ...

    def put_many(self, small_threshold: int, summaries: Mapping[str, ManifestSummary]) -> None: ...


class ManifestCache:
    """Bounded LRU of `ManifestSummary` keyed by (manifest path, small-file threshold), in front of an
    optional `store` that keeps summaries between processes.

    Pass one instance to every `read_status` call that should share it; it is safe across threads.
    `hits` and `misses` count lookups (a hit in memory or in the store; a miss must be decoded), and
    `stored_hits` the hits the store answered, so callers can see how much decoding was saved.
    """

    def __init__(self, max_entries: int = 20_000, store: SummaryStore | None = None) -> None:
        if max_entries < 1:
            raise ValueError(f"ManifestCache max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self.store = store
        self.hits = 0
        self.misses = 0
        self.stored_hits = 0
        self._entries: OrderedDict[tuple[str, int], ManifestSummary] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str, small_threshold: int) -> ManifestSummary | None:
        return self.get_many([path], small_threshold)[0]

    def get_many(self, paths: Sequence[str], small_threshold: int) -> list[ManifestSummary | None]:
        """The summary of each path, or None where it must be decoded; one store query for all."""
        with self._lock:
            found = [self._entries.get((path, small_threshold)) for path in paths]
        missing = [path for path, summary in zip(paths, found, strict=True) if summary is None]
        stored = self.store.get_many(missing, small_threshold) if missing and self.store is not None else {}
        found = [summary or stored.get(path) for path, summary in zip(paths, found, strict=True)]
        with self._lock:
            for path, summary in zip(paths, found, strict=True):
                if summary is not None:
                    self._remember(path, small_threshold, summary)
            self.hits += sum(1 for summary in found if summary is not None)
            self.misses += sum(1 for summary in found if summary is None)
            self.stored_hits += len(stored)
        return found

    def put(self, path: str, small_threshold: int, summary: ManifestSummary) -> None:
        self.put_many(small_threshold, {path: summary})

    def put_many(self, small_threshold: int, summaries: Mapping[str, ManifestSummary]) -> None:
        """Keep newly decoded summaries, in memory and in the store (one write for all)."""
        with self._lock:
            for path, summary in summaries.items():
                self._remember(path, small_threshold, summary)
        if self.store is not None and summaries:
            self.store.put_many(small_threshold, summaries)

    def _remember(self, path: str, small_threshold: int, summary: ManifestSummary) -> None:
        self._entries[(path, small_threshold)] = summary
        self._entries.move_to_end((path, small_threshold))
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def _read(io: FileIO, path: str) -> BytesIO:
    """The whole file in one read: object stores charge a request per read call."""
    with io.new_input(path).open() as stream:
        return BytesIO(stream.read())


def _project(record_schema: dict[str, Any], wanted: dict[int, str]) -> dict[str, Any]:
    """A reader schema keeping only the fields whose Iceberg field id is wanted, under our names."""
    fields = [
        {"name": wanted[field["field-id"]], "aliases": [field["name"]], "type": field["type"]}
        for field in record_schema["fields"]
        if field.get("field-id") in wanted
    ]
    return {"type": "record", "name": record_schema["name"], "fields": fields}


def _count(record: dict[str, Any], *names: str) -> int | None:
    values = [record.get(name) for name in names]
    return None if any(v is None for v in values) else sum(cast(list[int], values))


def read_manifest_list(io: FileIO, path: str) -> list[ManifestRef]:
    """The manifests of one snapshot (the list is one record per manifest, so fastavro is quick enough)."""
    buffer = _read(io, path)
    writer_schema = fastavro.reader(buffer).writer_schema
    if not isinstance(writer_schema, dict) or writer_schema.get("type") != "record":
        raise ValueError(f"{path} is not an Iceberg manifest list (Avro schema is not a record)")
    buffer.seek(0)
    refs = []
    for record in fastavro.reader(buffer, reader_schema=_project(writer_schema, _MANIFEST_FILE_FIELDS)):
        record = cast(dict[str, Any], record)
        refs.append(
            ManifestRef(
                path=record["manifest_path"],
                length=record["manifest_length"],
                spec_id=record["partition_spec_id"],
                content=record.get("content", 0),  # v1 lists have no content: data only
                live_files=_count(record, "added_files_count", "existing_files_count"),
                live_rows=_count(record, "added_rows_count", "existing_rows_count"),
                entries=_count(record, "added_files_count", "existing_files_count", "deleted_files_count"),
                added_snapshot_id=record.get("added_snapshot_id"),
            )
        )
    return refs


_DELETED, _DATA, _POSITION = (
    encode_long(ENTRY_DELETED),
    encode_long(CONTENT_DATA),
    encode_long(CONTENT_POSITION_DELETES),
)


def large_file_threshold(small_threshold: int) -> int:
    """Files above this are split by a rewrite: Iceberg's max-file-size-bytes default is 1.8 x target
    and its min-file-size-bytes default (the small-file threshold) 0.75 x target, so 2.4 x small."""
    return small_threshold * 12 // 5


def json_safe(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Partition values as JSON can hold them: bytes (decimals, uuids, fixed, binary) as a tagged pair."""
    return tuple(("bytes", v.hex()) if isinstance(v, bytes) else v for v in values)


def _partition_files(
    entries: ManifestEntries, ref: ManifestRef, tallies: dict[bytes, list[Any]]
) -> tuple[PartitionFiles, ...]:
    """Tallies (counts, then the raw snapshot ids seen) as `PartitionFiles`, in a stable order; each
    distinct raw snapshot id is decoded once, and an entry without one inherits the manifest's."""
    decoded: dict[bytes | None, int | None] = {}
    found = []
    for raw, tally in tallies.items():
        snapshots: set[int] = set()
        for raw_snapshot in tally[5]:
            if raw_snapshot not in decoded:
                snapshot = entries.snapshot(raw_snapshot)
                decoded[raw_snapshot] = snapshot if snapshot is not None else ref.added_snapshot_id
            snapshot_id = decoded[raw_snapshot]
            if snapshot_id is not None:
                snapshots.add(snapshot_id)
        small_files, small_bytes, large_files, large_bytes, delete_files = tally[:5]
        found.append(
            PartitionFiles(
                json_safe(entries.partition(raw)),
                small_files,
                small_bytes,
                large_files,
                large_bytes,
                delete_files,
                tuple(sorted(snapshots)),
                position_delete_files=tally[6],
                position_delete_bytes=tally[7],
            )
        )
    return tuple(sorted(found, key=_by_values))


def _by_values(files: PartitionFiles) -> str:
    return repr(files.values)


def summarize_manifest(io: FileIO, ref: ManifestRef, small_threshold: int) -> ManifestSummary:
    """Fold one manifest's live entries into a summary; a data file is small below `small_threshold`."""
    if ref.live_files == 0:
        return EMPTY_SUMMARY
    entries = ManifestEntries(_read(io, ref.path).getvalue(), ref.path, ref.entries)
    data_files = data_bytes = records = small_files = small_bytes = delete_bytes = 0
    pos_files = pos_records = eq_files = eq_records = 0
    histogram = [0] * len(SIZE_BUCKET_LABELS)
    partitions: set[bytes] = set()
    # per partition: small, bytes, large, bytes, deletes, snapshots, position deletes, their bytes
    tallies: dict[bytes, list[Any]] = {}
    bounds, large = SIZE_BUCKET_BOUNDS, large_file_threshold(small_threshold)
    for status, content, partition, raw_records, raw_size, raw_snapshot in entries:
        if status == _DELETED:
            continue
        size = decode_long(raw_size)
        if content is None or content == _DATA:  # v1 manifests have no content: data only
            data_files += 1
            data_bytes += size
            records += decode_long(raw_records)
            histogram[bisect_right(bounds, size)] += 1
            partitions.add(partition)
            if size < small_threshold:
                small_files += 1
                small_bytes += size
                index = 0
            elif size > large:
                index = 2
            else:
                continue
        else:
            if content == _POSITION:
                pos_files += 1
                pos_records += decode_long(raw_records)
            else:
                eq_files += 1
                eq_records += decode_long(raw_records)
            delete_bytes += size
            index = 4
        tally = tallies.get(partition)
        if tally is None:
            tally = tallies[partition] = [0, 0, 0, 0, 0, set(), 0, 0]
        tally[index] += 1
        if index < 4:
            tally[index + 1] += size
        elif content == _POSITION:
            tally[6] += 1
            tally[7] += size
        tally[5].add(raw_snapshot)
    return ManifestSummary(
        data_files=data_files,
        data_bytes=data_bytes,
        records=records,
        position_delete_files=pos_files,
        position_delete_records=pos_records,
        equality_delete_files=eq_files,
        equality_delete_records=eq_records,
        delete_bytes=delete_bytes,
        small_files=small_files,
        small_bytes=small_bytes,
        size_histogram=tuple(histogram),
        partitions=frozenset(partition_id(entries.partition(raw)) for raw in partitions),
        partition_files=_partition_files(entries, ref, tallies),
    )
