"""The table's own Iceberg properties, read exactly as Iceberg reads them: the owner's policy layer.

Iceberg honours these properties whatever icepack does (Iceberg's `TableProperties`), so icepack reads
them the same way, with one parser per property used by the recommendation, the policy and the runtime
guard alike. Iceberg parses them with Java (`PropertyUtil`): a boolean is true only for `true` in any
case, with no space around it (`Boolean.parseBoolean`), so `'no'`, `'1'` and `'true '` are all false;
a number is `Integer.parseInt` or `Long.parseLong`: an optional sign and decimal digits (any script's
digits, as Java accepts them), nothing else, within the Java type's range. A number Iceberg cannot
parse makes the Iceberg operations that read it fail, so it is reported, never guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel

Kind = Literal["boolean", "int", "long"]

MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
TARGET_FILE_SIZE_BYTES = "write.target-file-size-bytes"
DELETE_TARGET_FILE_SIZE_BYTES = "write.delete.target-file-size-bytes"
GC_ENABLED = "gc.enabled"
METADATA_DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
METADATA_PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
MANIFEST_TARGET_SIZE_BYTES = "commit.manifest.target-size-bytes"
DELETE_GRANULARITY = "write.delete.granularity"
DELETE_GRANULARITIES = ("file", "partition")  # Iceberg's DeleteGranularity labels; "file" is the default

_JAVA_INTEGER = re.compile(r"[+-]?\d+")  # str pattern: \d is any Unicode decimal digit, as in Java
_BITS: dict[Kind, int] = {"int": 32, "long": 64}


@dataclass(frozen=True)
class IcebergProperty:
    """One table property Iceberg honours: its name, Java type, Iceberg's default and what it does."""

    name: str
    kind: Kind
    default: int | bool
    meaning: str


ICEBERG_PROPERTIES: tuple[IcebergProperty, ...] = (
    IcebergProperty(MAX_SNAPSHOT_AGE_MS, "long", 5 * 24 * 3600 * 1000, "expiry keeps snapshots younger"),
    IcebergProperty(MIN_SNAPSHOTS_TO_KEEP, "int", 1, "expiry keeps this many per branch"),
    IcebergProperty(MAX_REF_AGE_MS, "long", 2**63 - 1, "expiry drops branches and tags older"),
    IcebergProperty(TARGET_FILE_SIZE_BYTES, "long", 536_870_912, "data file size writers aim for"),
    IcebergProperty(DELETE_TARGET_FILE_SIZE_BYTES, "long", 67_108_864, "delete file size writers aim for"),
    IcebergProperty(GC_ENABLED, "boolean", True, "false: expiry and orphan removal refused"),
    IcebergProperty(METADATA_DELETE_AFTER_COMMIT, "boolean", False, "commits prune old metadata files"),
    IcebergProperty(METADATA_PREVIOUS_VERSIONS_MAX, "int", 100, "metadata files a pruning commit keeps"),
    IcebergProperty(MANIFEST_TARGET_SIZE_BYTES, "long", 8_388_608, "size rewrite_manifests aims for"),
)
_BY_NAME = {p.name: p for p in ICEBERG_PROPERTIES}


def java_boolean(text: str) -> bool:
    """`Boolean.parseBoolean`: true exactly for `true` in any letter case; anything else is false."""
    return text.isascii() and text.lower() == "true"


def java_integer(text: str, kind: Kind) -> int:
    """`Integer.parseInt` (kind int) or `Long.parseLong` (kind long); ValueError where Java throws."""
    bits = _BITS[kind]
    if not _JAVA_INTEGER.fullmatch(text):
        raise ValueError(f"Iceberg reads it as a Java {kind}: an optional sign and digits, nothing else")
    try:
        value = int(text)  # leading zeros are fine in Java too
    except ValueError:  # more digits than Python converts: far beyond any Java type
        value = 2**bits
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ValueError(f"out of the range of a Java {kind}")
    return value


