"""Each managed table's maintenance history, judged by its own policy's quarantine threshold: what the
fleet summary and the alert sensor both read. The policy comes from the table's latest measured status
(its properties); a table not measured yet, or with an invalid policy, is judged by the default one."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

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
    statuses = latest_per_partition(instance, TABLE_STATUS, list(partitions))
    policies: dict[TableKey, Policy] = {}
    for partition in partitions:
        key = table_key(partition)
        status = decode_status(metadata_of(statuses[partition])) if partition in statuses else None
        policies[key] = _policy(engine, key, status)
    histories = engine.histories(policies)
    for partition in partitions:
        key = table_key(partition)
        yield partition, histories[key], policies[key].quarantine_after_failures


def _policy(engine: Engine, key: TableKey, status: TableStatus | None) -> Policy:
    try:
        return engine.policy(key, status.properties).policy if status is not None else Policy()
    except InvalidPolicyError:
        return Policy()
