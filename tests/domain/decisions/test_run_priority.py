"""A maintenance run's `dagster/priority` is its most urgent table's launch urgency: critical 2,
warning 1, an orphan sweep of a healthy table 0 (Dagster's default, what Materialize and backfills get)."""

from __future__ import annotations

from icepack_dagster.domain.decisions.maintenance_selection import Decision, run_priority
from icepack_dagster.domain.health.model import HealthState


def _decision(state: HealthState) -> Decision:
    return Decision(partition=f"lake.ns.{state.value}", verdict="launch", reason="r", health_storage_id=1,
                    urgency=state.launch_urgency)


def test_priority_follows_the_most_urgent_table() -> None:
    assert run_priority([_decision(HealthState.CRITICAL)]) == 2
    assert run_priority([_decision(HealthState.WARNING)]) == 1
    assert run_priority([_decision(HealthState.HEALTHY)]) == 0
    assert run_priority([_decision(HealthState.WARNING), _decision(HealthState.CRITICAL)]) == 2
