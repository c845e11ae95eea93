"""The codec of Dagster materializations: the metadata keys, their encoding for people (numbers the UI
plots, tables and markdown) and the machine record each materialization carries (`*_json`, versioned),
which the health asset, the maintenance sensor and the fleet summary decode back.

Encoders return plain dicts of `dg.MetadataValue`; decoders take the metadata of an event and return
the domain model, or None when the record is absent or from another codec version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import dagster as dg
from pydantic import BaseModel, ValidationError

from icepack_dagster.domain.fleet import FleetSummary, fleet_markdown
from icepack_dagster.domain.health_model import HealthState, TableHealth, state_rank
from icepack_dagster.domain.history import TableHistory
from icepack_dagster.domain.maintenance_impact import MaintenanceImpact, maintenance_impact
from icepack_dagster.domain.maintenance_report import MaintenanceReport
from icepack_dagster.domain.prediction_model import PredictionAccuracy
from icepack_dagster.domain.recommendation_model import Recommendation
from icepack_dagster.domain.status import TableStatus

# Bump when a record changes shape or when status is computed differently: health sync then measures every
# table again instead of ageing statuses an older reader produced (see iceberg/status_tracker.py).
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
BYTES_RECLAIMED = "bytes_reclaimed"
FILES_RECLAIMED = "files_reclaimed"
OUTCOME = "outcome"

_MIB = 1024 * 1024

Metadata = dict[str, dg.MetadataValue]


def _record(key: str, payload: Mapping[str, Any]) -> Metadata:
    return {key: dg.MetadataValue.json(dict(payload)), VERSION: dg.MetadataValue.int(CODEC_VERSION)}


def _decode(metadata: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    version = metadata.get(VERSION)
    value = metadata.get(key)
    if version is None or getattr(version, "value", None) != CODEC_VERSION or value is None:
        return None
    data = getattr(value, "data", None)
    return data if isinstance(data, dict) else None


M = TypeVar("M", bound=BaseModel)


def _decode_model(metadata: Mapping[str, Any], key: str, model: type[M]) -> M | None:
    """The record under `key` as `model`; None when absent, from another codec version, or invalid."""
    data = _decode(metadata, key)
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def _table(columns: list[tuple[str, str]], rows: list[dict[str, Any]]) -> dg.MetadataValue:
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in columns])
    return dg.MetadataValue.table([dg.TableRecord(row) for row in rows], schema=schema)


# --- status ----------------------------------------------------------------------------------------
def status_metadata(status: TableStatus) -> Metadata:
    """Numbers a person plots over time, the file-size histogram, and the full status record."""
    hours = status.oldest_snapshot_age_seconds
    histogram = [{"bucket": b.label, "files": b.file_count} for b in status.file_size_histogram]
    return {
        "data_files": dg.MetadataValue.int(status.live_data_files),
        "delete_files": dg.MetadataValue.int(status.live_delete_files),
        "data_bytes": dg.MetadataValue.int(status.live_data_bytes),
        "records": dg.MetadataValue.int(status.total_records),
        "small_files": dg.MetadataValue.int(status.small_file_count),
        "small_file_ratio": dg.MetadataValue.float(round(status.small_file_ratio, 4)),
        "average_file_mib": dg.MetadataValue.float(round(status.average_data_file_bytes / _MIB, 3)),
        "manifests": dg.MetadataValue.int(status.manifest_count),
        "snapshots": dg.MetadataValue.int(status.snapshot_count),
        "oldest_snapshot_age_hours": dg.MetadataValue.float(round((hours or 0.0) / 3600, 2)),
        "metadata_log_entries": dg.MetadataValue.int(status.metadata_log_entries),
        "partitions": dg.MetadataValue.int(status.partition_count),
        "format_version": dg.MetadataValue.int(status.format_version),
        "file_size_histogram": _table([("bucket", "string"), ("files", "int")], histogram),
        "location": dg.MetadataValue.path(status.location),
        **_record(STATUS_JSON, status.model_dump(mode="json")),
    }


def status_failure_metadata(error: str) -> Metadata:
    """A table whose status could not be read: the error, so health becomes `unknown`, never healthy."""
    return {STATUS_ERROR: dg.MetadataValue.text(error), VERSION: dg.MetadataValue.int(CODEC_VERSION)}


def decode_status(metadata: Mapping[str, Any]) -> TableStatus | None:
    return _decode_model(metadata, STATUS_JSON, TableStatus)


def decode_status_error(metadata: Mapping[str, Any]) -> str | None:
    value = metadata.get(STATUS_ERROR)
    return None if value is None else str(value.value)


# --- health ----------------------------------------------------------------------------------------
def health_markdown(health: TableHealth) -> str:
    if health.state is HealthState.UNKNOWN:
        return f"**unknown**: status could not be measured.\n\n`{health.error}`"
    if not health.issues:
        return "**healthy**: no issue."
    lines = [f"**{health.state.value}**: {len(health.issues)} issue(s)", ""]
    lines += [f"- `{i.code}` ({i.severity.value}): {i.message}" for i in health.issues]
    return "\n".join(lines)


def health_metadata(health: TableHealth) -> Metadata:
    issues = [
        {
            "code": i.code,
            "severity": i.severity.value,
            "metric": i.metric,
            "value": float(i.value),
            "threshold": float(i.threshold),
            "message": i.message,
        }
        for i in health.issues
    ]
    columns = [("code", "string"), ("severity", "string"), ("metric", "string"), ("value", "float"),
               ("threshold", "float"), ("message", "string")]
    metadata: Metadata = {
        STATE: dg.MetadataValue.text(health.state.value),
        STATE_RANK: dg.MetadataValue.int(state_rank(health.state)),
        "issue_count": dg.MetadataValue.int(len(health.issues)),
        "issues": _table(columns, issues),
        SUMMARY: dg.MetadataValue.md(health_markdown(health)),
        **_record(HEALTH_JSON, health.model_dump(mode="json")),
    }
    if health.error:
        metadata["error"] = dg.MetadataValue.text(health.error)
    return metadata


def decode_health(metadata: Mapping[str, Any]) -> TableHealth | None:
    return _decode_model(metadata, HEALTH_JSON, TableHealth)


# --- recommendation --------------------------------------------------------------------------------
def _history_metadata(history: TableHistory) -> Metadata:
    metadata: Metadata = {
        "quarantined": dg.MetadataValue.bool(history.quarantined),
        "consecutive_failures": dg.MetadataValue.int(history.consecutive_failures),
    }
    if history.last_error:
        metadata["last_error"] = dg.MetadataValue.text(history.last_error)
    return metadata


def recommendation_markdown(recommendation: Recommendation, history: TableHistory) -> str:
    lines = []
    if history.quarantined:
        lines += [f"**quarantined** after {history.consecutive_failures} consecutive failures; last error:",
                  "", f"`{history.last_error}`", "",
                  "Release with `icepack quarantine release TABLE` or the `release_quarantine` job.", ""]
    if recommendation.actions:
        lines.append(f"**{len(recommendation.actions)} action(s)**, priority {recommendation.priority:.3g}:")
        lines += [f"1. `{a.action.value}`: {a.reason}" for a in recommendation.actions]
    else:
        lines.append("**nothing to do now**")
    if recommendation.skipped:
        lines += ["", "Left out:"] + [f"- `{s.action.value}`: {s.reason}" for s in recommendation.skipped]
    return "\n".join(lines)


def recommendation_metadata(recommendation: Recommendation, history: TableHistory) -> Metadata:
    actions = [
        {"action": a.action.value, "priority": float(a.priority), "reason": a.reason,
         "options": ", ".join(f"{k}={v}" for k, v in sorted(a.options.items()))}
        for a in recommendation.actions
    ]
    skipped = [{"action": s.action.value, "reason": s.reason} for s in recommendation.skipped]
    return {
        "needs_work": dg.MetadataValue.bool(recommendation.needs_work),
        "action_count": dg.MetadataValue.int(len(recommendation.actions)),
        "priority": dg.MetadataValue.float(float(recommendation.priority)),
        "expected_files_removed": dg.MetadataValue.int(recommendation.expected_files_removed),
        "expected_bytes_reclaimed": dg.MetadataValue.int(recommendation.expected_bytes_reclaimed),
        "estimated_bytes_to_rewrite": dg.MetadataValue.int(recommendation.estimated_bytes_to_rewrite),
        "actions": _table([("action", "string"), ("priority", "float"), ("reason", "string"),
                           ("options", "string")], actions),
        "skipped": _table([("action", "string"), ("reason", "string")], skipped),
        SUMMARY: dg.MetadataValue.md(recommendation_markdown(recommendation, history)),
        **_history_metadata(history),
        **_record(RECOMMENDATION_JSON, recommendation.model_dump(mode="json")),
    }


def decode_recommendation(metadata: Mapping[str, Any]) -> Recommendation | None:
    return _decode_model(metadata, RECOMMENDATION_JSON, Recommendation)


# --- maintenance -----------------------------------------------------------------------------------
def _impact_numbers(impact: MaintenanceImpact) -> Metadata:
    numbers: Metadata = {
        "duration_seconds": dg.MetadataValue.float(round(impact.duration_seconds, 3)),
        FILES_RECLAIMED: dg.MetadataValue.int(impact.files_reclaimed),
        BYTES_RECLAIMED: dg.MetadataValue.int(impact.bytes_reclaimed),
        "snapshots_expired": dg.MetadataValue.int(impact.snapshots_expired),
        "orphan_files_removed": dg.MetadataValue.int(impact.orphan_files_removed),
    }
    for name, (before, after) in impact.before_after.items():
        numbers[f"{name}_before"] = dg.MetadataValue.int(before)
        numbers[f"{name}_after"] = dg.MetadataValue.int(after)
    return numbers


def maintenance_markdown(report: MaintenanceReport, impact: MaintenanceImpact) -> str:
    lines = [f"**{report.outcome}** in {impact.duration_seconds:.1f} s", ""]
    for name, (before, after) in impact.before_after.items():
        lines.append(f"- {name.replace('_', ' ')}: {before} → {after}")
    statements = [s for r in report.results for s in r.statements]
    if statements:
        lines += ["", "```sql", *statements, "```"]
    return "\n".join(lines)


def maintenance_metadata(report: MaintenanceReport, history: TableHistory) -> Metadata:
    impact = maintenance_impact(report)
    rows = [
        {"action": r.action.value, "status": r.status, "seconds": round(r.duration_seconds, 3),
         "error": r.error or ""}
        for r in report.results
    ]
    return {
        OUTCOME: dg.MetadataValue.text(report.outcome),
        "actions": _table([("action", "string"), ("status", "string"), ("seconds", "float"),
                           ("error", "string")], rows),
        **_impact_numbers(impact),
        SUMMARY: dg.MetadataValue.md(maintenance_markdown(report, impact)),
        **_history_metadata(history),
        **_record(REPORT_JSON, report.model_dump(mode="json")),
    }


def decode_report(metadata: Mapping[str, Any]) -> MaintenanceReport | None:
    return _decode_model(metadata, REPORT_JSON, MaintenanceReport)


# --- fleet -----------------------------------------------------------------------------------------
_ACCURACY_COLUMNS = [
    ("action", "string"), ("runs", "int"), ("no_effect_runs", "int"), ("planned_files_in", "int"),
    ("done_files_in", "int"), ("planned_files_out", "int"), ("done_files_out", "int"),
    ("planned_bytes_in", "int"), ("done_bytes_in", "int"),
]


def fleet_metadata(
    summary: FleetSummary, metrics_path: str, accuracy: Sequence[PredictionAccuracy] = ()
) -> Metadata:
    """The fleet at a glance; `accuracy` is planned against done by action over the recorded runs of
    every table (the maintenance history's predictions)."""
    quarantined = [{"table": p, "last_error": e} for p, e in sorted(summary.quarantined.items())]
    metadata: Metadata = {
        "tables": dg.MetadataValue.int(summary.tables),
        **{f"tables_{s.value}": dg.MetadataValue.int(summary.count(s)) for s in HealthState},
        "maintenance_queued": dg.MetadataValue.int(summary.maintenance_queued),
        "maintenance_running": dg.MetadataValue.int(summary.maintenance_running),
        "quarantined_tables": dg.MetadataValue.int(len(summary.quarantined)),
        "quarantined": _table([("table", "string"), ("last_error", "string")], quarantined),
        "files_reclaimed_total": dg.MetadataValue.int(summary.files_reclaimed_total),
        "bytes_reclaimed_total": dg.MetadataValue.int(summary.bytes_reclaimed_total),
        "prometheus_file": dg.MetadataValue.path(metrics_path),
        "prediction_accuracy": _table(
            _ACCURACY_COLUMNS,
            [{name: getattr(row, name) for name, _ in _ACCURACY_COLUMNS} for row in accuracy],
        ),
        SUMMARY: dg.MetadataValue.md(fleet_markdown(summary)),
        **_record(FLEET_JSON, summary.model_dump(mode="json")),
    }
    return metadata


def decode_fleet(metadata: Mapping[str, Any]) -> FleetSummary | None:
    return _decode_model(metadata, FLEET_JSON, FleetSummary)


def decode_reclaimed(metadata: Mapping[str, Any]) -> tuple[int, int]:
    """(files, bytes) a `maintained_table` materialization reclaimed; zeros when not recorded."""
    files = metadata.get(FILES_RECLAIMED)
    size = metadata.get(BYTES_RECLAIMED)
    return (int(files.value) if files is not None else 0, int(size.value) if size is not None else 0)
