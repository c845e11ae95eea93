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
    policies: dict[TableKey, Policy] = {}
    for partition in partitions:
        key = table_key(partition)
        facts = measured.get(partition)
        policies[key] = _policy(engine, key, facts.status if facts is not None else None)
    histories = engine.histories(policies)
    for partition in partitions:
        key = table_key(partition)
        yield partition, histories[key], policies[key].quarantine_after_failures


def _policy(engine: Engine, key: TableKey, status: TableStatus | None) -> Policy:
    try:
        return engine.policy(key, status.properties).policy if status is not None else Policy()
    except InvalidPolicyError:
        return Policy()
