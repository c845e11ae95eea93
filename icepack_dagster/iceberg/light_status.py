"""Light and incremental status: what can be known about many tables cheaply.

A light status reads the metadata file, the current snapshot's summary and its manifest list, and opens
no manifest: it costs one small Avro file per table however large the table is. It fills exactly every
`TableStatus` field those sources determine and leaves the rest `None` (which fields, and when: see
`LightStatus` and docs/PERFORMANCE.md). The snapshot summary's running totals are used only when they
agree with the manifest list; a writer that kept no totals, or wrong ones, leaves those fields `None`.

`status_tracker.StatusTracker` re-statuses a fleet at either depth, reading only changed tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pyiceberg.table import Table

from icepack_dagster.domain.health_thresholds import HealthThresholds
from icepack_dagster.domain.table_key import TableKey
from icepack_dagster.iceberg.manifest_reader import MANIFEST_CONTENT_DELETES
from icepack_dagster.iceberg.status_reader import current_manifests, file_size_limits, metadata_facts

StatusDepth = Literal["full", "light"]


class LightStatus(BaseModel):
    """A status from metadata file, snapshot summary and manifest list. Field names are `TableStatus`'s;
    `None` means "not determined at this depth". Never filled: small files, size histogram, partition
    count (they need every manifest entry)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    depth: Literal["light"] = "light"
    table: str
    collected_at: datetime
    metadata_location: str = Field(description="The metadata file this status was read from")
    location: str
    format_version: int = Field(ge=1, le=3)
    snapshot_id: int | None
    # manifest list: exact whenever the list carries file and row counts (always in v2 and v3)
    live_data_files: int | None = Field(ge=0)
    live_delete_files: int | None = Field(ge=0)
    total_records: int | None = Field(ge=0)
    delete_records: int | None = Field(ge=0, description="Position + equality delete records")
    manifest_count: int = Field(ge=0)
    data_manifest_count: int = Field(ge=0)
    delete_manifest_count: int = Field(ge=0)
    manifest_bytes: int = Field(ge=0)
    # snapshot summary totals, used only when they agree with the manifest list
    live_position_delete_files: int | None = Field(ge=0, description="When all deletes are of one kind")
    live_equality_delete_files: int | None = Field(ge=0, description="When all deletes are of one kind")
    position_delete_records: int | None = Field(ge=0)
    equality_delete_records: int | None = Field(ge=0)
    live_data_bytes: int | None = Field(ge=0, description="When the table has no delete files")
    live_delete_bytes: int | None = Field(ge=0, description="When the table has no delete files")
    live_file_bytes: int | None = Field(ge=0, description="Data + delete file bytes")
    # metadata file: exact, as in a full status
    target_file_size_bytes: int = Field(gt=0)
    small_file_threshold_bytes: int = Field(gt=0)
    partition_spec_count: int = Field(ge=1)
    snapshot_count: int = Field(ge=0)
    oldest_snapshot_age_seconds: float | None = Field(ge=0)
    newest_snapshot_age_seconds: float | None = Field(ge=0)
    metadata_log_entries: int = Field(ge=0)
    branch_count: int = Field(ge=0)
    tag_count: int = Field(ge=0)
    properties: dict[str, str] = Field(default_factory=dict)


_SUMMARY_FACTS = (
    "position_delete_records",
    "equality_delete_records",
    "live_position_delete_files",
    "live_equality_delete_files",
    "live_data_bytes",
    "live_delete_bytes",
    "live_file_bytes",
)


def _total(values: Iterable[int | None]) -> int | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _summary_totals(summary: Mapping[str, str], counted: Mapping[str, int | None]) -> dict[str, int] | None:
    """The summary's running totals when present, whole numbers, and equal to what the list counted."""
    names = ("total-data-files", "total-delete-files", "total-records", "total-files-size",
             "total-position-deletes", "total-equality-deletes")
    try:
        totals = {name: int(summary[name]) for name in names}
    except (KeyError, ValueError):
        return None
    agrees = (
        totals["total-data-files"] == counted["data_files"]
        and totals["total-delete-files"] == counted["delete_files"]
        and totals["total-records"] == counted["records"]
        and totals["total-position-deletes"] + totals["total-equality-deletes"] == counted["delete_records"]
    )
    return totals if agrees else None


def read_light_status(
    table: Table, key: TableKey, thresholds: HealthThresholds, now: datetime
) -> LightStatus:
    """Measure one loaded table from its metadata, snapshot summary and manifest list only."""
    name = key.text
    if now.tzinfo is None:
        raise ValueError(f"table {name}: 'now' must be timezone-aware (snapshot times are UTC), got {now!r}")
    metadata = table.metadata
    target, small = file_size_limits(name, metadata.properties, thresholds)
    snapshot = table.current_snapshot()
    refs = current_manifests(table, name)
    data = [ref for ref in refs if ref.content != MANIFEST_CONTENT_DELETES]
    deletes = [ref for ref in refs if ref.content == MANIFEST_CONTENT_DELETES]
    counted = {
        "data_files": _total(ref.live_files for ref in data),
        "delete_files": _total(ref.live_files for ref in deletes),
        "records": _total(ref.live_rows for ref in data),
        "delete_records": _total(ref.live_rows for ref in deletes),
    }
    summary = snapshot.summary.additional_properties if snapshot is not None and snapshot.summary else {}
    totals = _summary_totals(summary, counted) if snapshot is not None else None
    facts: dict[str, Any] = dict.fromkeys(_SUMMARY_FACTS)  # not determined
    if snapshot is None:
        facts = dict.fromkeys(_SUMMARY_FACTS, 0)
    elif totals is not None:
        position, equality = totals["total-position-deletes"], totals["total-equality-deletes"]
        delete_files = totals["total-delete-files"]
        facts = {
            "position_delete_records": position,
            "equality_delete_records": equality,
            "live_position_delete_files": delete_files if not equality else (0 if not position else None),
            "live_equality_delete_files": delete_files if not position else (0 if not equality else None),
            "live_file_bytes": totals["total-files-size"],
            "live_data_bytes": totals["total-files-size"] if not delete_files else None,
            "live_delete_bytes": 0 if not delete_files else None,
        }
    return LightStatus(
        **metadata_facts(table, name, now),
        live_data_files=counted["data_files"],
        live_delete_files=counted["delete_files"],
        total_records=counted["records"],
        delete_records=counted["delete_records"],
        manifest_count=len(refs),
        data_manifest_count=len(data),
        delete_manifest_count=len(deletes),
        manifest_bytes=sum(ref.length for ref in refs),
        target_file_size_bytes=target,
        small_file_threshold_bytes=small,
        **facts,
    )
