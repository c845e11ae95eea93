"""The fleet view: how many tables are in each health state, what maintenance is pending or running,
which tables need attention (unhealthy or quarantined, most urgent first, with their size), which a
circuit breaker pauses and the daily rewrite budget, and what maintenance reclaimed; as markdown for
the UI (the Dagster layer turns it into a sortable table and into Prometheus metrics:
defs/fleet/metrics.py)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.health.judging import format_bytes
from icepack_dagster.domain.health.model import HealthState, TableHealth

ATTENTION_ROWS = 500  # the most urgent tables listed; the counts by state cover every table


class TableAttention(FrozenModel):
    """One table a person should look at: unhealthy (warning, critical, unknown), quarantined, or refused
    by its Spark's Iceberg runtime."""

    table: str = Field(description="Partition key: catalog.namespace.table")
    state: HealthState
    issues: tuple[str, ...] = Field(default=(), description="Issue codes of its latest health")
    data_bytes: int | None = Field(default=None, ge=0, description="Live data bytes; None when unmeasured")
    quarantined: bool = False
    last_error: str | None = Field(default=None, description="Why it is quarantined, when it is")
    refused: str | None = Field(
        default=None, description="Why its latest maintenance was refused by the Spark's Iceberg runtime"
    )


class FleetSummary(FrozenModel):
    generated_at_epoch: float = Field(ge=0)
    tables: int = Field(ge=0)
    by_state: dict[HealthState, int] = Field(default_factory=dict)
    table_states: dict[str, HealthState] = Field(default_factory=dict, description="partition -> state")
    maintenance_queued: int = Field(default=0, ge=0)
    maintenance_running: int = Field(default=0, ge=0)
    quarantined: dict[str, str] = Field(default_factory=dict, description="partition -> last error")
    conflicting: dict[str, str] = Field(
        default_factory=dict,
        description="partition -> its conflicts with concurrent writers, for tables whose maintenance "
        "keeps conflicting",
    )
    paused_by_breakers: dict[str, str] = Field(
        default_factory=dict, description="partition -> why a circuit breaker pauses its rewrites"
    )
    rewrite_budget: str | None = Field(
        default=None, description="The deployment's daily rewrite budget and today's total, when one is set"
    )
    files_reclaimed_total: int = Field(default=0, ge=0)
    bytes_reclaimed_total: int = Field(default=0, ge=0)
    attention: tuple[TableAttention, ...] = Field(
        default=(),
        description=f"Unhealthy or quarantined tables, most urgent first, at most {ATTENTION_ROWS}",
    )
    attention_total: int = Field(default=0, ge=0, description="Tables needing attention, listed or not")

    def count(self, state: HealthState) -> int:
        return self.by_state.get(state, 0)


def needing_attention(
    states: Mapping[str, HealthState],
    healths: Mapping[str, TableHealth],
    data_bytes: Mapping[str, int],
    quarantined: Mapping[str, str],
    refused: Mapping[str, str] | None = None,
) -> list[TableAttention]:
    """Every unhealthy, quarantined or runtime-refused table: critical, then unknown, then warning
    (healthy ones last), the biggest first within a state, so the top of the list is where work pays
    most."""
    refused = refused or {}
    flagged = {p for p, s in states.items() if s is not HealthState.HEALTHY}
    tables = sorted(flagged | set(quarantined) | set(refused))
    rows = [
        TableAttention(
            table=table,
            state=states.get(table, HealthState.UNKNOWN),
            issues=tuple(i.code for i in healths[table].issues) if table in healths else (),
            data_bytes=data_bytes.get(table),
            quarantined=table in quarantined,
            last_error=quarantined.get(table),
            refused=refused.get(table),
        )
        for table in tables
    ]
    return sorted(rows, key=lambda r: (r.state.attention_order, -(r.data_bytes or 0), r.table))


def fleet_markdown(summary: FleetSummary) -> str:
    lines = [
        f"**{summary.tables} tables**: "
        + ", ".join(f"{summary.count(s)} {s.value}" for s in HealthState),
        "",
        f"Maintenance: {summary.maintenance_running} running, {summary.maintenance_queued} queued.",
        f"Reclaimed so far: {summary.files_reclaimed_total} files, "
        f"{format_bytes(summary.bytes_reclaimed_total)}.",
    ]
    if summary.attention_total:
        listed = len(summary.attention)
        more = f" (the {listed} most urgent listed)" if listed < summary.attention_total else ""
        lines += ["", f"**{summary.attention_total} table(s) need attention**{more}: see `needs_attention`."]
    refused = sum(1 for row in summary.attention if row.refused)
    if refused:
        lines += ["", f"**{refused} refused** by their Spark's Iceberg runtime (too old for the table or "
                  "an option): see `refused` in `needs_attention`."]
    if summary.quarantined:
        lines += ["", f"**{len(summary.quarantined)} quarantined**: release with "
                  "`icepack quarantine release TABLE` or the `release_quarantine` job."]
    if summary.paused_by_breakers:
        lines += ["", f"**{len(summary.paused_by_breakers)} paused by a circuit breaker**: see "
                  "`paused_by_breakers`; each lifts as its reason says, or with `icepack quarantine release "
                  "TABLE` or the `release_quarantine` job."]
    if summary.rewrite_budget:
        lines += ["", f"Daily rewrite budget: {summary.rewrite_budget}."]
    if summary.conflicting:
        lines += ["", f"**{len(summary.conflicting)} keep conflicting with concurrent writers** (not "
                  "failures): see `conflicting`; each table's recommendation names its commit cadence and "
                  "what would help (a maintenance window, hot partitions left out)."]
    return "\n".join(lines)
