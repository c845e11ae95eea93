"""`table_health`: each table's health judged from its latest `table_status` materialization."""

import dagster as dg

from icepack_dagster.defs.asset_keys import TABLE_STATUS
from icepack_dagster.defs.assets.table_status import table_status
from icepack_dagster.defs.event_reads import latest_per_partition, metadata_of
from icepack_dagster.defs.metadata import decode_status, decode_status_error, health_metadata
from icepack_dagster.defs.partitions import ICEBERG_TABLES
from icepack_dagster.defs.resources import IcepackResource
from icepack_dagster.domain.health import unknown_health
from icepack_dagster.domain.health_model import HealthState, TableHealth
from icepack_dagster.engine import Engine

_NO_STATUS = "no table_status materialization yet: materialize table_status for this table first"


def _judge(engine: Engine, partition: str, record: dg.EventLogRecord | None) -> TableHealth:
    if record is None:
        return unknown_health(partition, _NO_STATUS)
    metadata = metadata_of(record)
    status = decode_status(metadata)
    if status is None:
        return unknown_health(partition, decode_status_error(metadata) or "the status record is unreadable")
    return engine.health(status)


@dg.asset(
    partitions_def=ICEBERG_TABLES,
    backfill_policy=dg.BackfillPolicy.single_run(),
    deps=[table_status],
    group_name="iceberg_tables",
    kinds={"iceberg"},
)
def table_health(context: dg.AssetExecutionContext, icepack: IcepackResource) -> dg.MaterializeResult:
    """Healthy, warning, critical or unknown, with each issue explained; the maintenance sensor reads it.

    Grain: one materialization per table per health sync, judged from the table's latest status. A
    table whose status could not be measured is `unknown` (never healthy) and carries the error.
    """
    partitions = context.partition_keys
    statuses = latest_per_partition(context.instance, TABLE_STATUS, partitions)
    counts = dict.fromkeys(HealthState, 0)
    for partition in partitions:
        record = statuses.get(partition)
        health = _judge(icepack.engine, partition, record)
        counts[health.state] += 1
        metadata = health_metadata(health)
        metadata["status"] = dg.MetadataValue.asset(TABLE_STATUS)
        if record is not None:
            metadata["status_event"] = dg.MetadataValue.int(record.storage_id)
        context.add_asset_metadata(metadata, partition_key=partition)
    context.log.info(", ".join(f"{n} {state.value}" for state, n in counts.items() if n))
    return dg.MaterializeResult()