class IcebergValue(FrozenModel):
    """One Iceberg property of one table: the value Iceberg uses, and whether the table set it."""

    name: str
    value: int | bool = Field(description="What Iceberg uses: the table's value, else Iceberg's default")
    raw: str | None = None
    error: str | None = None

    @property
    def set_on_table(self) -> bool:
        return self.raw is not None

    @property
    def usable(self) -> bool:
        """Set on the table and readable by Iceberg."""
        return self.raw is not None and self.error is None


def iceberg_value(properties: Mapping[str, str], name: str) -> IcebergValue:
    """The value Iceberg uses for `name` on a table with `properties`: the table's value as Iceberg
    parses it, or Iceberg's default; `error` says why Iceberg cannot parse the table's value."""
    spec = _BY_NAME[name]
    raw = properties.get(name)
    if raw is None:
        return IcebergValue(name=name, value=spec.default)
    if spec.kind == "boolean":
        return IcebergValue(name=name, value=java_boolean(raw), raw=raw)
    try:
        return IcebergValue(name=name, value=java_integer(raw, spec.kind), raw=raw)
    except ValueError as error:
        return IcebergValue(name=name, value=spec.default, raw=raw, error=str(error))


def iceberg_layer(properties: Mapping[str, str]) -> tuple[IcebergValue, ...]:
    """Every property of ICEBERG_PROPERTIES as Iceberg reads it on this table, in that order."""
    return tuple(iceberg_value(properties, p.name) for p in ICEBERG_PROPERTIES)


def gc_enabled(properties: Mapping[str, str]) -> bool:
    """Whether Iceberg lets expiry and orphan removal delete this table's files."""
    return bool(iceberg_value(properties, GC_ENABLED).value)


def unreadable_for(action: str, read: Iterable[str], properties: Mapping[str, str]) -> str | None:
    """Why Iceberg would fail `action`, which parses the properties `read` on every run, on a table with
    these properties (one it cannot parse), else None."""
    for name in read:
        value = iceberg_value(properties, name)
        if value.error is not None:
            return (
                f"table property {name}={value.raw!r} cannot be read by Iceberg ({value.error}), so "
                f"Iceberg's {action} fails on this table until the property is fixed"
            )
    return None


def delete_granularity(properties: Mapping[str, str]) -> str | None:
    """How Spark writes (and rewrites) position deletes on this table, as `DeleteGranularity.fromString`
    reads the property (either label in any letter case): one delete file per data file (`file`, the
    default) or per partition; None when Iceberg cannot read the value (its writes then fail)."""
    raw = properties.get(DELETE_GRANULARITY)
    if raw is None:
        return DELETE_GRANULARITIES[0]
    label = raw.lower() if raw.isascii() else None
    return label if label in DELETE_GRANULARITIES else None


def retention_floor(properties: Mapping[str, str]) -> tuple[int | None, float | None]:
    """(snapshots, hours) that Iceberg's own expiry keeps on this table by the table's `history.expire.*`
    properties; None where the table does not set one (or Iceberg cannot read it)."""
    keep = iceberg_value(properties, MIN_SNAPSHOTS_TO_KEEP)
    age = iceberg_value(properties, MAX_SNAPSHOT_AGE_MS)
    return (
        int(keep.value) if keep.usable else None,
        int(age.value) / 3_600_000 if age.usable else None,
    )


def explain_iceberg_layer(layer: tuple[IcebergValue, ...]) -> list[tuple[str, str, str]]:
    """(property, value, source) rows of a table's Iceberg layer, for `icepack policy --explain`."""
    rows = []
    for item in layer:
        if item.error is not None:
            rows.append((item.name, repr(item.raw), f"table property, unreadable by Iceberg: {item.error}"))
        else:
            shown = str(item.value).lower() if isinstance(item.value, bool) else str(item.value)
            rows.append((item.name, shown, "table property" if item.set_on_table else "Iceberg default"))
    return rows
