"""The fleet view: how many tables are in each health state, what maintenance is pending or running,
which tables are quarantined, and what maintenance reclaimed; as markdown for the UI and as Prometheus
text-format metrics for node-exporter's textfile collector."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from icepack_dagster.domain.health_model import HealthState, state_rank


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


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def prometheus_text(summary: FleetSummary) -> str:
    """Prometheus exposition format 0.0.4; one HELP and TYPE line per metric family."""
    out: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {_number(value)}" for labels, value in samples)

    family("icepack_tables", "gauge", "Managed Iceberg tables by health state.",
           [(f'{{state="{s.value}"}}', summary.count(s)) for s in HealthState])
    family("icepack_table_health", "gauge",
           "Health of each table: -1 unknown, 0 healthy, 1 warning, 2 critical.",
           [(f'{{table="{_label(p)}"}}', state_rank(s)) for p, s in sorted(summary.table_states.items())])
    family("icepack_maintenance_runs", "gauge", "Maintenance runs in flight by phase.",
           [('{phase="queued"}', summary.maintenance_queued),
            ('{phase="running"}', summary.maintenance_running)])
    family("icepack_quarantined_tables", "gauge", "Tables whose automatic maintenance is stopped.",
           [("", len(summary.quarantined))])
    family("icepack_reclaimed_files_total", "counter", "Files maintenance removed from tables.",
           [("", summary.files_reclaimed_total)])
    family("icepack_reclaimed_bytes_total", "counter", "Live data bytes maintenance removed from tables.",
           [("", summary.bytes_reclaimed_total)])
    family("icepack_fleet_summary_timestamp_seconds", "gauge", "When this summary was computed.",
           [("", summary.generated_at_epoch)])
    return "\n".join(out) + "\n"
