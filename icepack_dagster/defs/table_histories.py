"""Each managed table's maintenance history, judged by its own policy's quarantine threshold: what the
fleet summary and the alert sensor both read. The policy comes from the table's latest measured status
(its properties, as recorded in the table's facts); a table not measured yet, or with an invalid policy,
is judged by the default one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import dagster as dg

from icepack_dagster.defs.partitions import table_key
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import InvalidPolicyError
from icepack_dagster.store.table_facts import MeasuredTable


def table_histories(
    engine: Engine,
    instance: dg.DagsterInstance,
    partitions: Sequence[str] | None = None,
    measured: Mapping[str, MeasuredTable] | None = None,
) -> Iterator[tuple[str, TableHistory, int]]:
    """(table, history, quarantine threshold) for `partitions` (default: every managed table); the
    histories in one fleet-wide read of the state database, not a few queries per table. `measured`:
    the tables' facts when the caller has read them already."""
    if partitions is None:
        partitions = list(instance.get_dynamic_partitions(engine.settings.platform.partitions_name))
    if measured is None:
        measured = engine.facts.measured(partitions)
    statuses = {
        table_key(p): facts.status if (facts := measured.get(p)) is not None else None for p in partitions
    }
    judged = histories_of(engine, statuses)
    for partition in partitions:
        history, threshold = judged[table_key(partition)]
        yield partition, history, threshold


def histories_of(
    engine: Engine, statuses: Mapping[TableKey, TableStatus | None]
) -> dict[TableKey, tuple[TableHistory, int]]:
    """(history, quarantine threshold) of each table, by the policy of the status given (the default
    policy without one), in one fleet-wide read."""
    policies = {key: _policy(engine, key, status) for key, status in statuses.items()}
    histories = engine.histories(policies)
    return {key: (histories[key], policies[key].quarantine_after_failures) for key in policies}


def _policy(engine: Engine, key: TableKey, status: TableStatus | None) -> Policy:
    try:
        return engine.policy(key, status.properties).policy if status is not None else Policy()
    except InvalidPolicyError:
        return Policy()
