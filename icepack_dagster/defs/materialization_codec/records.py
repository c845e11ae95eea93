"""The versioned machine records every materialization carries (`*_json`), the metadata keys other
modules read back, and the typed values the UI renders (tables, sizes a person reads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import dagster as dg
from pydantic import BaseModel, ValidationError

from icepack_dagster.domain.health.judging import format_bytes

# Bump when a record changes shape or when status is computed differently: health sync then measures every
# table again instead of ageing statuses an older reader produced (incremental_status/status_tracker.py).
CODEC_VERSION = 1
VERSION = "icepack/codec_version"
STATUS_JSON = "status_json"
STATUS_ERROR = "status_error"
HEALTH_JSON = "health_json"
RECOMMENDATION_JSON = "recommendation_json"
REPORT_JSON = "report_json"
FLEET_JSON = "fleet_json"
STATE = "state"
STATE_RANK = "state_rank"
SUMMARY = "summary"
SQL = "sql"
BYTES_RECLAIMED = "bytes_reclaimed"
FILES_RECLAIMED = "files_reclaimed"
OUTCOME = "outcome"

Metadata = dict[str, dg.MetadataValue]


def record(key: str, payload: Mapping[str, Any]) -> Metadata:
    """The machine record under `key`, with the codec version. Callers put it last, after the summary
    and the numbers, so the UI lists what a person reads first and the JSON after it (the UI folds a
    JSON of 1000 characters or more behind "[Show JSON]"; a smaller one is a line at the bottom)."""
    return {key: dg.MetadataValue.json(dict(payload)), VERSION: dg.MetadataValue.int(CODEC_VERSION)}


def _decode(metadata: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    version = metadata.get(VERSION)
    value = metadata.get(key)
    if version is None or getattr(version, "value", None) != CODEC_VERSION or value is None:
        return None
    data = getattr(value, "data", None)
    return data if isinstance(data, dict) else None


M = TypeVar("M", bound=BaseModel)


def decode_model(metadata: Mapping[str, Any], key: str, model: type[M]) -> M | None:
    """The record under `key` as `model`; None when absent, from another codec version, or invalid."""
    data = _decode(metadata, key)
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def table(columns: list[tuple[str, str]], rows: list[dict[str, Any]]) -> dg.MetadataValue:
    """A table the UI renders with sortable columns: `columns` are (name, type) pairs."""
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in columns])
    return dg.MetadataValue.table([dg.TableRecord(row) for row in rows], schema=schema)


def byte_count(name: str, value: int) -> Metadata:
    """A byte count twice: `name` as an int the UI plots, `name` with `_size` for `_bytes` as text a
    person reads (`bytes_reclaimed` -> `size_reclaimed`: "1.5 GiB")."""
    readable = name.replace("bytes", "size") if "bytes" in name else f"{name}_size"
    return {name: dg.MetadataValue.int(value), readable: dg.MetadataValue.text(format_bytes(value))}
