"""The gates a recommendation passes before any gain is estimated: the table's own (unknown health,
disabled, quarantined, no snapshot on any ref) and each action's (cadence, a last run without effect on
the same table state, gc.enabled for destructive actions; an action swept for on its own cadence runs
no more often than that)."""

from __future__ import annotations

from datetime import UTC, datetime

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.health.model import HealthState, TableHealth
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.table.status import TableStatus


def utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def gc_disabled_reason(value: str | None) -> str:
    """Why destructive actions are skipped on a table whose gc.enabled Iceberg reads as false."""
    return f"gc.enabled={value!r} on the table, which Iceberg reads as false: destructive actions never run"


def table_gate(status: TableStatus, health: TableHealth, policy: Policy, history: TableHistory) -> str | None:
    """Why no action at all is recommended on this table, or None."""
    if health.state is HealthState.UNKNOWN:
        return f"health unknown: {health.error or 'status could not be measured'}"
    if not policy.enabled:
        return "table disabled"
    if history.quarantined or history.consecutive_failures >= policy.quarantine_after_failures:
        return (
            f"quarantined after {history.consecutive_failures} consecutive failures: "
            f"{history.last_error or 'no error recorded'}"
        )
    if status.snapshot_count == 0:
        return "table has no snapshot"
    return None


def cadence_gate(
    action: MaintenanceAction, policy: Policy, history: TableHistory, now: datetime
) -> str | None:
    cadence = max(policy.cadence_hours, definition(action).sweep_cadence_hours or 0.0)
    last = history.last_succeeded.get(action)
    if last is None:
        return None
    elapsed = max(0.0, (now - utc(last)).total_seconds() / 3600)
    if elapsed >= cadence:
        return None
    return f"cadence not elapsed: last ran {elapsed:.1f} h ago, cadence {cadence:g} h"


def no_effect_gate(action: MaintenanceAction, status: TableStatus, history: TableHistory) -> str | None:
    """An action whose last run on this very snapshot did nothing would do nothing again."""
    if status.snapshot_id is None or history.no_effect_on.get(action) != status.snapshot_id:
        return None
    return (
        f"its last run on this same table state (snapshot {status.snapshot_id}) had no effect; "
        "not repeated until the table changes"
    )
