"""Each managed table's maintenance history, judged by its own policy's quarantine threshold: what the
fleet summary and the alert sensor both read. The policy comes from the table's latest measured status
(its properties); a table not measured yet, or with an invalid policy, is judged by the default one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import dagster as dg

from icepack_dagster.defs.asset_keys import TABLE_STATUS
from icepack_dagster.defs.event_reads import latest_per_partition, metadata_of
from icepack_dagster.defs.materialization_codec import decode_status
from icepack_dagster.defs.partitions import table_key
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import InvalidPolicyError


def table_histories(
    engine: Engine, instance: dg.DagsterInstance, partitions: Sequence[str] | None = None
) -> Iterator[tuple[str, TableHistory, int]]:
    """(table, history, quarantine threshold) for `partitions` (default: every managed table); the
    histories in one fleet-wide read of the state database, not a few queries per table."""
    if partitions is None:
        partitions = list(instance.get_dynamic_partitions(engine.settings.platform.partitions_name))
    records = latest_per_partition(instance, TABLE_STATUS, list(partitions))
    statuses = {
        table_key(p): decode_status(metadata_of(records[p])) if p in records else None for p in partitions
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
