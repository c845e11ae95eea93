"""`table_status`: the facts about each table, measured from its Iceberg metadata (no Spark)."""

from concurrent.futures import ThreadPoolExecutor

import dagster as dg

from icepack_dagster.defs.metadata import status_failure_metadata, status_metadata
from icepack_dagster.defs.partitions import ICEBERG_TABLES, table_key
from icepack_dagster.defs.resources import IcepackResource
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import IcepackError


def _measure(engine: Engine, partition: str) -> tuple[dict[str, dg.MetadataValue], str | None]:
    try:
        return status_metadata(engine.status(table_key(partition))), None
    except IcepackError as error:
        return status_failure_metadata(str(error)), str(error)


@dg.asset(
    partitions_def=ICEBERG_TABLES,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="iceberg_tables",
    kinds={"iceberg"},
)
def table_status(context: dg.AssetExecutionContext, icepack: IcepackResource) -> dg.MaterializeResult:
    """File, manifest and snapshot facts of one Iceberg table, read from its metadata alone.

    Grain: one materialization per table per health sync. A sync run covers a batch of tables
    (measured concurrently); each table still gets its own partition materialization. A table whose
    metadata cannot be read is materialized with `status_error`, so its health becomes `unknown`.
    """
    partitions = context.partition_keys
    engine = icepack.engine
    failures = 0
    with ThreadPoolExecutor(max_workers=min(icepack.table_workers, max(len(partitions), 1))) as pool:
        for partition, (metadata, error) in zip(
            partitions, pool.map(lambda p: _measure(engine, p), partitions), strict=True
        ):
            if error is not None:
                failures += 1
                context.log.warning(f"{partition}: status unavailable: {error}")
            context.add_asset_metadata(metadata, partition_key=partition)
    context.log.info(f"measured {len(partitions) - failures} of {len(partitions)} tables")
    return dg.MaterializeResult()
