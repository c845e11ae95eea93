"""Manifest lists and manifests read straight from Avro.

The manifest list is one record per manifest, so fastavro reads it quickly enough; manifest entries are
decoded by `manifest_entries` (fastavro is too slow on their column statistics). Entries are folded into
a `ManifestSummary` (`manifest_summary.py`) one by one; nothing holds all entries of a table at once.
The files a manifest lists (`live_file_paths`, for orphan checks) are read with fastavro and a reader
schema of two fields.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from io import BytesIO
from typing import TYPE_CHECKING, Any, cast

import fastavro

from icepack_dagster.iceberg.avro_walk import decode_long, encode_long
from icepack_dagster.iceberg.manifest_entries import ManifestEntries
from icepack_dagster.iceberg.manifest_summary import (
    EMPTY_SUMMARY,
    SIZE_BUCKET_BOUNDS,
    SIZE_BUCKET_LABELS,
    ManifestSummary,
    PartitionFiles,
    json_safe,
    large_file_threshold,
    partition_id,
)

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

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


def _record_schema(buffer: BytesIO, path: str, what: str) -> dict[str, Any]:
    """The Avro file's writer schema, which must be a record; the buffer is left at its start."""
    writer_schema = fastavro.reader(buffer).writer_schema
    buffer.seek(0)
    if not isinstance(writer_schema, dict) or writer_schema.get("type") != "record":
        raise ValueError(f"{path} is not an Iceberg {what} (Avro schema is not a record)")
    return writer_schema


def read_manifest_list(io: FileIO, path: str) -> list[ManifestRef]:
    """The manifests of one snapshot (the list is one record per manifest, so fastavro is quick enough)."""
    buffer = _read(io, path)
    writer_schema = _record_schema(buffer, path, "manifest list")
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
# A deletion vector is a position delete entry whose file format is Puffin (Iceberg writes the name in
# capitals; the spec's formats are case-insensitive).
_PUFFIN = {encode_long(len(name)) + name for name in (b"PUFFIN", b"puffin", b"Puffin")}


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
                deletion_vectors=tally[8],
                deleted_rows=tally[9],
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
    pos_files = pos_records = eq_files = eq_records = vectors = vector_records = 0
    histogram = [0] * len(SIZE_BUCKET_LABELS)
    partitions: set[bytes] = set()
    # per partition: small, bytes, large, bytes, deletes, snapshots, position delete files, their bytes,
    # deletion vectors, the rows they delete
    tallies: dict[bytes, list[Any]] = {}
    bounds, large = SIZE_BUCKET_BOUNDS, large_file_threshold(small_threshold)
    for status, content, partition, raw_records, raw_size, raw_snapshot, raw_format in entries:
        if status == _DELETED:
            continue
        size = decode_long(raw_size)
        vector = False
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
                deleted = decode_long(raw_records)
                pos_records += deleted
                vector = raw_format in _PUFFIN
                if vector:
                    vectors += 1
                    vector_records += deleted
            else:
                eq_files += 1
                eq_records += decode_long(raw_records)
            delete_bytes += size
            index = 4
        tally = tallies.get(partition)
        if tally is None:
            tally = tallies[partition] = [0, 0, 0, 0, 0, set(), 0, 0, 0, 0]
        tally[index] += 1
        if index < 4:
            tally[index + 1] += size
        elif vector:
            tally[8] += 1
            tally[9] += decode_long(raw_records)
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
        deletion_vectors=vectors,
        deletion_vector_records=vector_records,
        equality_delete_files=eq_files,
        equality_delete_records=eq_records,
        delete_bytes=delete_bytes,
        small_files=small_files,
        small_bytes=small_bytes,
        size_histogram=tuple(histogram),
        partitions=frozenset(partition_id(entries.partition(raw)) for raw in partitions),
        partition_files=_partition_files(entries, ref, tallies),
    )


def live_file_paths(io: FileIO, path: str) -> list[str]:
    """The data and delete files one manifest lists as live (added or existing entries): what Iceberg's
    `all_files` metadata table and its orphan removal count as referenced.

    Read with fastavro and a reader schema of the entry's status and file path only: PyIceberg's reader
    builds every entry in full, about 5x the time on a small table's manifests, and an orphan check reads
    every manifest of every snapshot."""
    buffer = _read(io, path)
    reader_schema = _project(_record_schema(buffer, path, "manifest"), {0: "status", 2: "data_file"})
    fields = {field["name"]: field for field in reader_schema["fields"]}
    if "data_file" in fields:
        fields["data_file"]["type"] = _project(fields["data_file"]["type"], {100: "file_path"})
    if "status" not in fields or "data_file" not in fields or not fields["data_file"]["type"]["fields"]:
        raise ValueError(f"{path} is not an Iceberg manifest (no entry status, data file or file path)")
    return [
        entry["data_file"]["file_path"]
        for entry in cast(list[dict[str, Any]], fastavro.reader(buffer, reader_schema=reader_schema))
        if entry["status"] != ENTRY_DELETED
    ]


def changed_live_files(io: FileIO, parent_list: str, child_list: str) -> tuple[set[str], set[str]]:
    """The live files of the manifests a snapshot (`child_list`, its manifest list) no longer lists from
    its parent's (`parent_list`), and of the manifests it lists anew: manifests both list hold the same
    entries and are not read. Equal sets mean the snapshot kept the table's files."""
    old = {m.path for m in read_manifest_list(io, parent_list)}
    new = {m.path for m in read_manifest_list(io, child_list)}
    replaced = {f for path in old - new for f in live_file_paths(io, path)}
    written = {f for path in new - old for f in live_file_paths(io, path)}
    return replaced, written
