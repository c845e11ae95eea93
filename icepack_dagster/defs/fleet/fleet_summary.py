"""`fleet_summary`: every table at a glance, for the UI and for Prometheus."""

from typing import NamedTuple

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import FLEET_SUMMARY, MAINTAINED_TABLE, TABLE_HEALTH, TABLE_STATUS
from icepack_dagster.defs.event_reads import latest, latest_per_partition, metadata_of, new_materializations
from icepack_dagster.defs.fleet.breaker_pauses import paused_by_breakers
from icepack_dagster.defs.materialization_codec import (
    decode_fleet,
    decode_health,
    decode_reclaimed,
    decode_status,
    fleet_metadata,
)
from icepack_dagster.defs.resources import IcepackResource
from icepack_dagster.defs.run_tags import OBSERVATION, claim_run, runs_maintaining
from icepack_dagster.defs.table_histories import table_histories
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.health.model import HealthState, TableHealth
from icepack_dagster.domain.recommendation.commit_cadence import KEEPS_CONFLICTING
from icepack_dagster.domain.reports.fleet import (
    ATTENTION_ROWS,
    FleetSummary,
    TableAttention,
    needing_attention,
)
from icepack_dagster.engine import Engine

_QUEUED = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED]
_RUNNING = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
_PAGE = 1000


def _maintenance_runs(
    instance: dg.DagsterInstance, platform: PlatformSettings, statuses: list[dg.DagsterRunStatus]
) -> int:
    return len(runs_maintaining(instance, platform, statuses))


def _healths(instance: dg.DagsterInstance, partitions: list[str]) -> dict[str, TableHealth]:
    """Latest health of each table that has one."""
    records = latest_per_partition(instance, TABLE_HEALTH, partitions)
    decoded = {partition: decode_health(metadata_of(record)) for partition, record in records.items()}
    return {partition: health for partition, health in decoded.items() if health is not None}


def _states(partitions: list[str], healths: dict[str, TableHealth]) -> dict[str, HealthState]:
    """A table not measured yet counts as unknown, never healthy."""
    return {p: healths[p].state if p in healths else HealthState.UNKNOWN for p in partitions}


def _data_bytes(instance: dg.DagsterInstance, partitions: list[str]) -> dict[str, int]:
    """Live data bytes of the latest status of each given table (those a person is shown)."""
    sizes = {}
    for partition, record in latest_per_partition(instance, TABLE_STATUS, partitions).items():
        status = decode_status(metadata_of(record))
        if status is not None:
            sizes[partition] = status.live_data_bytes
    return sizes


def _attention(
    instance: dg.DagsterInstance,
    states: dict[str, HealthState],
    healths: dict[str, TableHealth],
    quarantined: dict[str, str],
    refused: dict[str, str],
) -> list[TableAttention]:
    """The unhealthy, quarantined and runtime-refused tables with their sizes (read for those only)."""
    flagged = [p for p, state in states.items() if state is not HealthState.HEALTHY]
    flagged += [*quarantined, *refused]
    return needing_attention(states, healths, _data_bytes(instance, flagged), quarantined, refused)


class _Held(NamedTuple):
    """Tables held back from plain automatic maintenance, each with why."""

    quarantined: dict[str, str]  # with the last error
    conflicting: dict[str, str]  # keeps conflicting with concurrent writers: how often, the last conflict
    paused: dict[str, str]  # a circuit breaker pauses its rewrites: the breakers' reasons
    refused: dict[str, str]  # its latest maintenance refused by the Spark's Iceberg runtime: why


def _held(engine: Engine, instance: dg.DagsterInstance, partitions: list[str]) -> _Held:
    """The quarantined tables, those whose maintenance keeps conflicting (their recommendation says the
    cadence and what would help), those a circuit breaker pauses, and those whose latest maintenance
    the Spark's Iceberg runtime refused."""
    quarantined, conflicting, refused, histories = {}, {}, {}, {}
    for partition, history, _ in table_histories(engine, instance, partitions):
        histories[partition] = history
        if history.quarantined:
            quarantined[partition] = history.last_error or "unknown error"
        elif history.consecutive_conflicts >= KEEPS_CONFLICTING:
            conflicting[partition] = (f"{history.consecutive_conflicts} in a row; last: "
                                      f"{history.last_conflict or 'no detail recorded'}")
        if history.refused:
            refused[partition] = history.refused
    return _Held(quarantined, conflicting, paused_by_breakers(instance, histories), refused)


def _reclaimed(instance: dg.DagsterInstance, previous: FleetSummary | None) -> tuple[int, int, int]:
    """Running totals: the previous summary's plus every maintenance materialized since it."""
    files = previous.files_reclaimed_total if previous else 0
    size = previous.bytes_reclaimed_total if previous else 0
    seen = previous.maintenance_events_seen if previous else 0
    while records := new_materializations(instance, MAINTAINED_TABLE, seen, _PAGE):
        for record in records:
            more_files, more_bytes = decode_reclaimed(metadata_of(record))
            files, size, seen = files + more_files, size + more_bytes, record.storage_id
    return files, size, seen


@dg.asset(deps=[TABLE_HEALTH, MAINTAINED_TABLE], group_name="fleet", kinds={"iceberg"})
def fleet_summary(context: dg.AssetExecutionContext, icepack: IcepackResource) -> dg.MaterializeResult:
    """Tables by health state, maintenance pending and running, the tables that need attention
    (unhealthy, quarantined or refused by their Spark's Iceberg runtime, as a sortable table with their
    sizes), and files and bytes reclaimed so
    far. Also written as Prometheus metrics for node-exporter's textfile collector.

    Grain: one materialization per refresh, after each health sync or maintenance run.
    """
    instance = context.instance
    platform = icepack.settings.platform
    claim_run(context, platform, OBSERVATION)
    partitions = list(instance.get_dynamic_partitions(platform.partitions_name))
    healths = _healths(instance, partitions)
    states = _states(partitions, healths)
    held = _held(icepack.engine, instance, partitions)
    budget = icepack.engine.rewrite_budget()
    attention = _attention(instance, states, healths, held.quarantined, held.refused)
    previous_record = latest(instance, FLEET_SUMMARY)
    previous = decode_fleet(metadata_of(previous_record)) if previous_record else None
    files, size, seen = _reclaimed(instance, previous)
    summary = FleetSummary(
        generated_at_epoch=utc_now().timestamp(),
        tables=len(partitions),
        by_state={s: sum(1 for v in states.values() if v is s) for s in HealthState},
        table_states=states,
        maintenance_queued=_maintenance_runs(instance, platform, _QUEUED),
        maintenance_running=_maintenance_runs(instance, platform, _RUNNING),
        quarantined=held.quarantined,
        conflicting=held.conflicting,
        paused_by_breakers=held.paused,
        rewrite_budget=budget.describe() + (" (reached)" if budget.reached else "") if budget else None,
        files_reclaimed_total=files,
        bytes_reclaimed_total=size,
        maintenance_events_seen=seen,
        attention=tuple(attention[:ATTENTION_ROWS]),
        attention_total=len(attention),
    )
    # prometheus_client only here: every run process loads these definitions, few of them refresh the fleet
    from icepack_dagster.defs.fleet.metrics import write_textfile

    write_textfile(summary, icepack.metrics_path)
    context.log.info(f"fleet: {summary.tables} tables; metrics written to {icepack.metrics_path}")
    accuracy = icepack.engine.accuracy()
    return dg.MaterializeResult(metadata=fleet_metadata(summary, str(icepack.metrics_path), accuracy))
