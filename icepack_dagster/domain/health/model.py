"""Health: a policy-independent judgement of one table's status. Field names are a public contract
(`icepack health --json`, Dagster metadata, the maintenance sensor reads `state` back)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel


class HealthState(StrEnum):
    """Overall state. `unknown` means status could not be measured (catalog outage, unreadable
    metadata): never treated as healthy, never maintained automatically."""

    HEALTHY = "healthy"
    WARNING = "warning"
    CRITICAL = "critical"
    UNKNOWN = "unknown"


_STATE_RANK = {
    HealthState.UNKNOWN: -1, HealthState.HEALTHY: 0, HealthState.WARNING: 1, HealthState.CRITICAL: 2
}


def state_rank(state: HealthState) -> int:
    """The state as a number to plot and compare: -1 unknown, 0 healthy, 1 warning, 2 critical (the
    `state_rank` metadata and the `icepack_table_health` metric)."""
    return _STATE_RANK[state]


class Severity(StrEnum):
    WARNING = "warning"
    CRITICAL = "critical"


class HealthIssue(FrozenModel):
    """One problem: a stable machine code, its severity, the metric and threshold it crossed, and a
    sentence a person understands."""

    code: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    severity: Severity
    metric: str
    value: float
    threshold: float
    message: str


class TableHealth(FrozenModel):
    table: str
    state: HealthState
    issues: tuple[HealthIssue, ...] = ()
    error: str | None = Field(default=None, description="Why the state is unknown, when it is")
