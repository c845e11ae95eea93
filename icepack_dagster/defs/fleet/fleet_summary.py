"""`fleet_summary`: every table at a glance, for the UI and for Prometheus. Health, sizes, policies and
reclaimed totals come from the tables' facts in icepack's state database (one query for the fleet),
never from Dagster's event log, so deleting runs leaves the summary unchanged."""

import functools
import inspect
from collections.abc import Mapping
from typing import NamedTuple

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.fleet.fleet_automation import fleet_refresh_condition
from icepack_dagster.defs.materialization_codec import fleet_metadata
from icepack_dagster.defs.resources import IcepackResource, icepack_of
from icepack_dagster.defs.run_tags import OBSERVATION, claim_run, runs_maintaining
from icepack_dagster.defs.table_histories import table_histories
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.health.model import HealthState, TableHealth
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.recommendation.circuit_breakers import breaker_pauses
from icepack_dagster.domain.recommendation.commit_cadence import KEEPS_CONFLICTING
from icepack_dagster.domain.reports.fleet import ATTENTION_ROWS, FleetSummary, needing_attention
from icepack_dagster.engine import Engine
from icepack_dagster.store.table_facts import MeasuredTable

_QUEUED = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED]
_RUNNING = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]


def _maintenance_runs(
    instance: dg.DagsterInstance, platform: PlatformSettings, statuses: list[dg.DagsterRunStatus]
) -> int:
    return len(runs_maintaining(instance, platform, statuses))


def _states(partitions: list[str], healths: dict[str, TableHealth]) -> dict[str, HealthState]:
    """A table not measured yet counts as unknown, never healthy."""
    return {p: healths[p].state if p in healths else HealthState.UNKNOWN for p in partitions}


class _Held(NamedTuple):
    """Tables held back from plain automatic maintenance, each with why."""

    quarantined: dict[str, str]  # with the last error
    conflicting: dict[str, str]  # keeps conflicting with concurrent writers: how often, the last conflict
    paused: dict[str, str]  # a circuit breaker pauses its rewrites: the breakers' reasons
    refused: dict[str, str]  # its latest maintenance refused by the Spark's Iceberg runtime: why


def _held(
    engine: Engine, instance: dg.DagsterInstance, partitions: list[str], measured: dict[str, MeasuredTable]
) -> _Held:
    """The quarantined tables, those whose maintenance keeps conflicting (their recommendation says the
    cadence and what would help), those a circuit breaker pauses, and those whose latest maintenance
    the Spark's Iceberg runtime refused."""
    quarantined, conflicting, refused, histories = {}, {}, {}, {}
    for partition, history, _ in table_histories(engine, instance, partitions, measured):
        histories[partition] = history
        if history.quarantined:
            quarantined[partition] = history.last_error or "unknown error"
        elif history.consecutive_conflicts >= KEEPS_CONFLICTING:
            conflicting[partition] = (f"{history.consecutive_conflicts} in a row; last: "
                                      f"{history.last_conflict or 'no detail recorded'}")
        if history.refused:
            refused[partition] = history.refused
    return _Held(quarantined, conflicting, _paused_by_breakers(measured, histories), refused)


def _paused_by_breakers(
    measured: Mapping[str, MeasuredTable], histories: Mapping[str, TableHistory]
) -> dict[str, str]:
    """The tables a circuit breaker pauses, with the breakers' reasons: judged from their histories and
    the status in their facts, for only the tables that rewrote something in the breakers' window (the
    others cannot have tripped one). The fleet's daily budget is one line of the summary, not a row."""
    paused = {}
    for partition, history in histories.items():
        facts = measured.get(partition)
        if not history.recent_rewrites or facts is None or facts.status is None:
            continue
        reasons = breaker_pauses(facts.status, history, None)
        if reasons:
            paused[partition] = "; ".join(reasons.values())
    return paused


@functools.cache
def build_fleet_summary(deployment_name: str) -> dg.AssetsDefinition:
    """The deployment's fleet summary, after its health and maintenance (one definition per name)."""
    names = DeploymentNames(deployment_name)

    @dg.asset(
        key=names.fleet_summary,
        deps=[names.table_health, names.maintained_table],
        group_name="fleet",
        kinds={"iceberg"},
        required_resource_keys={names.icepack_resource},
        automation_condition=fleet_refresh_condition(),
        description=inspect.getdoc(fleet_summary),
    )
    def fleet_summary_asset(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        return fleet_summary(context, icepack_of(context, names))

    return fleet_summary_asset


def fleet_summary(context: dg.AssetExecutionContext, icepack: IcepackResource) -> dg.MaterializeResult:
    """Tables by health state, maintenance pending and running, the tables that need attention
    (unhealthy, quarantined or refused by their Spark's Iceberg runtime, as a sortable table with their
    sizes), and files and bytes reclaimed so far. Also written as Prometheus metrics for node-exporter's
    textfile collector.

    Grain: one materialization per refresh, after each health sync or maintenance run.
    """
    instance = context.instance
    platform = icepack.settings.platform
    claim_run(context, platform, OBSERVATION)
    partitions = list(instance.get_dynamic_partitions(platform.partitions_name))
    measured = icepack.engine.facts.measured(partitions)
    healths = {p: m.health for p, m in measured.items() if m.health is not None}
    states = _states(partitions, healths)
    held = _held(icepack.engine, instance, partitions, measured)
    budget = icepack.engine.rewrite_budget()
    sizes = {p: m.status.live_data_bytes for p, m in measured.items() if m.status is not None}
    attention = needing_attention(states, healths, sizes, held.quarantined, held.refused)
    files, size = icepack.engine.facts.reclaimed()
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
        attention=tuple(attention[:ATTENTION_ROWS]),
        attention_total=len(attention),
    )
    # prometheus_client only here: every run process loads these definitions, few of them refresh the fleet
    from icepack_dagster.defs.fleet.metrics import write_textfile

    write_textfile(summary, icepack.metrics_path)
    context.log.info(f"fleet: {summary.tables} tables; metrics written to {icepack.metrics_path}")
    accuracy = icepack.engine.accuracy()
    return dg.MaterializeResult(metadata=fleet_metadata(
        summary, str(icepack.metrics_path), DeploymentNames.of(platform).table_health, accuracy
    ))
