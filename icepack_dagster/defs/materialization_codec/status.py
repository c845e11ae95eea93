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
    """One paragraph a person reads before the numbers."""
    return (
        f"**{status.live_data_files} data files** ({format_bytes(status.live_data_bytes)}, "
        f"{status.total_records} records), {status.small_file_count} small; "
        f"{status.live_delete_files} delete files; {status.manifest_count} manifests "
        f"({format_bytes(status.manifest_bytes)}); {status.snapshot_count} snapshots."
    )


def status_metadata(status: TableStatus) -> Metadata:
    """Numbers a person plots over time, the file-size histogram, and the full status record."""
    hours = status.oldest_snapshot_age_seconds
    histogram = [{"bucket": b.label, "files": b.file_count} for b in status.file_size_histogram]
    return {
        "overview": dg.MetadataValue.md(status_markdown(status)),
        "data_files": dg.MetadataValue.int(status.live_data_files),
        "delete_files": dg.MetadataValue.int(status.live_delete_files),
        **byte_count("data_bytes", status.live_data_bytes),
        "records": dg.MetadataValue.int(status.total_records),
        "small_files": dg.MetadataValue.int(status.small_file_count),
        "small_file_ratio": dg.MetadataValue.float(round(status.small_file_ratio, 4)),
        "average_file_mib": dg.MetadataValue.float(round(status.average_data_file_bytes / _MIB, 3)),
        "manifests": dg.MetadataValue.int(status.manifest_count),
        **byte_count("manifest_bytes", status.manifest_bytes),
        "snapshots": dg.MetadataValue.int(status.snapshot_count),
        "oldest_snapshot_age_hours": dg.MetadataValue.float(round((hours or 0.0) / 3600, 2)),
        "metadata_log_entries": dg.MetadataValue.int(status.metadata_log_entries),
        "partitions": dg.MetadataValue.int(status.partition_count),
        "format_version": dg.MetadataValue.int(status.format_version),
        "file_size_histogram": table([("bucket", "string"), ("files", "int")], histogram),
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
