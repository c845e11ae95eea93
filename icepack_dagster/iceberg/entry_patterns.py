"""The patterns that decode manifest entries: from an entry's recorded shape (union branches, array
block counts, where long strings are), a regular expression that matches exactly the Avro encoding of
entries of that shape and captures the values status reads (`ROLES`). Strings and bytes inside arrays
(column bounds) match by their one- or two-byte length prefix, so entries whose bounds differ in length
(up to `LONG_LIMIT` - 1 bytes) share a pattern. Compiled patterns are shared by every manifest of the
process. `manifest_entries.py` learns shapes and falls back to the exact walk."""

from __future__ import annotations

import gc
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, cast

from icepack_dagster.iceberg.avro_walk import Node, decode_long, encode_long

# The entry values status reads, in the order `ManifestEntries` yields them.
ROLES = ("status", "content", "partition", "records", "size", "snapshot", "format")

_VARINT = rb"[\x80-\xff]*+[\x00-\x7f]"
_COMMON_LENGTHS = (8, 16, 4, 1, 0)  # bounds of longs and doubles, truncated strings, ints
_SHORT = b"(?:%s)" % b"|".join(
    re.escape(bytes([2 * n])) + b".{%d}" % n
    for n in (*_COMMON_LENGTHS, *(n for n in range(64) if n not in _COMMON_LENGTHS))
)  # a string or bytes of 0..63 bytes: its length is one byte, 2n
LONG_LIMIT = 1024  # strings and bytes in arrays (column bounds) shorter than this match a pattern


def _two_byte_strings(limit: int) -> bytes:
    """A pattern for a string or bytes of 64 to `limit - 1` bytes. Its length n = 64 * high + low has a
    two-byte varint prefix, 0x80 | 2 * low then high (zigzag doubles n): an alternation on the first
    byte, then on the second, each branch skipping exactly n bytes, so a match is still exact."""
    by_low = []
    for low in range(64):
        highs = [re.escape(bytes([high])) + b".{%d}" % (64 * high + low) for high in range(1, limit // 64)]
        by_low.append(re.escape(bytes([0x80 | 2 * low])) + b"(?:%s)" % b"|".join(highs))
    return b"(?:%s)" % b"|".join(by_low)


_STRING = b"(?:%s|%s)" % (_SHORT, _two_byte_strings(LONG_LIMIT))  # a string or bytes of 0..1023 bytes


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


Values = tuple[Any, ...]  # raw bytes of each of ROLES (None when the schema has no such field)
Shape = Callable[[bytes, int], tuple[Values, int] | None]


def _matcher(patterns: list[re.Pattern[bytes]], order: tuple[int, ...]) -> Shape:
    """One function matching an entry at `pos`: its values in `ROLES` order and its end, or None.
    Every pattern but the last ends by capturing the length prefix (two bytes up to 8 KiB, the usual
    case) of the long string that follows it."""
    first, *rest = (pattern.match for pattern in patterns)
    canonical = order == tuple(range(len(ROLES)))

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


def shape_for(tree: Node, recorded: list[Any], compile_new: bool) -> Shape | None:
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
    shape = _matcher(patterns, tuple(roles.index(role) if role in roles else -1 for role in ROLES))
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
