"""Plain-text rendering of engine results for people at a terminal (the CLI's non-JSON output)."""

from __future__ import annotations

from typing import Any

from icepack_dagster.domain.health.judging import format_bytes
from icepack_dagster.domain.health.model import TableHealth
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.outcomes.prediction import PredictionAccuracy
from icepack_dagster.domain.policy.layering import EffectivePolicy, explain_policy
from icepack_dagster.domain.recommendation.model import Recommendation
from icepack_dagster.domain.table.iceberg_properties import explain_iceberg_layer
from icepack_dagster.domain.table.statistics_freshness import RegisteredStatistics
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.domain.table.unreferenced_files import UnreferencedFiles

GROUPS_SHOWN = 20  # rewrite groups listed per action in text; --json has them all


def human_bytes(value: float | None) -> str:
    """The domain's byte format (the UI's sizes read the same); `-` for an unknown size."""
    return "-" if value is None else format_bytes(value)


def human_age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _rows(pairs: list[tuple[str, Any]]) -> str:
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in pairs)


def _carried(s: TableStatus) -> tuple[str, str, str]:
    """Small files, the as-of note of the size histogram, and partitions, as exact as the status is: a
    summary status gives bounds now and its figures as of the snapshot they were read at."""
    small = f"{s.small_file_count} under {human_bytes(s.small_file_threshold_bytes)}"
    if s.carried is None:
        return small, "", str(s.partition_count)
    c, at = s.carried, f"as of snapshot {s.manifests_read_at}"
    since = f"{c.data_files_added} data files appended since"
    return (
        f"{c.small_files[0]}-{c.small_files[1]} under {human_bytes(s.small_file_threshold_bytes)} "
        f"({s.small_file_count} {at}, {since})",
        f" ({at}, {since})",
        f"{c.partitions[0]}-{c.partitions[1]} ({s.partition_count} {at})",
    )


def format_status(name: str, s: TableStatus) -> str:
    histogram = ", ".join(f"{b.label}: {b.file_count}" for b in s.file_size_histogram if b.file_count)
    small, sizes_at, partitions = _carried(s)
    source = "" if s.depth == "full" else ", from snapshot summaries"
    return f"{name}  (format v{s.format_version}, snapshot {s.snapshot_id}{source})\n" + _rows(
        [
            ("live data files", f"{s.live_data_files} ({human_bytes(s.live_data_bytes)})"),
            ("small files", small),
            ("file sizes", (histogram or "-") + sizes_at),
            (
                "delete files",
                f"{s.live_delete_files} ({s.leftover_position_delete_files} position, "
                f"{s.live_deletion_vectors} deletion vectors, {s.live_equality_delete_files} equality)",
            ),
            ("deleted rows", f"{s.deletion_vector_records} by deletion vectors ({s.deleted_row_share:.1%})"),
            ("records", s.total_records),
            ("manifests", f"{s.manifest_count} ({human_bytes(s.manifest_bytes)})"),
            ("partitions", partitions),
            ("snapshots", f"{s.snapshot_count}, oldest {human_age(s.oldest_snapshot_age_seconds)} old"),
            ("metadata log", s.metadata_log_entries),
            ("branches / tags", f"{s.branch_count} / {s.tag_count}"),
            ("statistics", _statistics(s)),
        ]
    )


def _statistics(s: TableStatus) -> str:
    """Which snapshot main's table and partition statistics were computed for, and how far behind."""
    if s.statistics is None:
        return "-"

    def one(kind: str, facts: RegisteredStatistics | None) -> str:
        if facts is None:
            return f"{kind} none"
        return f"{kind} of snapshot {facts.snapshot_id}, {facts.commits_behind} commits behind"

    facts = s.statistics
    return f"{one('table', facts.table_statistics)}; {one('partition', facts.partition_statistics)}"


def format_health(name: str, h: TableHealth) -> str:
    lines = [f"{name}: {h.state.value.upper()}"]
    if h.error:
        lines.append(f"  {h.error}")
    lines += [f"  [{i.severity.value}] {i.code}: {i.message}" for i in h.issues]
    return "\n".join(lines)


