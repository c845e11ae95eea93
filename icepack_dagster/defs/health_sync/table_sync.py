"""Measuring and judging a batch of tables and recording the results: the work behind both the
`health_sync` job (what the schedule, discovery and post-maintenance runs use) and a click on
`table_status`/`table_health` in the UI.

It reads only tables whose metadata file changed since their last recorded status (the rest are that
status with snapshot ages moved to now), judges every table's health, and writes a `table_status` and
a `table_health` materialization per table, and the same status, health and needs_operator verdict as
the table's facts in icepack's state database (what the sensors, the fleet summary and the next sync
decide from, store/table_facts.py): for every table, or (`only_changes`) only for tables whose status,
health or verdict changed or are due a rewrite (see `health_sync_writes`). Each `table_health`
materialization comes with the results of its partitioned `healthy` check (which tables are unhealthy)
and `needs_operator` check (which tables a person must act on, domain/health/needs_operator.py). A
table the sync leaves unwritten keeps its last check results, which still judge its latest
materialization and are still true: neither its health nor its need of a person changed.
"""

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

import dagster as dg

from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.event_reads import latest_per_partition
from icepack_dagster.defs.materialization_codec import (
    Metadata,
    health_check_evaluation,
    health_metadata,
    operator_check_evaluation,
    operator_verdict_metadata,
    status_failure_metadata,
    status_metadata,
    verdict_of,
)
from icepack_dagster.defs.partitions import table_key
from icepack_dagster.defs.resources import IcepackResource
from icepack_dagster.defs.table_histories import histories_of
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.health.judging import unknown_health
from icepack_dagster.domain.health.model import HealthState, TableHealth
from icepack_dagster.domain.health.needs_operator import (
    NOT_MEASURED,
    OperatorFacts,
    OperatorNeed,
    operator_need,
)
from icepack_dagster.domain.health.sync_writes import LastWrite, RewritePolicy, write_reason
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import IcepackError
from icepack_dagster.store.table_facts import MeasuredTable, Measurement
from icepack_dagster.store.table_identities import set_aside_name

SYNC_REASON = "sync_reason"
EVERY_TABLE = "every table of this run"


def _keys(partitions: list[str]) -> tuple[dict[str, TableKey], dict[str, str]]:
    keys: dict[str, TableKey] = {}
    bad: dict[str, str] = {}
    for partition in partitions:
        try:
            keys[partition] = table_key(partition)
        except IcepackError as error:
            bad[partition] = str(error)
    return keys, bad


def _last_writes(measured: dict[str, MeasuredTable]) -> dict[str, LastWrite]:
    return {
        p: LastWrite(health=m.health, written_at=m.measured_at, operator_verdict=m.operator_verdict)
        for p, m in measured.items()
    }


def _known_statuses(
    measured: dict[str, MeasuredTable], keys: dict[str, TableKey]
) -> dict[TableKey, TableStatus]:
    return {keys[p]: m.status for p, m in measured.items() if p in keys and m.status is not None}


def _written_since(engine: Engine, partitions: list[str], since: datetime) -> set[str]:
    """The partitions whose recorded status and health were written after `since`."""
    return {p for p, m in engine.facts.measured(partitions).items() if m.measured_at > since}


def sync_tables(
    context: dg.OpExecutionContext | dg.AssetExecutionContext,
    icepack: IcepackResource,
    partitions: Sequence[str],
    only_changes: bool,
) -> None:
    """Measure and judge `partitions`; log their `table_status` and `table_health` materializations."""
    partitions = list(partitions)
    policy = RewritePolicy(icepack.health_rewrite_hours, icepack.attention_rewrite_hours)
    engine = icepack.engine
    names = DeploymentNames.of(icepack.settings.platform)
    now = utc_now()
    started = time.monotonic()

    keys, failures = _keys(partitions)
    recorded = engine.facts.measured(partitions)
    known = _known_statuses(recorded, keys)
    refresh = engine.refresh_statuses(list(keys.values()), known, now, icepack.table_workers)
    failures |= {p: refresh.failures[k.text] for p, k in keys.items() if k.text in refresh.failures}
    read = {p for p, k in keys.items() if k.text in set(refresh.read)}
    context.log.info(
        f"measured {len(partitions)} tables in {time.monotonic() - started:.1f} s: {len(read)} read "
        f"(new or changed metadata), {len(refresh.unchanged)} unchanged, {len(failures)} failed"
    )
    if failures:  # one line, not one per table: a catalog outage fails every table of the catalog
        context.log.warning(_failures_line(failures))
    # before any history is read: a table created again under its name is judged on a history of its own
    recreated = engine.observe_identities([refresh.statuses[k.text] for p, k in keys.items() if p in read])
    for table, former in recreated.items():
        context.log.warning(f"{table}: created again under its name (the former table's UUID was {former}); "
                            f"it starts a history of its own, the former one is kept as "
                            f"{set_aside_name(table, former)}")
    last_writes = _last_writes(recorded) if only_changes else {}
    measured = _judge(engine, partitions, keys, refresh.statuses, failures)
    slots = policy.slots({partition: m.health for partition, m in measured.items()})
    needs = _operator_needs(icepack, keys, measured)
    pairs: list[tuple[str, Measurement, str]] = []
    for partition, measurement in measured.items():
        health = measurement.health
        verdict = verdict_of(needs[partition])
        last = last_writes.get(partition)
        reason = (
            write_reason(health, partition in read, last, now, slots[partition], verdict)
            if only_changes
            else EVERY_TABLE
        )
        if reason is not None:
            pairs.append((partition, replace(measurement, operator_verdict=verdict), reason))
    # Another run (a post-maintenance refresh) may have written a newer result meanwhile: keep it.
    newer = _written_since(engine, [pair[0] for pair in pairs], now)
    kept = [pair for pair in pairs if pair[0] not in newer]
    for partition, measurement, reason in kept:
        health_md = health_metadata(measurement.health) | operator_verdict_metadata(needs[partition])
        _log_pair(context, names, partition, _status_metadata(measurement), health_md, reason)
    engine.facts.record_measurements([measurement for _, measurement, _ in kept], utc_now())
    judged = {partition: measurement.health for partition, measurement, _ in kept}
    _log_checks(context, names, judged, needs)
    written = Counter(health.state for health in judged.values())
    total = sum(written.values())
    states = ", ".join(f"{written[state]} {state.value}" for state in HealthState if written[state])
    context.log.info(
        f"wrote status and health for {total} of {len(partitions)} tables"
        + (f" ({states})" if total else "")
        + ("; the others are unchanged since their last materialization" if total < len(partitions) else "")
    )


