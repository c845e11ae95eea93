"""The fleet view: how many tables are in each health state, what maintenance is pending or running,
which tables are quarantined, and what maintenance reclaimed; as markdown for the UI (the Dagster
layer turns it into Prometheus metrics: defs/fleet/metrics.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from icepack_dagster.domain.health_model import HealthState


class FleetSummary(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    generated_at_epoch: float = Field(ge=0)
    tables: int = Field(ge=0)
    by_state: dict[HealthState, int] = Field(default_factory=dict)
    table_states: dict[str, HealthState] = Field(default_factory=dict, description="partition -> state")
    maintenance_queued: int = Field(default=0, ge=0)
    maintenance_running: int = Field(default=0, ge=0)
    quarantined: dict[str, str] = Field(default_factory=dict, description="partition -> last error")
    files_reclaimed_total: int = Field(default=0, ge=0)
    bytes_reclaimed_total: int = Field(default=0, ge=0)
    maintenance_events_seen: int = Field(default=0, ge=0, description="Storage id counted up to")

    def count(self, state: HealthState) -> int:
        return self.by_state.get(state, 0)


def fleet_markdown(summary: FleetSummary) -> str:
    lines = [
        f"**{summary.tables} tables**: "
        + ", ".join(f"{summary.count(s)} {s.value}" for s in HealthState),
        "",
        f"Maintenance: {summary.maintenance_running} running, {summary.maintenance_queued} queued.",
        f"Reclaimed so far: {summary.files_reclaimed_total} files, {summary.bytes_reclaimed_total} bytes.",
    ]
    worrying = (HealthState.CRITICAL, HealthState.UNKNOWN)
    attention = sorted(p for p, s in summary.table_states.items() if s in worrying)
    if attention:
        lines += ["", "Needs attention:"]
        lines += [f"- `{p}`: {summary.table_states[p].value}" for p in attention[:50]]
    if summary.quarantined:
        lines += ["", f"**Quarantined ({len(summary.quarantined)})**, release with "
                  "`icepack quarantine release TABLE`:"]
        lines += [f"- `{p}`: {error}" for p, error in sorted(summary.quarantined.items())[:50]]
    return "\n".join(lines)
