"""`table_status` metadata: the numbers a person plots over time, readable sizes beside the byte
counts, the file-size histogram, and the full status record the health sync reads back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from icepack_dagster.defs.materialization_codec.records import (
    CODEC_VERSION,
    STATUS_ERROR,
    STATUS_JSON,
    VERSION,
    Metadata,
    byte_count,
    decode_model,
    record,
    table,
)
from icepack_dagster.domain.health.judging import format_bytes
from icepack_dagster.domain.table.status import TableStatus

_MIB = 1024 * 1024


def status_markdown(status: TableStatus) -> str:
    """One paragraph a person reads before the numbers; a summary status says what it carries."""
    small = f"{status.small_file_count} small"
    carried = status.carried
    if carried is not None:
        small = (
            f"{carried.small_files[0]}-{carried.small_files[1]} small ({status.small_file_count} as of "
            f"snapshot {status.manifests_read_at}, {carried.data_files_added} data files appended since: "
            "measured from snapshot summaries)"
        )
    return (
        f"**{status.live_data_files} data files** ({format_bytes(status.live_data_bytes)}, "
        f"{status.total_records} records), {small}; "
        f"{status.live_delete_files} delete files; {status.manifest_count} manifests "
        f"({format_bytes(status.manifest_bytes)}); {status.snapshot_count} snapshots."
    )


def _entry_fields(status: TableStatus) -> Metadata:
    """The fields only manifest entries give: exact values to plot from a full status; from a summary
    status, the bounds and the snapshot its figures were read at, never a count it does not know."""
    histogram = [{"bucket": b.label, "files": b.file_count} for b in status.file_size_histogram]
    carried = status.carried
    if carried is None:
        return {
            "small_files": dg.MetadataValue.int(status.small_file_count),
            "small_file_ratio": dg.MetadataValue.float(round(status.small_file_ratio, 4)),
            "partitions": dg.MetadataValue.int(status.partition_count),
            "file_size_histogram": table([("bucket", "string"), ("files", "int")], histogram),
        }
    return {
        "measured_from": dg.MetadataValue.text("snapshot summaries"),
        "entries_read_at_snapshot": dg.MetadataValue.text(str(status.manifests_read_at)),
        "small_files_at_least": dg.MetadataValue.int(carried.small_files[0]),
        "small_files_at_most": dg.MetadataValue.int(carried.small_files[1]),
        "partitions_at_least": dg.MetadataValue.int(carried.partitions[0]),
        "partitions_at_most": dg.MetadataValue.int(carried.partitions[1]),
    }


def status_metadata(status: TableStatus) -> Metadata:
    """Numbers a person plots over time, the file-size histogram, and the full status record."""
    hours = status.oldest_snapshot_age_seconds
    return {
        "overview": dg.MetadataValue.md(status_markdown(status)),
        "data_files": dg.MetadataValue.int(status.live_data_files),
        "delete_files": dg.MetadataValue.int(status.live_delete_files),
        **byte_count("data_bytes", status.live_data_bytes),
        "records": dg.MetadataValue.int(status.total_records),
        **_entry_fields(status),
        "average_file_mib": dg.MetadataValue.float(round(status.average_data_file_bytes / _MIB, 3)),
        "manifests": dg.MetadataValue.int(status.manifest_count),
        **byte_count("manifest_bytes", status.manifest_bytes),
        "snapshots": dg.MetadataValue.int(status.snapshot_count),
        "oldest_snapshot_age_hours": dg.MetadataValue.float(round((hours or 0.0) / 3600, 2)),
        "metadata_log_entries": dg.MetadataValue.int(status.metadata_log_entries),
        "format_version": dg.MetadataValue.int(status.format_version),
        "location": dg.MetadataValue.path(status.location),
        **record(STATUS_JSON, status.model_dump(mode="json")),
    }


def status_failure_metadata(error: str) -> Metadata:
    """A table whose status could not be read: the error, so health becomes `unknown`, never healthy."""
    return {STATUS_ERROR: dg.MetadataValue.text(error), VERSION: dg.MetadataValue.int(CODEC_VERSION)}


def decode_status(metadata: Mapping[str, Any]) -> TableStatus | None:
    return decode_model(metadata, STATUS_JSON, TableStatus)


def decode_status_error(metadata: Mapping[str, Any]) -> str | None:
    value = metadata.get(STATUS_ERROR)
    return None if value is None else str(value.value)
