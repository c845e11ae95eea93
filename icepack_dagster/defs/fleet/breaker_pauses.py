"""The tables whose rewrites a circuit breaker pauses, for the fleet view: judged from the histories the
fleet summary already read and the latest measured status in the tables' facts (store/table_facts.py),
for only the tables that rewrote something in the breakers' window (the others cannot have tripped
one). The fleet's daily budget is one line of the summary, not a row per table."""

from __future__ import annotations

from collections.abc import Mapping

from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.recommendation.circuit_breakers import breaker_pauses
from icepack_dagster.store.table_facts import MeasuredTable


def paused_by_breakers(
    measured: Mapping[str, MeasuredTable], histories: Mapping[str, TableHistory]
) -> dict[str, str]:
    """Partition -> the reasons of the breakers pausing its rewrites, among `histories`."""
    rewriting = [partition for partition, history in histories.items() if history.recent_rewrites]
    paused = {}
    for partition in rewriting:
        facts = measured.get(partition)
        status = facts.status if facts is not None else None
        reasons = breaker_pauses(status, histories[partition], None) if status is not None else {}
        if reasons:
            paused[partition] = "; ".join(reasons.values())
    return paused
