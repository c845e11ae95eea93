"""Manifest entries decoded from Avro by patterns compiled from an entry's shape.

Status needs six values of a manifest entry (status, snapshot id, content, partition, record count, file
size), all at its front; the rest of an entry is column statistics for every column. Avro records carry
no length, so the statistics must still be walked to reach the next entry, and that walk made fastavro
slow (about 10k entries/s on a 22-column table, even with a projected reader schema). Here the walk runs
in Python's C regular-expression engine: an entry's shape (union branches, array block counts, where
long strings are) is learnt from one entry decoded exactly in Python, then compiled into a pattern that
matches exactly the Avro encoding of entries of that shape and captures the six values. Strings and
bytes inside arrays (column bounds) match by their one- or two-byte length prefix, so entries whose
bounds differ in length (up to 1023 bytes) share a pattern. An entry that fits no known shape is decoded
exactly and teaches a new one; a pattern never guesses (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import gc
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from io import BytesIO
from typing import Any, cast

import fastavro

from icepack_dagster.iceberg.avro_walk import (
    Node,
    decode_long,
    encode_long,
    find_role,
    read_value,
    schema_tree,
    walk,
)

# Iceberg field ids of the entry values status reads, in the order `ManifestEntries` yields them.
_ROLES = ("status", "content", "partition", "records", "size", "snapshot")
_ENTRY_ROLES: dict[int, Any] = {
    0: "status",
    1: "snapshot",
    2: {134: "content", 102: "partition", 103: "records", 104: "size"},
}

_VARINT = rb"[\x80-\xff]*+[\x00-\x7f]"
_COMMON_LENGTHS = (8, 16, 4, 1, 0)  # bounds of longs and doubles, truncated strings, ints
_SHORT = b"(?:%s)" % b"|".join(
    re.escape(bytes([2 * n])) + b".{%d}" % n
    for n in (*_COMMON_LENGTHS, *(n for n in range(64) if n not in _COMMON_LENGTHS))
)  # a string or bytes of 0..63 bytes: its length is one byte, 2n
_LONG_LIMIT = 1024  # strings and bytes in arrays (column bounds) shorter than this match a pattern


def _two_byte_strings(limit: int) -> bytes:
    """A pattern for a string or bytes of 64 to `limit - 1` bytes. Its length n = 64 * high + low has a
    two-byte varint prefix, 0x80 | 2 * low then high (zigzag doubles n): an alternation on the first
    byte, then on the second, each branch skipping exactly n bytes, so a match is still exact."""
    by_low = []
    for low in range(64):
        highs = [re.escape(bytes([high])) + b".{%d}" % (64 * high + low) for high in range(1, limit // 64)]
        by_low.append(re.escape(bytes([0x80 | 2 * low])) + b"(?:%s)" % b"|".join(highs))
    return b"(?:%s)" % b"|".join(by_low)


_STRING = b"(?:%s|%s)" % (_SHORT, _two_byte_strings(_LONG_LIMIT))  # a string or bytes of 0..1023 bytes
_COMPILE_WORTH = 32  # entries left in a manifest that repay compiling a pattern (~7 ms; ~22 long bounds)
_SHAPES_KEPT = 4  # patterns tried per manifest before decoding exactly


def _free(node: Node, long: bool) -> bytes | None:
    """A pattern for any value of `node` (array items, whose choices are not recorded); None if none.
    Its strings match up to 63 bytes, or up to 1023 if `long` (a bigger pattern, three times slower to
    compile: used once an entry of the schema has shown a long string in an array)."""
    kind = node[0]
    if kind in ("v", "n", "s"):
        return {"v": _VARINT, "n": b"", "s": _STRING if long else _SHORT}[kind]
    if kind == "f":
        return b".{%d}" % node[1]
    if kind == "u":
        branches = [_free(branch, long) for branch in node[1]]
        if any(p is None for p in branches):
            return None
        return b"(?:%s)" % b"|".join(
            re.escape(encode_long(i)) + cast(bytes, p) for i, p in enumerate(branches)
        )
    if kind != "r":
        return None  # an array inside an array item: its counts are not recorded
    fields = [_free(field, long) for _, field in node[1]]
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
        long = re.escape(encode_long(length)) + b".{%d}" % length if inner else None
        out.append(_SHORT if length < 64 else long)
    elif kind == "u":
        branch = next(shape)
        out.append(re.escape(encode_long(branch)))
        if not _shaped(node[1][branch], shape, None, out, roles, inner):
            return False
    elif kind == "a":
        blocks, long = next(shape)
        item = _free(node[1], long)
        if item is None:
            return False
        item = (_STRING if long else _SHORT) + item if node[2] else item
        for count in blocks:
            size = _VARINT if count < 0 else b""
            out.append(re.escape(encode_long(count)) + size + b"(?:%s){%d}+" % (item, abs(count)))
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
            length = ((raw[0] & 0x7F) | raw[1] << 7) >> 1 if len(raw) == 2 else decode_long(raw)
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
    sources = [b"".join(segment) + b"(%s)" % _VARINT for segment in segments[:-1]]
    patterns = _compile([*sources, b"".join(segments[-1])])
    shape = _matcher(patterns, tuple(roles.index(role) if role in roles else -1 for role in _ROLES))
    with _compiled_lock:
        _compiled[key] = shape
        while len(_compiled) > 256:
            _compiled.popitem(last=False)
    return shape


def _compile(sources: list[bytes]) -> list[re.Pattern[bytes]]:
    """Compile with the cyclic garbage collector paused: `re`'s compiler allocates enough short-lived
    objects to start collections of every object the process holds; with PyIceberg and pyarrow loaded,
    a 22 ms compile took 108 ms. Another thread's compile may end the pause early (only slower)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return [re.compile(source, re.DOTALL) for source in sources]
    finally:
        if paused:
            gc.enable()


