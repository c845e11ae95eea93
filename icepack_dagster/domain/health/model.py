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

    # The states are ordered differently for different purposes; each order is named by its purpose.

    @property
    def severity(self) -> int:
        """How bad the state is, to find a table's worst: unknown is worse than critical (nothing
        measured about the table can be trusted)."""
        return _SEVERITY[self]

    @property
    def plot_value(self) -> int:
        """The state as a number to plot: -1 unknown, 0 healthy, 1 warning, 2 critical (the `state_rank`
        metadata and the `icepack_table_health` metric), so unknown sits apart below healthy."""
        return _PLOT_VALUE[self]

    @property
    def launch_urgency(self) -> int:
        """How urgently the maintenance sensor launches a table in this state: critical before warning;
        0 for the states never maintained automatically (healthy, and unknown: nothing to plan on)."""
        return _LAUNCH_URGENCY[self]

    @property
    def attention_order(self) -> int:
        """Where a person finds a table in this state in the fleet's list: critical, unknown, warning,
        healthy (an unknown table needs a look before a warning does)."""
        return _ATTENTION_ORDER[self]


_SEVERITY = {
    HealthState.HEALTHY: 0, HealthState.WARNING: 1,
    HealthState.CRITICAL: 2, HealthState.UNKNOWN: 3,
}
_PLOT_VALUE = {
    HealthState.UNKNOWN: -1, HealthState.HEALTHY: 0,
    HealthState.WARNING: 1, HealthState.CRITICAL: 2,
}
_LAUNCH_URGENCY = {
    HealthState.HEALTHY: 0, HealthState.UNKNOWN: 0,
    HealthState.WARNING: 1, HealthState.CRITICAL: 2,
}
_ATTENTION_ORDER = {
    HealthState.CRITICAL: 0, HealthState.UNKNOWN: 1,
    HealthState.WARNING: 2, HealthState.HEALTHY: 3,
}


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
