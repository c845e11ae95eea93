"""`fleet_summary` metadata: counts by health state to plot, the tables that need attention as a table
a person sorts (sizes readable and as numbers), prediction accuracy, and the fleet record the next
summary continues from; each listed table links to its partition page in the UI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import dagster as dg

from icepack_dagster.defs.materialization_codec.records import (
    FLEET_JSON,
    SUMMARY,
    Metadata,
    byte_count,
    decode_model,
    record,
    table,
)
from icepack_dagster.domain.health.judging import format_bytes
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.domain.outcomes.prediction import PredictionAccuracy
from icepack_dagster.domain.reports.fleet import FleetSummary, TableAttention, fleet_markdown

NEEDS_ATTENTION = "needs_attention"
ATTENTION_PAGES = "needs_attention_pages"
_ATTENTION_COLUMNS = [
    ("table", "string"), ("state", "string"), ("issues", "string"), ("size", "string"),
    ("data_bytes", "int"), ("quarantined", "bool"), ("last_error", "string"), ("refused", "string"),
    ("page", "string"),
]
_ACCURACY_COLUMNS = [
    ("action", "string"), ("runs", "int"), ("no_effect_runs", "int"), ("planned_files_in", "int"),
    ("done_files_in", "int"), ("planned_files_out", "int"), ("done_files_out", "int"),
    ("planned_bytes_in", "int"), ("done_bytes_in", "int"),
]


def partition_page(health_key: dg.AssetKey, partition: str) -> str:
    """The Dagster UI's page of one table's `table_health` partition (its checks, its materializations),
    as a link relative to the UI's root: the form the UI's own links take (`assetDetailsPathForKey` with
    `view=partitions&partition=`, in dagster-webserver's ui-core). Behind a `--path-prefix`, prepend it."""
    path = "/".join(quote(part, safe="") for part in health_key.path)
    return f"/assets/{path}?view=partitions&partition={quote(partition, safe='')}"


def attention_pages_markdown(summary: FleetSummary, health_key: dg.AssetKey) -> str:
    """Each table the summary lists, most urgent first, linked to its partition page."""
    if not summary.attention:
        return "No table needs attention."
    lines = [
        f"- [{row.table}]({partition_page(health_key, row.table)}): {row.state.value}"
        + (", quarantined" if row.quarantined else "")
        + (", refused by its Spark's Iceberg runtime" if row.refused else "")
        + (f" ({', '.join(row.issues)})" if row.issues else "")
        for row in summary.attention
    ]
    return "\n".join(lines)


def _attention_row(row: TableAttention, health_key: dg.AssetKey) -> dict[str, Any]:
    """Size as text to read and `data_bytes` as a number to sort by (-1 when never measured)."""
    return {
        "table": row.table,
        "state": row.state.value,
        "issues": ", ".join(row.issues),
        "size": "-" if row.data_bytes is None else format_bytes(row.data_bytes),
        "data_bytes": -1 if row.data_bytes is None else row.data_bytes,
        "quarantined": row.quarantined,
        "last_error": row.last_error or "",
        "refused": row.refused or "",
        "page": partition_page(health_key, row.table),
    }


def fleet_metadata(
    summary: FleetSummary,
    metrics_path: str,
    health_key: dg.AssetKey,
    accuracy: Sequence[PredictionAccuracy] = (),
) -> Metadata:
    """The fleet at a glance; `accuracy` is planned against done by action over the recorded runs of
    every table (the maintenance history's predictions); each table links to its page of the
    deployment's `table_health` (`health_key`)."""
    quarantined = [{"table": p, "last_error": e} for p, e in sorted(summary.quarantined.items())]
    return {
        SUMMARY: dg.MetadataValue.md(fleet_markdown(summary)),
        NEEDS_ATTENTION: table(
            _ATTENTION_COLUMNS, [_attention_row(row, health_key) for row in summary.attention]
        ),
        ATTENTION_PAGES: dg.MetadataValue.md(attention_pages_markdown(summary, health_key)),
        "tables": dg.MetadataValue.int(summary.tables),
        **{f"tables_{s.value}": dg.MetadataValue.int(summary.count(s)) for s in HealthState},
        "maintenance_queued": dg.MetadataValue.int(summary.maintenance_queued),
        "maintenance_running": dg.MetadataValue.int(summary.maintenance_running),
        "quarantined_tables": dg.MetadataValue.int(len(summary.quarantined)),
        "quarantined": table([("table", "string"), ("last_error", "string")], quarantined),
        "conflicting": table(
            [("table", "string"), ("conflicts", "string")],
            [{"table": p, "conflicts": c} for p, c in sorted(summary.conflicting.items())],
        ),
        "paused_by_breakers": table(
            [("table", "string"), ("breakers", "string")],
            [{"table": p, "breakers": r} for p, r in sorted(summary.paused_by_breakers.items())],
        ),
        "files_reclaimed_total": dg.MetadataValue.int(summary.files_reclaimed_total),
        **byte_count("bytes_reclaimed_total", summary.bytes_reclaimed_total),
        "prometheus_file": dg.MetadataValue.path(metrics_path),
        "prediction_accuracy": table(
            _ACCURACY_COLUMNS,
            [{name: getattr(row, name) for name, _ in _ACCURACY_COLUMNS} for row in accuracy],
        ),
        **record(FLEET_JSON, summary.model_dump(mode="json")),
    }


def decode_fleet(metadata: Mapping[str, Any]) -> FleetSummary | None:
    return decode_model(metadata, FLEET_JSON, FleetSummary)
