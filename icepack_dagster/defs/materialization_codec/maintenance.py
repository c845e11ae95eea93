"""`maintained_table` metadata: a short summary (the outcome, what changed, sizes to read), the SQL that
ran in its own entry (each session setting once, one argument a line), numbers to plot, and the report
record the fleet summary reads back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from icepack_dagster.defs.materialization_codec.recommendation import history_metadata
from icepack_dagster.defs.materialization_codec.records import (
    BYTES_RECLAIMED,
    FILES_RECLAIMED,
    OUTCOME,
    REPORT_JSON,
    SQL,
    SUMMARY,
    Metadata,
    byte_count,
    decode_model,
    record,
    table,
)
from icepack_dagster.domain.health.judging import format_bytes
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.outcomes.maintenance_impact import MaintenanceImpact, maintenance_impact
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.sql.display import readable_sql


def _impact_numbers(impact: MaintenanceImpact) -> Metadata:
    numbers: Metadata = {
        "duration_seconds": dg.MetadataValue.float(round(impact.duration_seconds, 3)),
        FILES_RECLAIMED: dg.MetadataValue.int(impact.files_reclaimed),
        **byte_count(BYTES_RECLAIMED, impact.bytes_reclaimed),
        "snapshots_expired": dg.MetadataValue.int(impact.snapshots_expired),
        "orphan_files_removed": dg.MetadataValue.int(impact.orphan_files_removed),
    }
    for name, (before, after) in impact.before_after.items():
        numbers[f"{name}_before"] = dg.MetadataValue.int(before)
        numbers[f"{name}_after"] = dg.MetadataValue.int(after)
    return numbers


def _change(name: str, before: int, after: int) -> str:
    if name.endswith("bytes"):
        label = name.replace("_bytes", " size").replace("_", " ")
        return f"- {label}: {format_bytes(before)} → {format_bytes(after)}"
    return f"- {name.replace('_', ' ')}: {before} → {after}"


def maintenance_markdown(report: MaintenanceReport, impact: MaintenanceImpact) -> str:
    lines = [f"**{report.outcome}** in {impact.duration_seconds:.1f} s", ""]
    lines += [_change(name, before, after) for name, (before, after) in impact.before_after.items()]
    if impact.bytes_reclaimed or impact.files_reclaimed:
        lines.append(f"- reclaimed: {impact.files_reclaimed} files, {format_bytes(impact.bytes_reclaimed)}")
    return "\n".join(lines)


def sql_markdown(report: MaintenanceReport) -> str | None:
    """The statements as a `sql` block: each session setting once, long calls one argument a line.
    Its own entry, so a long script never pushes the summary into a collapsed "[Show Markdown]"."""
    statements = readable_sql(s for r in report.results for s in r.statements)
    return "\n".join(["```sql", *(f"{s};" for s in statements), "```"]) if statements else None


def maintenance_metadata(report: MaintenanceReport, history: TableHistory) -> Metadata:
    impact = maintenance_impact(report)
    rows = [
        {"action": r.action.value, "status": r.status, "seconds": round(r.duration_seconds, 3),
         "error": r.error or ""}
        for r in report.results
    ]
    sql = sql_markdown(report)
    return {
        SUMMARY: dg.MetadataValue.md(maintenance_markdown(report, impact)),
        **({SQL: dg.MetadataValue.md(sql)} if sql else {}),
        OUTCOME: dg.MetadataValue.text(report.outcome),
        "actions": table([("action", "string"), ("status", "string"), ("seconds", "float"),
                          ("error", "string")], rows),
        **_impact_numbers(impact),
        **history_metadata(history),
        **record(REPORT_JSON, report.model_dump(mode="json")),
    }


def decode_report(metadata: Mapping[str, Any]) -> MaintenanceReport | None:
    return decode_model(metadata, REPORT_JSON, MaintenanceReport)