def _operator_needs(
    icepack: IcepackResource,
    keys: dict[str, TableKey],
    measured: dict[str, Measurement],
) -> dict[str, OperatorNeed | None]:
    """Whether each table needs a person (domain/health/needs_operator.py), from its health just judged
    and its maintenance history (one fleet-wide read of the state database): icepack's own state, never
    Dagster's events."""
    statuses = {keys[p]: m.status for p, m in measured.items() if p in keys}
    histories = histories_of(icepack.engine, statuses)
    failing_after = icepack.settings.platform.alert_failing_after
    needs: dict[str, OperatorNeed | None] = {}
    for partition, measurement in measured.items():
        key = keys.get(partition)
        history = histories[key][0] if key is not None else TableHistory.empty(partition)
        facts = OperatorFacts(health=measurement.health, history=history, failing_after=failing_after)
        needs[partition] = operator_need(facts)
    return needs


def _log_checks(
    context: dg.OpExecutionContext | dg.AssetExecutionContext,
    names: DeploymentNames,
    judged: dict[str, TableHealth],
    needs: Mapping[str, OperatorNeed | None],
) -> None:
    """The `healthy` and `needs_operator` checks of each table just written, judging that
    `table_health` materialization (stored when it was logged, so one read finds them all)."""
    health_key = names.table_health
    materializations = latest_per_partition(context.instance, health_key, list(judged))
    for partition, health in judged.items():
        if partition in materializations:
            materialization = materializations[partition]
            # log_event stores an AssetCheckEvaluation like any event; its type annotation omits it.
            context.log_event(health_check_evaluation(health_key, partition, health, materialization))  # type: ignore[arg-type]
            need = needs[partition]
            context.log_event(operator_check_evaluation(health_key, partition, need, materialization))  # type: ignore[arg-type]


def _judge(
    engine: Engine,
    partitions: list[str],
    keys: dict[str, TableKey],
    statuses: Mapping[str, object],
    failures: dict[str, str],
) -> dict[str, Measurement]:
    """Each table's status and health (the health unknown, saying why, when status failed)."""
    judged: dict[str, Measurement] = {}
    for partition in partitions:
        key = keys.get(partition)
        status = statuses.get(key.text) if key is not None else None
        if status is None:
            error = failures.get(partition, NOT_MEASURED)
            judged[partition] = Measurement(partition, None, error, unknown_health(partition, error))
        else:
            assert isinstance(status, TableStatus)
            judged[partition] = Measurement(partition, status, None, engine.health(status))
    return judged


def _status_metadata(measurement: Measurement) -> Metadata:
    """The `table_status` metadata of a table about to be written: built only for those, since most
    tables of a scheduled sync are not written and building it is most of what judging an unchanged
    table costs (a JSON metadata value of the whole status)."""
    if measurement.status is None:
        return status_failure_metadata(measurement.status_error or NOT_MEASURED)
    return status_metadata(measurement.status)


def _failures_line(failures: dict[str, str]) -> str:
    examples = "; ".join(f"{p}: {e}" for p, e in list(failures.items())[:3])
    more = f" (and {len(failures) - 3} more)" if len(failures) > 3 else ""
    return f"status unavailable for {len(failures)} table(s): {examples}{more}"


def _log_pair(
    context: dg.OpExecutionContext | dg.AssetExecutionContext,
    names: DeploymentNames,
    partition: str,
    status_md: dict[str, dg.MetadataValue],
    health_md: dict[str, dg.MetadataValue],
    reason: str,
) -> None:
    """One table's `table_status` and `table_health` materializations, each saying why it was written."""
    why = dg.MetadataValue.text(reason)
    status_md[SYNC_REASON] = why
    health_md[SYNC_REASON] = why
    health_md["status"] = dg.MetadataValue.asset(names.table_status)
    for asset_key, metadata in ((names.table_status, status_md), (names.table_health, health_md)):
        event = dg.AssetMaterialization(asset_key=asset_key, partition=partition, metadata=metadata)
        context.log_event(event)
