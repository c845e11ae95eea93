"""Manifest entries decoded from Avro by patterns compiled from an entry's shape.

Status needs six values of a manifest entry (status, snapshot id, content, partition, record count, file
size), all at its front; the rest of an entry is column statistics for every column. Avro records carry
no length, so the statistics must still be walked to reach the next entry, and that walk made fastavro
slow (about 10k entries/s on a 22-column table, even with a projected reader schema). Here the walk runs
in Python's C regular-expression engine: an entry's shape (union branches, array block counts, where
long strings are) is learnt from one entry decoded exactly in Python, then compiled into a pattern that
matches exactly the Avro encoding of entries of that shape and captures the six values. An entry that
fits no known shape is decoded exactly and teaches a new one; a pattern never guesses
(docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from io import BytesIO
from typing import Any, cast

import fastavro

# Iceberg field ids of the entry values status reads, in the order `_Entries` yields them.
_ROLES = ("status", "content", "partition", "records", "size", "snapshot")
_ENTRY_ROLES: dict[int, Any] = {
    0: "status",
    1: "snapshot",
    2: {134: "content", 102: "partition", 103: "records", 104: "size"},
}

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
    """The entries of one manifest as raw (status, content, partition, records, size, snapshot) values."""

    def __init__(self, data: bytes, path: str, expected: int | None) -> None:
        self.path = path
        self._blocks = fastavro.block_reader(BytesIO(data))
        schema = self._blocks.writer_schema
        if not isinstance(schema, dict) or schema.get("type") != "record":
            raise ValueError(f"{path} is not an Iceberg manifest (Avro schema is not a record)")
        self._schema = _schema(schema, self._blocks.metadata.get("avro.schema"))
        self.tree = self._schema.tree
        self._snapshot_node = _find(self.tree, "snapshot")
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
        end = _step(self.tree, buf, pos, recorded, found, None)
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
        return cast(int | None, _value(self._snapshot_node, raw, 0)[0])

    def partition(self, raw: bytes) -> tuple[Any, ...]:
        node = _find(self.tree, "partition")
        if node is None:
            raise ValueError(f"{self.path}: manifest entries have no partition (field id 102)")
        return cast(tuple[Any, ...], _value(node, raw, 0)[0])
