"""Typed validators for option values that reach Spark SQL as text (procedure options, SET overrides):
each parses the string and prints it back from its type, so only canonical values are ever rendered.
Also the options Iceberg's rewrite actions share (`SizeBasedFileRewritePlanner`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime

Validator = Callable[[str], str]

_INT = re.compile(r"[0-9]{1,18}")
_DECIMAL = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?")
_TIMESTAMP_HINT = "expected an ISO 8601 timestamp such as 2024-05-01T00:00:00+00:00"


def int_between(low: int, high: int) -> Validator:
    def validate(value: str) -> str:
        if not _INT.fullmatch(value) or not low <= int(value) <= high:
            raise ValueError(f"expected a whole number from {low} to {high}")
        return str(int(value))

    return validate


def boolean(value: str) -> str:
    if value.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return value.lower()


def ratio(value: str) -> str:
    if not _DECIMAL.fullmatch(value) or not 0 < float(value) <= 1:
        raise ValueError("expected a decimal number above 0 and at most 1")
    return repr(float(value))


def one_of(*choices: str) -> Validator:
    def validate(value: str) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return value

    return validate


def parse_timestamp(value: str) -> datetime:
    """An ISO 8601 timestamp; one without an offset is taken as UTC (Spark sessions here run in UTC)."""
    if not value or len(value) > 40 or not value.isascii():
        raise ValueError(_TIMESTAMP_HINT)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(_TIMESTAMP_HINT) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def timestamp(value: str) -> str:
    return parse_timestamp(value).strftime("%Y-%m-%d %H:%M:%S.%f+00:00")


BYTES = int_between(1, 2**50)
COUNT = int_between(1, 1_000_000)
REWRITE_OPTIONS: dict[str, Validator] = {
    "target-file-size-bytes": BYTES,
    "min-file-size-bytes": int_between(0, 2**50),
    "max-file-size-bytes": BYTES,
    "min-input-files": COUNT,
    "rewrite-all": boolean,
    "max-file-group-size-bytes": BYTES,
    "max-concurrent-file-group-rewrites": int_between(1, 1000),
    "partial-progress.enabled": boolean,
    "partial-progress.max-commits": int_between(1, 10_000),
    "rewrite-job-order": one_of("bytes-asc", "bytes-desc", "files-asc", "files-desc", "none"),
}
"""The size and grouping options both rewrite procedures take, in their `options => map(...)`."""


def iso_seconds(moment: datetime) -> str:
    """ISO 8601 in UTC, floored to the second: flooring only ever keeps more, never deletes more."""
    return moment.replace(microsecond=0).isoformat(timespec="seconds")
