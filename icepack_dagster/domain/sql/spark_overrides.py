"""Per-table Spark SQL settings for maintenance, from `icepack.spark.sql.<key>` table properties.

A table owner may tune how its maintenance runs (shuffle partitions, adaptive execution, split sizes)
without touching the platform: `icepack.spark.sql.shuffle.partitions=64` becomes
`SET spark.sql.shuffle.partitions=64` in that table's own Spark session. Only an explicit allowlist of
settings is accepted, each with a typed validator, and the value is re-printed from its parsed form;
so a property can never smuggle anything into the statement beyond one allowlisted `SET key=value`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from icepack_dagster.domain.actions.option_values import Validator, boolean, int_between
from icepack_dagster.exceptions import RejectedSparkOverrideError

PROPERTY_PREFIX = "icepack.spark."
SQL_PROPERTY_PREFIX = "icepack.spark.sql."
_BYTE_SIZE = re.compile(r"([0-9]{1,15})(b|k|kb|m|mb|g|gb|t|tb)?", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3}
_UNITS |= {"t": 1024**4, "tb": 1024**4}
_MAX_BYTES = 1024**4







def _byte_size(value: str) -> str:
    """`134217728`, `128m`, `1g` ... printed back as a number of bytes."""
    match = _BYTE_SIZE.fullmatch(value)
    if not match:
        raise ValueError("expected a byte size such as 134217728, 128m or 1g")
    size = int(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
    if not 1 <= size <= _MAX_BYTES:
        raise ValueError("expected a byte size from 1 byte to 1 TiB")
    return str(size)


def _one_of(*choices: str) -> Validator:
    def validate(value: str) -> str:
        if value.lower() not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return value.lower()

    return validate


ALLOWED: dict[str, Validator] = {
    "spark.sql.shuffle.partitions": int_between(1, 100_000),
    "spark.sql.adaptive.enabled": boolean,
    "spark.sql.adaptive.coalescePartitions.enabled": boolean,
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": _byte_size,
    "spark.sql.adaptive.skewJoin.enabled": boolean,
    "spark.sql.files.maxPartitionBytes": _byte_size,
    "spark.sql.files.openCostInBytes": _byte_size,
    "spark.sql.files.maxRecordsPerFile": int_between(0, 1_000_000_000),
    "spark.sql.iceberg.planning.preserve-data-grouping": boolean,
    "spark.sql.iceberg.vectorization.enabled": boolean,
    "spark.sql.iceberg.distribution-mode": _one_of("none", "hash", "range"),
    "spark.sql.iceberg.advisory-partition-size": _byte_size,
}
"""Spark SQL settings a table may override, each with the validator that prints its value."""


def validate_override(table: str, key: str, value: str) -> str:
    """The canonical value of one allowlisted setting, or `RejectedSparkOverrideError`."""
    validator = ALLOWED.get(key)
    if validator is None:
        raise RejectedSparkOverrideError(
            table, key, f"not an allowlisted Spark SQL setting (allowed: {', '.join(sorted(ALLOWED))})"
        )
    if not isinstance(value, str) or len(value) > 64:
        raise RejectedSparkOverrideError(table, key, f"value {value!r} is not a short string")
    try:
        return validator(value)
    except ValueError as error:
        raise RejectedSparkOverrideError(table, key, f"value {value!r}: {error}") from None


def resolve_overrides(table: str, properties: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The validated `(spark.sql.<key>, value)` pairs a table's properties ask for, sorted by key.

    Every `icepack.spark.` property must be an allowlisted `icepack.spark.sql.<key>`; one bad property
    rejects them all, so maintenance never runs with half of what the owner asked for."""
    overrides = {}
    for name, value in properties.items():
        if not isinstance(name, str) or not name.startswith(PROPERTY_PREFIX):
            continue
        if not name.startswith(SQL_PROPERTY_PREFIX):
            reason = "only icepack.spark.sql.<key> properties are supported"
            raise RejectedSparkOverrideError(table, name, reason)
        key = "spark.sql." + name.removeprefix(SQL_PROPERTY_PREFIX)
        overrides[key] = validate_override(table, key, value)
    return tuple(sorted(overrides.items()))


def render_set(key: str, value: str, table: str = "<no table>") -> str:
    """`SET key=value`, only for an allowlisted key whose value is already in canonical form."""
    if validate_override(table, key, value) != value:
        raise RejectedSparkOverrideError(table, key, f"value {value!r} is not in canonical form")
    return f"SET {key}={value}"
