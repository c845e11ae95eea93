"""Manifest lists and manifests read straight from Avro, and a cache of per-manifest aggregates.

Status needs five values of a manifest entry (status, content, partition, record count, file size), all
at its front; the rest of an entry is column statistics for every column. Avro records carry no length,
so the statistics must still be walked to reach the next entry, and that walk made fastavro slow (about
10k entries/s on a 22-column table, even with a projected reader schema). Here the walk runs in Python's
C regular-expression engine: an entry's shape (union branches, array block counts, where long strings
are) is learnt from one entry decoded exactly in Python, then compiled into a pattern that matches
exactly the Avro encoding of entries of that shape and captures the five values. An entry that fits no
known shape is decoded exactly and teaches a new one; a pattern never guesses (docs/PERFORMANCE.md).
Entries are folded into a `ManifestSummary` one by one; nothing holds all entries of a table at once.
Manifests are immutable once written, so a summary cached by path stays true for the table's lifetime.
"""

from __future__ import annotations

import json
import re
import struct
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator
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
    506: "deleted_files_count",
    512: "added_rows_count",
    513: "existing_rows_count",
}
# Iceberg field ids of the entry values status reads, in the order `_Entries` yields them.
_ROLES = ("status", "content", "partition", "records", "size")
_ENTRY_ROLES: dict[int, Any] = {
    0: "status",
    2: {134: "content", 102: "partition", 103: "records", 104: "size"},
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
            )
        )
    return refs


# --- Avro entries: exact decoding in Python, and patterns compiled from an entry's shape -------------
# Schema nodes: ("v",) int/long/enum varint, ("n",) null, ("f", size, kind) fixed width, ("s", kind)
# string/bytes, ("u", branches), ("a", item, keyed) array or map, ("r", ((role, node), ...)) record.
Node = tuple[Any, ...]
_VARINT = rb"[\x80-\xff]*+[\x00-\x7f]"
_COMMON_LENGTHS = (8, 16, 4, 1, 0)  # bounds of longs and doubles, truncated strings, ints
_SHORT = b"(?:%s)" % b"|".join(
    re.escape(bytes([2 * n])) + b".{%d}" % n
    for n in (*_COMMON_LENGTHS, *(n for n in range(64) if n not in _COMMON_LENGTHS))
)  # a string or bytes of 0..63 bytes: its length is one byte, 2n
_WIDTHS = {"boolean": 1, "float": 4, "double": 8}
_COMPILE_WORTH = 32  # entries left in a manifest that repay compiling a new pattern (~7 ms)
_SHAPES_KEPT = 4  # patterns tried per manifest before decoding exactly


