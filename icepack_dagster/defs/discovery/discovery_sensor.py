"""The discovery sensor: keeps the `iceberg_tables` partitions equal to the catalogs' tables.

It only returns requests (add, delete, a first health sync for new tables); Dagster applies them.
When discovery fails or is incomplete, it changes nothing: an outage must never delete a partition.
A catalog that suddenly lists no managed table while partitions of it exist (an embedded catalog whose
volume is not mounted is recreated empty; a REST catalog pointed at the wrong warehouse) is treated as
unavailable too: none of its partitions is removed.

The daemon adds the partitions before it saves the cursor and the first-sync runs; partitions found
after the cursor's `last_partition` were added by a tick that died in between, and get their first
sync on the next tick under the same run keys.
"""

import dagster as dg

from icepack_dagster.defs.health_sync.job import (
    HEALTH_SYNC_MATERIALIZES,
    health_sync_job,
    health_sync_requests,
)
from icepack_dagster.defs.partitions import ICEBERG_TABLES, PARTITIONS_NAME, table_key
from icepack_dagster.defs.resources import IcepackResource
from icepack_dagster.domain.sensor_cursors import DiscoveryCursor, decode_cursor
from icepack_dagster.exceptions import IcepackError
from icepack_dagster.platform_settings import PlatformSettings

_SHOWN = 5


def _failures_text(failures: list[str]) -> str:
    more = f" (and {len(failures) - _SHOWN} more)" if len(failures) > _SHOWN else ""
    return "; ".join(failures[:_SHOWN]) + more


def _vanished_catalogs(removed: list[str], found: set[str], configured: list[str]) -> dict[str, int]:
    """Configured catalogs that listed no managed table although partitions of theirs exist, with how many
    partitions each would lose: an empty listing of a whole catalog is read as an outage, not a drop."""
    listed = {table_key(t).catalog for t in found}
    vanished: dict[str, int] = {}
    for partition in removed:
        catalog = table_key(partition).catalog
        if catalog in configured and catalog not in listed:
            vanished[catalog] = vanished.get(catalog, 0) + 1
    return vanished


def _held_text(vanished: dict[str, int]) -> str:
    """Why the partitions of catalogs that listed no managed table were kept."""
    return "".join(
        f"; catalog {name!r} lists no managed table but {count} partition(s) belong to it: treated as "
        "unavailable, none removed (emptied on purpose? delete those partitions with "
        "DagsterInstance.delete_dynamic_partition('iceberg_tables', key))"
        for name, count in sorted(vanished.items())
    )


def _added_since(partitions: list[str], last: str | None) -> list[str]:
    """Partitions after `last` in Dagster's order; all of them when the position is unknown (no
    cursor, or its partition is gone): a sync too many is harmless, a first sync lost is not."""
    if last is None or last not in partitions:
        return partitions
    return partitions[partitions.index(last) + 1 :]


def build_discovery_sensor(platform: PlatformSettings) -> dg.SensorDefinition:
    default = dg.DefaultSensorStatus(platform.default_status)

    @dg.sensor(
        name="iceberg_table_discovery",
        job=health_sync_job,
        minimum_interval_seconds=platform.discovery_interval_seconds,
        default_status=default,
        description="Adds a partition for each new Iceberg table and removes dropped ones; never on a "
        "failed or partial listing. New tables get a first health sync at once.",
        metadata=HEALTH_SYNC_MATERIALIZES,
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
        ordered = list(context.instance.get_dynamic_partitions(PARTITIONS_NAME))
        current = set(ordered)
        cursor = decode_cursor(DiscoveryCursor, context.cursor)
        added = [t for t in tables if t not in current]
        removed = sorted(current - set(tables))
        vanished = _vanished_catalogs(removed, set(tables), icepack.engine.catalogs.names)
        held = _held_text(vanished)
        if vanished:
            context.log.warning("discovery" + held)
            removed = [p for p in removed if table_key(p).catalog not in vanished]
        # The daemon deletes partitions one call each (about 3 ms): spread a mass drop over ticks.
        deferred = len(removed) - platform.partition_removals_per_tick
        removed = removed[: platform.partition_removals_per_tick]
        gone = set(removed)
        unsynced = [p for p in _added_since(ordered, cursor.last_partition) if p not in gone]
        if not added and not removed and not unsynced:
            return dg.SkipReason(f"{len(tables)} tables, partitions already match the catalogs{held}")
        generation = cursor.generation + 1
        after = [p for p in ordered if p not in gone] + added
        requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
        if added:
            requests.append(ICEBERG_TABLES.build_add_request(added))
        if removed:
            requests.append(ICEBERG_TABLES.build_delete_request(removed))
        context.log.info(
            f"discovery: +{len(added)} -{len(removed)} tables ({len(tables)} in the catalogs)"
            + (f"; {deferred} more dropped table(s) removed on the next ticks" if deferred > 0 else "")
            + (f"; first sync still owed to {len(unsynced)} table(s)" if unsynced else "")
        )
        last = after[-1] if after else None
        return dg.SensorResult(
            dynamic_partitions_requests=requests,
            run_requests=health_sync_requests(
                unsynced + added, platform.health_sync_batch_size, f"discovered:{generation}"
            ),
            cursor=DiscoveryCursor(generation=generation, last_partition=last).encode(),
        )

    return iceberg_table_discovery
