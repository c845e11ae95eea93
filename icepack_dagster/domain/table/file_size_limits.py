"""A table's file-size limits: the target size its writes and rewrites aim at, and the size below which
a data file counts as small. Status measures small files against them and compaction plans with them,
so both read them here, from the table's properties, the same way."""

from __future__ import annotations

from collections.abc import Mapping

from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.policy.property_text import parse_whole_number
from icepack_dagster.domain.table.iceberg_properties import TARGET_FILE_SIZE_BYTES, iceberg_value
from icepack_dagster.exceptions import InvalidPolicyError

SMALL_FILE_THRESHOLD_PROPERTY = "icepack.small-file-threshold-bytes"


def _positive(table: str, name: str, raw: str, value: int) -> int:
    if value <= 0:
        raise InvalidPolicyError(table, name, raw, "must be greater than zero")
    return value


def file_size_limits(
    table: str, properties: Mapping[str, str], thresholds: HealthThresholds
) -> tuple[int, int]:
    """(target file size, small-file threshold) in bytes for a table, from its properties.

    The target is `write.target-file-size-bytes` as Iceberg reads it (or Iceberg's default); the
    threshold is `icepack.small-file-threshold-bytes` (plain ASCII digits, like every `icepack.*`
    number) when set, else the default ratio of the target.
    """
    target = iceberg_value(properties, TARGET_FILE_SIZE_BYTES)
    if target.error is not None:
        raise InvalidPolicyError(table, TARGET_FILE_SIZE_BYTES, target.raw or "", target.error)
    size = _positive(table, TARGET_FILE_SIZE_BYTES, target.raw or "", int(target.value))
    raw = properties.get(SMALL_FILE_THRESHOLD_PROPERTY)
    if raw is None:
        return size, max(1, int(size * thresholds.small_file_default_ratio))
    try:
        small = parse_whole_number(raw.strip())
    except ValueError as error:
        raise InvalidPolicyError(table, SMALL_FILE_THRESHOLD_PROPERTY, raw, f"{error} (bytes)") from None
    return size, _positive(table, SMALL_FILE_THRESHOLD_PROPERTY, raw, small)
