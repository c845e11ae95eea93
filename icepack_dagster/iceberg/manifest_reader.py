"""Manifest lists and manifests read straight from Avro, and a cache of per-manifest aggregates.

Status needs a handful of numbers per data file, while a manifest entry carries column statistics for
every column. Decoding through a reader schema projected onto the few fields we use (chosen by Iceberg
field id, renamed to fixed names through Avro aliases) lets fastavro skip the statistics instead of
building Python objects for them, and works for manifests written by any engine and format version.
Entries are folded into a `ManifestSummary` one by one; nothing holds all entries of a table at once.
Manifests are immutable once written, so a summary cached by path stays true for the table's lifetime.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from typing import Any, cast

import fastavro
from pyiceberg.io import FileIO

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
    517: "content",
    504: "added_files_count",
    505: "existing_files_count",
}
_ENTRY_FIELDS = {0: "status", 2: "data_file"}
_DATA_FILE_FIELDS = {134: "content", 102: "partition", 103: "record_count", 104: "file_size_in_bytes"}
_NESTED = {2: _DATA_FILE_FIELDS}


@dataclass(frozen=True, slots=True)
class ManifestRef:
    """One manifest as the manifest list describes it."""

    path: str
    length: int
    spec_id: int
    content: int
    live_files: int | None  # added + existing entries; None when the (v1) list leaves the counts out


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
    partitions: frozenset[tuple[Any, ...]] = frozenset()


EMPTY_SUMMARY = ManifestSummary()


class ManifestCache:
    """Bounded LRU of `ManifestSummary` keyed by (manifest path, small-file threshold).

    Pass one instance to every `read_status` call that should share it; it is safe across threads.
    `hits` and `misses` count lookups, so callers can see how much decoding a re-status saved.
    """

    def __init__(self, max_entries: int = 20_000) -> None:
        if max_entries < 1:
            raise ValueError(f"ManifestCache max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[str, int], ManifestSummary] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str, small_threshold: int) -> ManifestSummary | None:
        with self._lock:
            summary = self._entries.get((path, small_threshold))
            if summary is None:
                self.misses += 1
                return None
            self.hits += 1
            self._entries.move_to_end((path, small_threshold))
            return summary

    def put(self, path: str, small_threshold: int, summary: ManifestSummary) -> None:
        with self._lock:
            self._entries[(path, small_threshold)] = summary
            self._entries.move_to_end((path, small_threshold))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def _project(record_schema: dict[str, Any], wanted: dict[int, str]) -> dict[str, Any]:
    """A reader schema keeping only the fields whose Iceberg field id is wanted, under our names."""
    fields = []
    for field in record_schema["fields"]:
        field_id = field.get("field-id")
        if field_id not in wanted:
            continue
        field_type = field["type"]
        if field_id in _NESTED and isinstance(field_type, dict):
            field_type = _project(field_type, _NESTED[field_id])
        fields.append({"name": wanted[field_id], "aliases": [field["name"]], "type": field_type})
    return {"type": "record", "name": record_schema["name"], "fields": fields}


def _records(io: FileIO, path: str, wanted: dict[int, str]) -> Iterator[dict[str, Any]]:
    """Stream the records of one Avro file, decoding only the wanted fields.

    The file is fetched in one read (object stores charge a request per read call, and fastavro reads
    in small pieces); records are then decoded one at a time from the compressed bytes.
    """
    with io.new_input(path).open() as stream:
        buffer = BytesIO(stream.read())
    writer_schema = fastavro.reader(buffer).writer_schema
    if not isinstance(writer_schema, dict) or writer_schema.get("type") != "record":
        raise ValueError(f"{path} is not an Iceberg manifest or manifest list (Avro schema is not a record)")
    buffer.seek(0)
    records = fastavro.reader(buffer, reader_schema=_project(writer_schema, wanted))
    yield from cast(Iterator[dict[str, Any]], records)


def read_manifest_list(io: FileIO, path: str) -> list[ManifestRef]:
    """The manifests of one snapshot (the list is one record per manifest, so it is small)."""
    refs = []
    for record in _records(io, path, _MANIFEST_FILE_FIELDS):
        added, existing = record.get("added_files_count"), record.get("existing_files_count")
        live = added + existing if added is not None and existing is not None else None
        refs.append(
            ManifestRef(
                path=record["manifest_path"],
                length=record["manifest_length"],
                spec_id=record["partition_spec_id"],
                content=record.get("content", 0),  # v1 lists have no content: data only
                live_files=live,
            )
        )
    return refs


def summarize_manifest(io: FileIO, ref: ManifestRef, small_threshold: int) -> ManifestSummary:
    """Fold one manifest's live entries into a summary; a data file is small below `small_threshold`."""
    if ref.live_files == 0:
        return EMPTY_SUMMARY
    data_files = data_bytes = records = small_files = small_bytes = delete_bytes = 0
    pos_files = pos_records = eq_files = eq_records = 0
    histogram = [0] * len(SIZE_BUCKET_LABELS)
    partitions: set[tuple[Any, ...]] = set()
    bounds = SIZE_BUCKET_BOUNDS
    for entry in _records(io, ref.path, _ENTRY_FIELDS):
        if entry["status"] == ENTRY_DELETED:
            continue
        data_file = entry["data_file"]
        size = data_file["file_size_in_bytes"]
        content = data_file.get("content", CONTENT_DATA)  # v1 manifests have no content: data only
        if content == CONTENT_DATA:
            data_files += 1
            data_bytes += size
            records += data_file["record_count"]
            histogram[bisect_right(bounds, size)] += 1
            if size < small_threshold:
                small_files += 1
                small_bytes += size
            partitions.add(tuple(data_file["partition"].values()))
        elif content == CONTENT_POSITION_DELETES:
            pos_files += 1
            pos_records += data_file["record_count"]
            delete_bytes += size
        else:
            eq_files += 1
            eq_records += data_file["record_count"]
            delete_bytes += size
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
        partitions=frozenset(partitions),
    )
