"""Manifest entries decoded from Avro by patterns compiled from an entry's shape.

Status needs seven values of a manifest entry (status, snapshot id, content, file format, partition,
record count, file size), all at its front; the rest of an entry is column statistics for every column.
Avro records carry no length, so the statistics must still be walked to reach the next entry, and that
walk made fastavro slow (about 10k entries/s on a 22-column table, even with a projected reader schema).
Here the walk runs in Python's C regular-expression engine: an entry's shape (union branches, array
block counts, where long strings are) is learnt from one entry decoded exactly in Python, then compiled
into a pattern that matches exactly the Avro encoding of entries of that shape and captures the seven
values. Strings and bytes inside arrays (column bounds) match by their one- or two-byte length prefix,
so entries whose bounds differ in length (up to 1023 bytes) share a pattern. An entry that fits no known
shape is decoded exactly and teaches a new one; a pattern never guesses (bench/HISTORY.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import BytesIO
from typing import Any, cast

import fastavro

from icepack_dagster.iceberg.avro_walk import Node, find_role, read_value, schema_tree, walk
from icepack_dagster.iceberg.entry_patterns import ROLES, Shape, Values, shape_for

# Iceberg field ids of the entry values status reads (`entry_patterns.ROLES`).
_ENTRY_ROLES: dict[int, Any] = {
    0: "status",
    1: "snapshot",
    2: {134: "content", 101: "format", 102: "partition", 103: "records", 104: "size"},
}

_COMPILE_WORTH = 32  # entries left in a manifest that repay compiling a pattern (~7 ms; ~22 long bounds)
_SHAPES_KEPT = 4  # patterns tried per manifest before decoding exactly


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
    size, snapshot, file format) values: Avro encodings, None for a field the schema lacks (content in v1).
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
        learnt = shape_for(self.tree, recorded, compile_new=left >= _COMPILE_WORTH)
        if learnt is not None:
            shapes.insert(0, learnt)
            del shapes[_SHAPES_KEPT:]
            self._schema.recent = shapes[:]
        return tuple(found.get(role) for role in ROLES), end

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
