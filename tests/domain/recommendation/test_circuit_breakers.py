"""Contract: the write-amplification breaker pauses a table's rewrites (not its expiry or orphan
removal) once its rewrites read more than 10x its live bytes in the last day, and says so with the
numbers and how the pause ends (the window moving on, or a person's release, after which the history
counts from zero: tests/store/test_history_store.py)."""

from __future__ import annotations

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.recommendation.circuit_breakers import amplification_breaker
from icepack_dagster.domain.recommendation.recommender import recommend
from tests.factories import NOW, make_health, make_status

MiB = 1024**2
STATUS = make_status(
    live_data_bytes=100 * MiB, small_file_count=8, small_file_bytes=8 * MiB, live_data_files=10
)


def rewritten(size: int) -> TableHistory:
    return TableHistory(table="lake.ns.t", bytes_rewritten_24h=size)


def test_the_breaker_trips_above_ten_times_the_table_and_names_the_numbers() -> None:
    rewrite = MaintenanceAction.REWRITE_DATA_FILES
    assert amplification_breaker(rewrite, STATUS, rewritten(1000 * MiB)) is None
    tripped = amplification_breaker(rewrite, STATUS, rewritten(1001 * MiB))
    assert tripped is not None and tripped.startswith("circuit breaker (write amplification) tripped: ")
    assert "1001 MiB rewritten in the last 24 h, more than 10x the table's 100 MiB" in tripped
    assert "icepack quarantine release lake.ns.t" in tripped
    assert amplification_breaker(MaintenanceAction.EXPIRE_SNAPSHOTS, STATUS, rewritten(10**12)) is None


def test_a_tripped_breaker_shows_in_the_recommendation() -> None:
    health = make_health(HealthState.CRITICAL)
    paused = recommend(STATUS, health, Policy(), rewritten(10**12), NOW)
    reasons = {s.action: s.reason for s in paused.skipped}
    assert reasons[MaintenanceAction.REWRITE_DATA_FILES].startswith("circuit breaker (write amplification)")
    assert MaintenanceAction.REWRITE_DATA_FILES not in {a.action for a in paused.actions}
