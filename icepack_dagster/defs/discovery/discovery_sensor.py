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

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.health_sync.job import (
    build_health_sync_job,
    health_sync_materializes,
    health_sync_requests,
)
from icepack_dagster.defs.partitions import tables_partitions
from icepack_dagster.defs.resources import IcepackResource, icepack_of
from icepack_dagster.defs.run_tags import deployment_tags
from icepack_dagster.domain.decisions.dagster_partition_changes import (
    DagsterPartitionChanges,
    plan_dagster_partition_changes,
)
from icepack_dagster.domain.decisions.sensor_cursors import DiscoveryCursor, decode_cursor
from icepack_dagster.exceptions import IcepackError
from icepack_dagster.iceberg.discovery import DiscoveryResult

_SHOWN = 5
SENSOR_NAME = "iceberg_table_discovery"  # the default deployment's; others' carry their prefix


def discovery_sensor_name(platform: PlatformSettings) -> str:
    """The deployment's discovery sensor, whose runs are new tables' first health syncs."""
    return DeploymentNames.of(platform).name(SENSOR_NAME)


def _failures_text(failures: list[str]) -> str:
    more = f" (and {len(failures) - _SHOWN} more)" if len(failures) > _SHOWN else ""
    return "; ".join(failures[:_SHOWN]) + more


def _discovered(icepack: IcepackResource) -> DiscoveryResult | dg.SkipReason:
    """The catalogs' tables, or why this tick changes nothing (a failed or partial listing)."""
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
    return found


def _result(
    context: dg.SensorEvaluationContext,
    changes: DagsterPartitionChanges,
    tables: int,
    generation: int,
    platform: PlatformSettings,
) -> dg.SensorResult:
    """The partition requests, the first health syncs owed, and the cursor, in one result."""
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    tables_def = tables_partitions(platform)
    if changes.added:
        requests.append(tables_def.build_add_request(list(changes.added)))
    if changes.removed:
        requests.append(tables_def.build_delete_request(list(changes.removed)))
    deferred, unsynced = changes.deferred_removals, changes.unsynced
    context.log.info(
        f"discovery: +{len(changes.added)} -{len(changes.removed)} tables ({tables} in the catalogs)"
        + (f"; {deferred} more dropped table(s) removed on the next ticks" if deferred > 0 else "")
        + (f"; first sync still owed to {len(unsynced)} table(s)" if unsynced else "")
    )
    return dg.SensorResult(
        dynamic_partitions_requests=requests,
        run_requests=health_sync_requests(
            DeploymentNames.of(platform),
            [*unsynced, *changes.added],
            platform.health_sync_batch(len(unsynced) + len(changes.added)),
            f"discovered:{generation}",
            tags=deployment_tags(platform),
        ),
        cursor=DiscoveryCursor(
            generation=generation, last_partition=changes.after[-1] if changes.after else None
        ).encode(),
    )


def build_discovery_sensor(platform: PlatformSettings) -> dg.SensorDefinition:
    default = dg.DefaultSensorStatus(platform.default_status)

    @dg.sensor(
        name=discovery_sensor_name(platform),
        required_resource_keys={DeploymentNames.of(platform).icepack_resource},
        job=build_health_sync_job(platform.deployment_name),
        minimum_interval_seconds=platform.discovery_interval_seconds,
        default_status=default,
        description="Adds a partition for each new Iceberg table and removes dropped ones; never on a "
        "failed or partial listing. New tables get a first health sync at once.",
        metadata=health_sync_materializes(DeploymentNames.of(platform)),
    )
    def iceberg_table_discovery(
        context: dg.SensorEvaluationContext, **_direct: object
    ) -> dg.SensorResult | dg.SkipReason:
        icepack = icepack_of(context, DeploymentNames.of(platform))
        found = _discovered(icepack)
        if isinstance(found, dg.SkipReason):
            return found
        tables = [key.text for key in found.tables]
        cursor = decode_cursor(DiscoveryCursor, context.cursor)
        changes = plan_dagster_partition_changes(
            tables,
            list(context.instance.get_dynamic_partitions(platform.partitions_name)),
            cursor.last_partition,
            icepack.engine.catalogs.names,
            platform.partition_removals_per_tick,
        )
        held = changes.held_text()
        if held:
            context.log.warning("discovery" + held)
        if not changes.any:
            return dg.SkipReason(f"{len(tables)} tables, partitions already match the catalogs{held}")
        return _result(context, changes, len(tables), cursor.generation + 1, platform)

    return iceberg_table_discovery