def _node(schema: Any, named: dict[str, Node], roles: dict[int, Any] | None = None) -> Node:
    if isinstance(schema, list):
        return ("u", tuple(_node(branch, named) for branch in schema))
    if isinstance(schema, str):
        if schema in ("int", "long"):
            return ("v",)
        if schema in _WIDTHS:
            return ("f", _WIDTHS[schema], schema)
        if schema in ("null", "string", "bytes"):
            return ("n",) if schema == "null" else ("s", schema)
        return named[schema]
    kind = schema["type"]
    if kind == "record":
        fields = []
        for field in schema["fields"]:
            role = (roles or {}).get(field.get("field-id"))
            nested = role if isinstance(role, dict) else None
            fields.append((role if isinstance(role, str) else None, _node(field["type"], named, nested)))
        node: Node = ("r", tuple(fields))
    elif kind in ("array", "map"):
        return ("a", _node(schema["items" if kind == "array" else "values"], named), kind == "map")
    elif kind in ("fixed", "enum"):
        node = ("f", schema["size"], "fixed") if kind == "fixed" else ("v",)
    else:
        return _node(kind, named, roles)
    named[schema["name"]] = named[f"{schema.get('namespace')}.{schema['name']}"] = node
    return node


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (Avro int or long) at `pos`, and the position after it."""
    byte = buf[pos]
    value, shift = byte & 0x7F, 7
    while byte & 0x80:
        pos += 1
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        shift += 7
    return (value >> 1) ^ -(value & 1), pos + 1


def _number(raw: bytes) -> int:
    value = shift = 0
    for byte in raw:
        value |= (byte & 0x7F) << shift
        shift += 7
    return (value >> 1) ^ -(value & 1)


def _encode(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes((*out, value))


def _step(
    node: Node, buf: bytes, pos: int, shape: list[Any], found: dict[str, bytes], role: str | None
) -> int:
    """Decode one value exactly, whatever its shape; note the choices a pattern needs in `shape`."""
    kind, start = node[0], pos
    if kind == "v":
        pos = _varint(buf, pos)[1]
    elif kind == "f":
        pos += node[1]
    elif kind == "s":
        length, pos = _varint(buf, pos)
        shape.append(length)
        pos += length
    elif kind == "u":
        branch, pos = _varint(buf, pos)
        shape.append(branch)
        pos = _step(node[1][branch], buf, pos, shape, found, None)
    elif kind == "a":
        blocks = []
        count, pos = _varint(buf, pos)
        while count:
            blocks.append(count)
            if count < 0:  # a block may carry its byte size after a negative count
                count = -count
                pos = _varint(buf, pos)[1]
            for _ in range(count):
                if node[2]:
                    length, pos = _varint(buf, pos)
                    pos += length
                pos = _step(node[1], buf, pos, [], found, None)
            count, pos = _varint(buf, pos)
        shape.append(tuple(blocks))
    elif kind == "r":
        for field_role, field in node[1]:
            pos = _step(field, buf, pos, shape, found, field_role)
    if role is not None:
        found[role] = buf[start:pos]
    return pos


def _free(node: Node) -> bytes | None:
    """A pattern for any value of `node` (array items, whose choices are not recorded); None if none."""
    kind = node[0]
    if kind in ("v", "n", "s"):
        return {"v": _VARINT, "n": b"", "s": _SHORT}[kind]
    if kind == "f":
        return b".{%d}" % node[1]
    if kind == "u":
        branches = [_free(branch) for branch in node[1]]
        if any(p is None for p in branches):
            return None
        return b"(?:%s)" % b"|".join(re.escape(_encode(i)) + cast(bytes, p) for i, p in enumerate(branches))
    if kind != "r":
        return None  # an array inside an array item: its counts are not recorded
    fields = [_free(field) for _, field in node[1]]
    return None if any(p is None for p in fields) else b"".join(cast(list[bytes], fields))


def _shaped(
    node: Node, shape: Iterator[Any], role: str | None, out: list[bytes | None], roles: list[str], inner: bool
) -> bool:
    """Append the pattern of a value of the recorded shape to `out`. A None in `out` is a long string
    outside any captured value, skipped in Python between two patterns. False if no pattern can do it."""
    kind = node[0]
    if role is not None:
        roles.append(role)
        out.append(b"(")
    inner = inner or role is not None
    if kind in ("v", "f"):
        out.append(_VARINT if kind == "v" else b".{%d}" % node[1])
    elif kind == "s":
        length = next(shape)
        long = re.escape(_encode(length)) + b".{%d}" % length if inner else None
        out.append(_SHORT if length < 64 else long)
    elif kind == "u":
        branch = next(shape)
        out.append(re.escape(_encode(branch)))
        if not _shaped(node[1][branch], shape, None, out, roles, inner):
            return False
    elif kind == "a":
        item = _free(node[1])
        if item is None:
            return False
        item = _SHORT + item if node[2] else item
        for count in next(shape):
            size = _VARINT if count < 0 else b""
            out.append(re.escape(_encode(count)) + size + b"(?:%s){%d}+" % (item, abs(count)))
        out.append(b"\x00")
    elif kind == "r":
        if not all(_shaped(field, shape, name, out, roles, inner) for name, field in node[1]):
            return False
    if role is not None:
        out.append(b")")
    return True


Values = tuple[Any, ...]  # raw bytes of each of _ROLES (None when the schema has no such field)
Shape = Callable[[bytes, int], tuple[Values, int] | None]


def _matcher(patterns: list[re.Pattern[bytes]], order: tuple[int, ...]) -> Shape:
    """One function matching an entry at `pos`: its values in `_ROLES` order and its end, or None.
    Every pattern but the last ends by capturing the length prefix (two bytes up to 8 KiB, the usual
    case) of the long string that follows it."""
    first, *rest = (pattern.match for pattern in patterns)
    canonical = order == tuple(range(len(_ROLES)))

    def match(buf: bytes, pos: int) -> tuple[Values, int] | None:
        found = first(buf, pos)
        if found is None:
            return None
        groups: Values = found.groups()
        for pattern in rest:
            raw = groups[-1]
            length = ((raw[0] & 0x7F) | raw[1] << 7) >> 1 if len(raw) == 2 else _number(raw)
            found = pattern(buf, found.end() + length)
            if found is None:
                return None
            groups = groups[:-1] + found.groups()
        if canonical:
            return groups, found.end()
        return tuple(groups[i] if i >= 0 else None for i in order), found.end()

    return match


_compiled: OrderedDict[tuple[bytes | None, ...], Shape] = OrderedDict()
_compiled_lock = threading.Lock()


def _shape(tree: Node, recorded: list[Any], compile_new: bool) -> Shape | None:
    """The matcher for an entry's shape, shared by all manifests (a table's manifests repeat shapes);
    None when no pattern can express the shape, or it is new and `compile_new` is false."""
    out: list[bytes | None] = []
    roles: list[str] = []
    if not _shaped(tree, iter(recorded), None, out, roles, False):
        return None
    key = tuple(out)
    with _compiled_lock:
        if key in _compiled:
            _compiled.move_to_end(key)
            return _compiled[key]
    if not compile_new:
        return None
    segments: list[list[bytes]] = [[]]
    for part in out:
        if part is None:
            segments.append([])
        else:
            segments[-1].append(part)
    patterns = [re.compile(b"".join(segment) + b"(%s)" % _VARINT, re.DOTALL) for segment in segments[:-1]]
    patterns.append(re.compile(b"".join(segments[-1]), re.DOTALL))
    shape = _matcher(patterns, tuple(roles.index(role) if role in roles else -1 for role in _ROLES))
    with _compiled_lock:
        _compiled[key] = shape
        while len(_compiled) > 256:
            _compiled.popitem(last=False)
    return shape


class _Schema:
    """A manifest schema's decoding tree, and the shapes that fitted its latest manifests: a table's
    next manifest most likely has the same shape, so its first entry needs no exact decoding."""

    def __init__(self, tree: Node) -> None:
        self.tree = tree
        self.recent: list[Shape] = []


_schemas: dict[str, _Schema] = {}


def _schema(schema: dict[str, Any], text: str | None) -> _Schema:
    key = text or json.dumps(schema, sort_keys=True)
    found = _schemas.get(key)
    if found is None:
        if len(_schemas) > 256:
            _schemas.clear()
        found = _schemas[key] = _Schema(_node(schema, {}, _ENTRY_ROLES))
    return found


def _value(node: Node, buf: bytes, pos: int) -> tuple[Any, int]:
    """Decode one value to Python (partition tuples only: few per manifest)."""
    kind = node[0]
    if kind == "v":
        return _varint(buf, pos)
    if kind == "n":
        return None, pos
    if kind == "f":
        raw = buf[pos : pos + node[1]]
        if node[2] in ("float", "double"):
            return struct.unpack("<f" if node[2] == "float" else "<d", raw)[0], pos + node[1]
        return (raw == b"\x01" if node[2] == "boolean" else raw), pos + node[1]
    if kind == "s":
        length, pos = _varint(buf, pos)
        raw = buf[pos : pos + length]
        return (raw.decode() if node[1] == "string" else raw), pos + length
    if kind == "u":
        branch, pos = _varint(buf, pos)
        return _value(node[1][branch], buf, pos)
    if kind != "r":
        raise ValueError(f"a partition value cannot be an Avro {node[0]!r} node")
    values = []
    for _, field in node[1]:
        value, pos = _value(field, buf, pos)
        values.append(value)
    return tuple(values), pos


def _find(node: Node, role: str) -> Node | None:
    if node[0] != "r":
        return None
    for name, field in node[1]:
        found = field if name == role else _find(field, role)
        if found is not None:
            return found
    return None


class _Entries:
    """The entries of one manifest as raw (status, content, partition, records, size) values."""

    def __init__(self, data: bytes, path: str, expected: int | None) -> None:
        self.path = path
        self._blocks = fastavro.block_reader(BytesIO(data))
        schema = self._blocks.writer_schema
        if not isinstance(schema, dict) or schema.get("type") != "record":
            raise ValueError(f"{path} is not an Iceberg manifest (Avro schema is not a record)")
        self._schema = _schema(schema, self._blocks.metadata.get("avro.schema"))
        self.tree = self._schema.tree
        self._expected = expected if expected is not None else _COMPILE_WORTH

    def __iter__(self) -> Iterator[Values]:
        shapes = list(self._schema.recent)
        left = self._expected
        for block in self._blocks:
            buf, pos = block.bytes_.getvalue(), 0  # type: ignore[attr-defined]  # documented, not typed
            for _ in range(block.num_records):
                hit = shapes[0](buf, pos) if shapes else None
                if hit is None:
                    hit = self._other(buf, pos, shapes, left)
                values, pos = hit
                left -= 1
                yield values
            if pos != len(buf):
                raise ValueError(f"{self.path}: a block of {block.num_records} entries does not end where "
                                 "its last entry does; the manifest is corrupt")

    def _other(self, buf: bytes, pos: int, shapes: list[Shape], left: int) -> tuple[Values, int]:
        """An entry the latest shape does not fit: another known shape, else decoded exactly, and its
        shape kept (compiled when enough entries are left to repay it)."""
        for index, shape in enumerate(shapes[1:], start=1):
            hit = shape(buf, pos)
            if hit is not None:
                shapes.insert(0, shapes.pop(index))
                return hit
        recorded: list[Any] = []
        found: dict[str, bytes] = {}
        end = _step(self.tree, buf, pos, recorded, found, None)
        learnt = _shape(self.tree, recorded, compile_new=left >= _COMPILE_WORTH)
        if learnt is not None:
            shapes.insert(0, learnt)
            del shapes[_SHAPES_KEPT:]
            self._schema.recent = shapes[:]
        return tuple(found.get(role) for role in _ROLES), end

    def partition(self, raw: bytes) -> tuple[Any, ...]:
        node = _find(self.tree, "partition")
        if node is None:
            raise ValueError(f"{self.path}: manifest entries have no partition (field id 102)")
        return cast(tuple[Any, ...], _value(node, raw, 0)[0])


_DELETED, _DATA, _POSITION = _encode(ENTRY_DELETED), _encode(CONTENT_DATA), _encode(CONTENT_POSITION_DELETES)


def summarize_manifest(io: FileIO, ref: ManifestRef, small_threshold: int) -> ManifestSummary:
    """Fold one manifest's live entries into a summary; a data file is small below `small_threshold`."""
    if ref.live_files == 0:
        return EMPTY_SUMMARY
    entries = _Entries(_read(io, ref.path).getvalue(), ref.path, ref.entries)
    data_files = data_bytes = records = small_files = small_bytes = delete_bytes = 0
    pos_files = pos_records = eq_files = eq_records = 0
    histogram = [0] * len(SIZE_BUCKET_LABELS)
    partitions: set[bytes] = set()
    bounds = SIZE_BUCKET_BOUNDS
    for status, content, partition, raw_records, raw_size in entries:
        if status == _DELETED:
            continue
        size = _number(raw_size)
        if content is None or content == _DATA:  # v1 manifests have no content: data only
            data_files += 1
            data_bytes += size
            records += _number(raw_records)
            histogram[bisect_right(bounds, size)] += 1
            if size < small_threshold:
                small_files += 1
                small_bytes += size
            partitions.add(partition)
        elif content == _POSITION:
            pos_files += 1
            pos_records += _number(raw_records)
            delete_bytes += size
        else:
            eq_files += 1
            eq_records += _number(raw_records)
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
        partitions=frozenset(entries.partition(raw) for raw in partitions),
    )
