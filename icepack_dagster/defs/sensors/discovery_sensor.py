"""The discovery sensor: keeps the `iceberg_tables` partitions equal to the catalogs' tables.

It only returns requests (add, delete, a first health sync for new tables); Dagster applies them.
When discovery fails or is incomplete, it changes nothing: an outage must never delete a partition.
"""

import dagster as dg

from icepack_dagster.defs.health_sync_schedule import health_sync_requests
from icepack_dagster.defs.jobs import health_sync_job
from icepack_dagster.defs.partitions import ICEBERG_TABLES, PARTITIONS_NAME
from icepack_dagster.defs.platform_settings import PlatformSettings
from icepack_dagster.defs.resources import IcepackResource
from icepack_dagster.defs.sensor_cursors import DiscoveryCursor, decode_cursor
from icepack_dagster.exceptions import IcepackError

_SHOWN = 5


def _failures_text(failures: list[str]) -> str:
    more = f" (and {len(failures) - _SHOWN} more)" if len(failures) > _SHOWN else ""
    return "; ".join(failures[:_SHOWN]) + more


def build_discovery_sensor(platform: PlatformSettings) -> dg.SensorDefinition:
    default = dg.DefaultSensorStatus(platform.default_status)

    @dg.sensor(
        name="iceberg_table_discovery",
        job=health_sync_job,
        minimum_interval_seconds=platform.discovery_interval_seconds,
        default_status=default,
        description="Adds a partition for each new Iceberg table and removes dropped ones; never on a "
        "failed or partial listing. New tables get a first health sync at once.",
    )
    def iceberg_table_discovery(
        context: dg.SensorEvaluationContext, icepack: IcepackResource
    ) -> dg.SensorResult | dg.SkipReason:
        try:
            found = icepack.engine.discover()
        except IcepackError as error:
            return dg.SkipReason(f"discovery failed, partitions left unchanged: {error}")
        if not found.complete:
            failures = [f"{f.catalog}.{'.'.join(f.namespace) or '*'}: {f.error}" for f in found.failures]
            return dg.SkipReason(
                f"discovery incomplete ({len(failures)} catalog or namespace listing(s) failed), "
                "partitions left unchanged so no table is dropped because of an outage: "
                + _failures_text(failures)
            )
        tables = [key.text for key in found.tables]
        current = set(context.instance.get_dynamic_partitions(PARTITIONS_NAME))
        added = [t for t in tables if t not in current]
        removed = sorted(current - set(tables))
        if not added and not removed:
            return dg.SkipReason(f"{len(tables)} tables, partitions already match the catalogs")
        cursor = decode_cursor(DiscoveryCursor, context.cursor)
        generation = cursor.generation + 1
        requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
        if added:
            requests.append(ICEBERG_TABLES.build_add_request(added))
        if removed:
            requests.append(ICEBERG_TABLES.build_delete_request(removed))
        context.log.info(f"discovery: +{len(added)} -{len(removed)} tables ({len(tables)} in the catalogs)")
        return dg.SensorResult(
            dynamic_partitions_requests=requests,
            run_requests=health_sync_requests(
                added, platform.health_sync_batch_size, f"discovered:{generation}"
            ),
            cursor=DiscoveryCursor(generation=generation).encode(),
        )

    return iceberg_table_discovery
