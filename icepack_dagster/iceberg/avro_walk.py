"""Avro values decoded exactly by walking the writer schema, in plain Python.

The manifest entry decoder (`manifest_entries`) learns an entry's shape from one entry walked here, and
decodes here what its patterns cannot match; the few values status needs in full (partition tuples)
are read here too. The schema is first turned into a tree of small tuples (`schema_tree`), cheap to
dispatch on per value.
"""

from __future__ import annotations

import struct
from typing import Any

# Schema nodes: ("v",) int/long/enum varint, ("n",) null, ("f", size, kind) fixed width, ("s", kind)
# string/bytes, ("u", branches), ("a", item, keyed) array or map, ("r", ((role, node), ...)) record.
Node = tuple[Any, ...]
_WIDTHS = {"boolean": 1, "float": 4, "double": 8}


def schema_tree(schema: Any, named: dict[str, Node], roles: dict[int, Any] | None = None) -> Node:
    """The node of an Avro schema (parsed JSON); `named` collects named types as they are defined.
    `roles` maps Iceberg field ids to the role of their value, or to the roles inside a nested record."""
    if isinstance(schema, list):
        return ("u", tuple(schema_tree(branch, named) for branch in schema))
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
            fields.append(
                (role if isinstance(role, str) else None, schema_tree(field["type"], named, nested))
            )
        node: Node = ("r", tuple(fields))
    elif kind in ("array", "map"):
        return ("a", schema_tree(schema["items" if kind == "array" else "values"], named), kind == "map")
    elif kind in ("fixed", "enum"):
        node = ("f", schema["size"], "fixed") if kind == "fixed" else ("v",)
    else:
        return schema_tree(kind, named, roles)
    named[schema["name"]] = named[f"{schema.get('namespace')}.{schema['name']}"] = node
    return node


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (Avro int or long) at `pos`, and the position after it."""
    byte = buf[pos]
    value, shift = byte & 0x7F, 7
    while byte & 0x80:
        pos += 1
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        shift += 7
    return (value >> 1) ^ -(value & 1), pos + 1


def decode_long(raw: bytes) -> int:
    """The Avro int or long (zigzag varint) whose encoding is exactly `raw`, as the entries give it."""
    value = shift = 0
    for byte in raw:
        value |= (byte & 0x7F) << shift
        shift += 7
    return (value >> 1) ^ -(value & 1)


def encode_long(value: int) -> bytes:
    """Avro's encoding of an int or long (zigzag varint): what an entry value equal to `value` holds."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes((*out, value))


def walk(
    node: Node, buf: bytes, pos: int, shape: list[Any], found: dict[str, bytes], role: str | None
) -> int:
    """Walk one value exactly, whatever its shape, and return the position after it. The choices a
    pattern needs are appended to `shape` in order: a string's length, a union's branch, an array's
    (block counts, whether an item holds a string of 64 bytes or more); `found` gets the raw bytes of
    each value whose field has a role."""
    kind, start = node[0], pos
    if kind == "v":
        pos = read_varint(buf, pos)[1]
    elif kind == "f":
        pos += node[1]
    elif kind == "s":
        length, pos = read_varint(buf, pos)
        shape.append(length)
        pos += length
    elif kind == "u":
        branch, pos = read_varint(buf, pos)
        shape.append(branch)
        pos = walk(node[1][branch], buf, pos, shape, found, None)
    elif kind == "a":
        blocks: list[int] = []
        items: list[Any] = []  # the items' choices: only whether a string among them is long is kept
        count, pos = read_varint(buf, pos)
        while count:
            blocks.append(count)
            if count < 0:  # a block may carry its byte size after a negative count
                count = -count
                pos = read_varint(buf, pos)[1]
            for _ in range(count):
                if node[2]:
                    length, pos = read_varint(buf, pos)
                    items.append(length)
                    pos += length
                pos = walk(node[1], buf, pos, items, found, None)
            count, pos = read_varint(buf, pos)
        shape.append((tuple(blocks), any(isinstance(c, int) and c >= 64 for c in items)))
    elif kind == "r":
        for field_role, field in node[1]:
            pos = walk(field, buf, pos, shape, found, field_role)
    if role is not None:
        found[role] = buf[start:pos]
    return pos


def read_value(node: Node, buf: bytes, pos: int) -> tuple[Any, int]:
    """Decode one value to Python (partition tuples only: few per manifest)."""
    kind = node[0]
    if kind == "v":
        return read_varint(buf, pos)
    if kind == "n":
        return None, pos
    if kind == "f":
        raw = buf[pos : pos + node[1]]
        if node[2] in ("float", "double"):
            return struct.unpack("<f" if node[2] == "float" else "<d", raw)[0], pos + node[1]
        return (raw == b"\x01" if node[2] == "boolean" else raw), pos + node[1]
    if kind == "s":
        length, pos = read_varint(buf, pos)
        raw = buf[pos : pos + length]
        return (raw.decode() if node[1] == "string" else raw), pos + length
    if kind == "u":
        branch, pos = read_varint(buf, pos)
        return read_value(node[1][branch], buf, pos)
    if kind != "r":
        raise ValueError(f"a partition value cannot be an Avro {node[0]!r} node")
    values = []
    for _, field in node[1]:
        value, pos = read_value(field, buf, pos)
        values.append(value)
    return tuple(values), pos


def find_role(node: Node, role: str) -> Node | None:
    if node[0] != "r":
        return None
    for name, field in node[1]:
        found = field if name == role else find_role(field, role)
        if found is not None:
            return found
    return None