class _Schema:
    """A manifest schema's decoding tree, the shapes that fitted its latest manifests (a table's next
    manifest most likely has the same shape, so its first entry needs no exact decoding), and whether
    an entry has shown a string of 64 bytes or more in an array (then its arrays' patterns take them)."""

    def __init__(self, tree: Node) -> None:
        self.tree = tree
        self.recent: list[Shape] = []
        self.long_strings = False


_schemas: dict[str, _Schema] = {}


def _schema(schema: dict[str, Any], text: str | None) -> _Schema:
    key = text or json.dumps(schema, sort_keys=True)
    found = _schemas.get(key)
    if found is None:
        if len(_schemas) > 256:
            _schemas.clear()
        found = _schemas[key] = _Schema(schema_tree(schema, {}, _ENTRY_ROLES))
    return found


class ManifestEntries:
    """The entries of one manifest (the Avro file's bytes) as raw (status, content, partition, records,
    size, snapshot) values: Avro encodings, None for a field the schema lacks (content in v1).
    Compare them with `encode_long`, read numbers with `decode_long` and partition tuples with
    `partition`; kept raw because most entries need only two numbers. `expected` is the manifest's
    entry count if known."""

    def __init__(self, data: bytes, path: str, expected: int | None) -> None:
        self.path = path
        self._blocks = fastavro.block_reader(BytesIO(data))
        schema = self._blocks.writer_schema
        if not isinstance(schema, dict) or schema.get("type") != "record":
            raise ValueError(f"{path} is not an Iceberg manifest (Avro schema is not a record)")
        self._schema = _schema(schema, self._blocks.metadata.get("avro.schema"))
        self.tree = self._schema.tree
        self._snapshot_node = find_role(self.tree, "snapshot")
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
                raise ValueError(
                    f"{self.path}: a block of {block.num_records} entries does not end where "
                    "its last entry does; the manifest is corrupt"
                )

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
        end = walk(self.tree, buf, pos, recorded, found, None)
        arrays = [choice for choice in recorded if isinstance(choice, tuple)]  # (block counts, long string)
        self._schema.long_strings = self._schema.long_strings or any(long for _, long in arrays)
        if self._schema.long_strings:  # the table has long bounds: one pattern for short and long ones
            recorded = [(choice[0], True) if isinstance(choice, tuple) else choice for choice in recorded]
        learnt = _shape(self.tree, recorded, compile_new=left >= _COMPILE_WORTH)
        if learnt is not None:
            shapes.insert(0, learnt)
            del shapes[_SHAPES_KEPT:]
            self._schema.recent = shapes[:]
        return tuple(found.get(role) for role in _ROLES), end

    def snapshot(self, raw: bytes | None) -> int | None:
        """The snapshot id that added an entry; None when the entry inherits it from its manifest."""
        if raw is None or self._snapshot_node is None:
            return None
        return cast(int | None, read_value(self._snapshot_node, raw, 0)[0])

    def partition(self, raw: bytes) -> tuple[Any, ...]:
        node = find_role(self.tree, "partition")
        if node is None:
            raise ValueError(f"{self.path}: manifest entries have no partition (field id 102)")
        return cast(tuple[Any, ...], read_value(node, raw, 0)[0])