def format_recommendation(name: str, r: Recommendation) -> str:
    lines = [f"{name}: {len(r.actions)} action(s) recommended, priority {r.priority:.2f}"]
    for a in r.actions:
        options = ", ".join(f"{k}={v}" for k, v in a.options.items())
        lines.append(f"  + {a.action.value}: {a.reason}" + (f"  ({options})" if options else ""))
        groups = a.prediction.groups if a.prediction else ()
        for group in groups[:GROUPS_SHOWN]:
            lines.append(
                f"      {group.partition}: {group.files_in} files ({human_bytes(group.bytes_in)}) -> "
                f"{group.files_out}"
            )
        if len(groups) > GROUPS_SHOWN:
            lines.append(f"      ... and {len(groups) - GROUPS_SHOWN} more groups (--json lists all)")
    lines += [f"  - {s.action.value}: {s.reason}" for s in r.skipped]
    return "\n".join(lines)


def format_unreferenced(name: str, u: UnreferencedFiles, shown: int = 20) -> str:
    """The summary line, then the files, old enough for orphan removal first."""
    lines = [u.summary().replace(f"table {u.table}", name, 1)]
    for kind, files in (("removable", u.removable), ("young", u.young)):
        lines += [f"  {kind:9}  {human_bytes(f.size_bytes):>10}  {f.location}" for f in files[:shown]]
        if len(files) > shown:
            lines.append(f"  ... and {len(files) - shown} more {kind} file(s)")
    return "\n".join(lines)


def format_policy(name: str, effective: EffectivePolicy, explain: bool) -> str:
    """The effective policy; with `explain`, each value's layer and the table's own Iceberg properties."""
    rows = explain_policy(effective)
    iceberg = explain_iceberg_layer(effective.iceberg) if explain else []
    width = max(len(field) for field, _, _ in [*rows, *iceberg])
    lines = [f"{name}: effective policy"]
    for field, value, source in rows:
        lines.append(f"  {field.ljust(width)}  {value}" + (f"   <- {source}" if explain else ""))
    if iceberg:
        lines.append("table's Iceberg properties (Iceberg honours them whatever icepack does):")
        lines += [f"  {field.ljust(width)}  {value}   <- {source}" for field, value, source in iceberg]
    return "\n".join(lines)


def format_report(name: str, report: MaintenanceReport) -> str:
    headline = report.outcome.replace("_", " ")
    if report.table_gone:
        headline += " (no such table in its catalog; nothing was run)"
    lines = [f"{name}: {headline}"]
    for r in report.results:
        lines.append(f"  {r.status:<9} {r.action.value}  ({r.duration_seconds:.1f} s)")
        if r.reason:
            lines.append(f"            {r.reason}")
        if r.error:
            lines.append(f"            error: {r.error}")
        judged = r.predicted_actual
        if judged is not None and judged.done is not None and r.status != "no_effect":
            lines.append(
                f"            predicted {judged.planned.files_in} files in -> {judged.planned.files_out}, "
                f"done {judged.done.files_in} -> {judged.done.files_out}"
            )
        if r.status == "dry_run":
            lines += [f"            {statement}" for statement in r.statements]
        impact = r.impact
        if impact.data_files_before is not None and impact.data_files_after is not None:
            lines.append(
                f"            data files {impact.data_files_before} -> {impact.data_files_after}, "
                f"delete files {impact.delete_files_before} -> {impact.delete_files_after}, "
                f"manifests {impact.manifests_before} -> {impact.manifests_after}, "
                f"snapshots {impact.snapshots_before} -> {impact.snapshots_after}"
            )
    return "\n".join(lines)


def report_json(name: str, report: MaintenanceReport) -> dict[str, Any]:
    """The `icepack maintain --json` contract: {table, outcome, results: [{action, status, impact, ...}]}."""
    return {
        "table": name,
        "outcome": report.outcome,
        "results": [r.model_dump(mode="json") for r in report.results],
    }


def format_accuracy(rows: tuple[PredictionAccuracy, ...]) -> str:
    """Planned against done per action: files in, files out, bytes in, and runs that had no effect."""
    if not rows:
        return "no predictions recorded yet"
    lines = ["action                          runs  no effect  files in (planned/done)  files out  bytes in"]
    for row in rows:
        lines.append(
            f"{row.action:<30} {row.runs:>5}  {row.no_effect_runs:>9}  "
            f"{row.planned_files_in:>11} / {row.done_files_in:<10}  "
            f"{row.planned_files_out} / {row.done_files_out}  "
            f"{human_bytes(row.planned_bytes_in)} / {human_bytes(row.done_bytes_in)}"
        )
    return "\n".join(lines)
