"""What one maintenance changed, in the few numbers people track: files and bytes before and after,
snapshots expired, orphans removed, duration. Derived from the engine's report; pure."""

from __future__ import annotations

from pydantic import Field

from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport

_TRACKED = ("data_files", "delete_files", "data_bytes", "manifests", "snapshots")


class MaintenanceImpact(FrozenModel):
    duration_seconds: float = Field(ge=0)
    before_after: dict[str, tuple[int, int]] = Field(
        default_factory=dict, description="metric -> (before the first action, after the last action)"
    )
    files_reclaimed: int = Field(ge=0, description="Live data and delete files fewer, plus orphans removed")
    bytes_reclaimed: int = Field(ge=0, description="Live data bytes the table no longer reads")
    snapshots_expired: int = Field(ge=0)
    orphan_files_removed: int = Field(ge=0)


def _first_and_last(report: MaintenanceReport, metric: str) -> tuple[int, int] | None:
    done = [r.impact for r in report.results if r.status == "succeeded"]
    befores = [getattr(i, f"{metric}_before") for i in done if getattr(i, f"{metric}_before") is not None]
    afters = [getattr(i, f"{metric}_after") for i in done if getattr(i, f"{metric}_after") is not None]
    if not befores or not afters:
        return None
    return befores[0], afters[-1]


def maintenance_impact(report: MaintenanceReport) -> MaintenanceImpact:
    before_after = {m: pair for m in _TRACKED if (pair := _first_and_last(report, m)) is not None}
    orphans = sum(r.impact.orphan_files_removed or 0 for r in report.results if r.status == "succeeded")
    expired = 0
    for result in report.results:
        impact = result.impact
        if definition(result.action).expires_snapshots and result.status == "succeeded":
            if impact.snapshots_before is not None and impact.snapshots_after is not None:
                expired += max(0, impact.snapshots_before - impact.snapshots_after)
    live_files = 0
    for metric in ("data_files", "delete_files"):
        if metric in before_after:
            before, after = before_after[metric]
            live_files += max(0, before - after)
    data_bytes = before_after.get("data_bytes")
    return MaintenanceImpact(
        duration_seconds=max(0.0, (report.finished_at - report.started_at).total_seconds()),
        before_after=before_after,
        files_reclaimed=live_files + orphans,
        bytes_reclaimed=max(0, data_bytes[0] - data_bytes[1]) if data_bytes else 0,
        snapshots_expired=expired,
        orphan_files_removed=orphans,
    )
