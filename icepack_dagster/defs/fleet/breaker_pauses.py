"""The tables whose rewrites a circuit breaker pauses, for the fleet view: judged from the histories the
fleet summary already read and the latest measured status of only the tables that rewrote something in
the breakers' window (the others cannot have tripped one). The fleet's daily budget is one line of the
summary, not a row per table."""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from icepack_dagster.defs.asset_keys import TABLE_STATUS
from icepack_dagster.defs.event_reads import latest_per_partition, metadata_of
from icepack_dagster.defs.materialization_codec import decode_status
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.recommendation.circuit_breakers import breaker_pauses


def paused_by_breakers(instance: dg.DagsterInstance, histories: Mapping[str, TableHistory]) -> dict[str, str]:
    """Partition -> the reasons of the breakers pausing its rewrites, among `histories`."""
    rewriting = [partition for partition, history in histories.items() if history.recent_rewrites]
    paused = {}
    for partition, record in latest_per_partition(instance, TABLE_STATUS, rewriting).items():
        status = decode_status(metadata_of(record))
        reasons = breaker_pauses(status, histories[partition], None) if status is not None else {}
        if reasons:
            paused[partition] = "; ".join(reasons.values())
    return paused
