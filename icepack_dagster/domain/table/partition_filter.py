"""Partition values as people read them, and as a Spark SQL filter that selects exactly that partition.

A rewrite's `where` is a Spark expression on table columns; Iceberg projects it onto each file's
partition, so a predicate on the source column selects whole partitions when it follows the partition
transform's boundaries (a day is [midnight, next midnight) in UTC). Only transforms whose partitions
are such ranges or single values can be filtered: identity (numbers, strings, dates, booleans) and the
time transforms year, month, day and hour. Any other transform gets no filter (None), and the caller
decides without one.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from icepack_dagster.domain.sql.literals import quote_identifier, sql_string
from icepack_dagster.domain.table.partition_layout import PartitionField

_EPOCH = date(1970, 1, 1)
_EPOCH_TIME = datetime(1970, 1, 1, tzinfo=UTC)
_NUMBERS = {"int", "long"}
_TIME_TRANSFORMS = {"year", "month", "day", "hour"}


def _month_start(months: int) -> datetime:
    return _EPOCH_TIME.replace(year=1970 + months // 12, month=months % 12 + 1)


def _range(transform: str, value: int) -> tuple[datetime, datetime]:
    """The [start, end) a time transform's value stands for, in UTC."""
    if transform == "hour":
        start = _EPOCH_TIME + timedelta(hours=value)
        return start, start + timedelta(hours=1)
    if transform == "day":
        start = _EPOCH_TIME + timedelta(days=value)
        return start, start + timedelta(days=1)
    months = value * 12 if transform == "year" else value
    step = 12 if transform == "year" else 1
    return _month_start(months), _month_start(months + step)


def display_value(field: PartitionField, value: Any) -> str:
    """`day=2026-11-23`, `p=7`, `ts_month=2026-11`: a partition value as its writer meant it."""
    if value is None:
        return f"{field.name}=null"
    if field.transform in _TIME_TRANSFORMS and isinstance(value, int):
        start = _range(field.transform, value)[0]
        text = {"year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d", "hour": "%Y-%m-%d-%H"}[field.transform]
        return f"{field.name}={start.strftime(text)}"
    if field.transform == "identity" and field.source_type == "date" and isinstance(value, int):
        return f"{field.name}={(_EPOCH + timedelta(days=value)).isoformat()}"
    if isinstance(value, tuple | list) and len(value) == 2 and value[0] == "bytes":
        return f"{field.name}=0x{value[1]}"
    return f"{field.name}={value}"


def _timestamp_literal(source_type: str, moment: datetime) -> str | None:
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if source_type in ("timestamptz", "timestamptz_ns"):
        return f"TIMESTAMP '{text}+00:00'"
    if source_type in ("timestamp", "timestamp_ns"):
        return f"TIMESTAMP_NTZ '{text}'"
    if source_type == "date" and moment.hour == 0:
        return f"DATE '{moment.date().isoformat()}'"
    return None


def _identity(column: str, source_type: str, value: Any) -> str | None:
    if source_type in _NUMBERS and isinstance(value, int) and not isinstance(value, bool):
        return f"{column} = {value}"
    if source_type == "string" and isinstance(value, str):
        return f"{column} = {sql_string(value)}"
    if source_type == "boolean" and isinstance(value, bool):
        return f"{column} = {'true' if value else 'false'}"
    if source_type == "date" and isinstance(value, int):
        return f"{column} = DATE '{(_EPOCH + timedelta(days=value)).isoformat()}'"
    return None


def field_predicate(field: PartitionField, value: Any) -> str | None:
    """A predicate true exactly for rows of this field's partition value; None when none can be said."""
    if field.source_column is None or field.source_type is None:
        return None
    column = quote_identifier(*field.source_column.split("."))
    if value is None:
        return f"{column} IS NULL" if field.transform in ("identity", *_TIME_TRANSFORMS) else None
    if field.transform == "identity":
        return _identity(column, field.source_type, value)
    if field.transform not in _TIME_TRANSFORMS or not isinstance(value, int):
        return None
    start, end = _range(field.transform, value)
    low, high = _timestamp_literal(field.source_type, start), _timestamp_literal(field.source_type, end)
    if low is None or high is None:
        return None
    return f"({column} >= {low} AND {column} < {high})"


def partition_predicate(fields: tuple[PartitionField, ...], values: tuple[Any, ...]) -> str | None:
    """A predicate selecting exactly one partition of a spec; None when a field cannot be expressed."""
    parts = [field_predicate(field, value) for field, value in zip(fields, values, strict=True)]
    if not parts or any(part is None for part in parts):
        return None
    return " AND ".join(f"{part}" for part in parts if part is not None)


def excluding(predicates: list[str]) -> str:
    """A filter that leaves out every partition a predicate selects."""
    return " AND ".join(f"NOT ({predicate})" for predicate in predicates)
