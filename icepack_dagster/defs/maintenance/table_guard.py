"""A partition key must name a table discovery would manage before maintenance touches anything.

The Materialize dialog's "Add partition" lets a person type any key into the `iceberg_tables`
partitions; a typo would otherwise plan and run against a table that was never discovered. A key is
refused when it is not a table key, names a catalog that is not configured, falls outside the
include/exclude patterns, or names no table in its catalog that icepack ever measured. A table measured
before and dropped since is not refused: maintenance reports it as `table_gone`.
"""

from __future__ import annotations

import dagster as dg

from icepack_dagster.defs.partitions import table_key
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import InvalidTableIdentifierError


def _refusal(engine: Engine, partition: str) -> tuple[TableKey | None, str]:
    try:
        key = table_key(partition)
    except InvalidTableIdentifierError as error:
        return None, str(error)
    reason = engine.unmanaged_reason(key)
    never_measured = partition not in engine.facts.measured([partition])
    if reason is None and never_measured and not engine.table_exists(key):
        reason = f"catalog {key.catalog!r} has no such table, and icepack never measured it"
    return key, reason or ""


def discovered_table(context: dg.AssetExecutionContext, engine: Engine) -> TableKey:
    """The run's table, or `dg.Failure` (no retry) naming the partition key and why it is refused."""
    partition = context.partition_key
    key, reason = _refusal(engine, partition)
    if key is not None and not reason:
        return key
    raise dg.Failure(
        description=f"partition {partition!r} is not a discovered table: {reason}. Nothing was read or "
        "changed. Tables become iceberg_tables partitions through the discovery sensor; a partition "
        "added by hand is not one.",
        metadata={"partition": dg.MetadataValue.text(partition)},
        allow_retries=False,
    )
