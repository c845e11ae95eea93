"""The maintenance sensor: launches maintenance, one table per run, for tables whose latest health is
warning or critical, with no one clicking.

Each tick reads only the healths recorded since its cursor (icepack's state database, written with each
`table_health` materialization: store/table_facts.py, one indexed query), keeps the tables
that need attention as pending, and judges the most urgent ones: skip a table already queued or
running, a disabled or invalid policy, cadence not elapsed since its last maintenance run, quarantine,
outside its maintenance window, or a recommendation with nothing to do. The rest launch in order of
recommendation priority, within the global cap of runs in flight and the per-tick budget. Run keys
name the table and the health's write number, so a restarted daemon never launches the same work
twice. Nothing it decides from is read from Dagster's event log: deleting runs changes no decision. The
cursor remembers at most `max_pending_tables` (the most urgent): Dagster stores the cursor with every
tick, and a less urgent table left out returns with its next health event, at most
`attention_rewrite_hours` later.
"""


import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.maintenance.batch_job import (
    batch_run_request,
    batch_tables,
    build_maintenance_batch_job,
    plan_batches,
)
from icepack_dagster.defs.maintenance.job import build_maintenance_job
from icepack_dagster.defs.maintenance_pool import ensure_pool_limit
from icepack_dagster.defs.resources import icepack_of
from icepack_dagster.defs.run_tags import PRIORITY_TAG, maintenance_tags, runs_maintaining, table_of_run
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.decisions.maintenance_batches import PlannedRun
from icepack_dagster.domain.decisions.maintenance_selection import (
    Decision,
    choose,
    explain,
    health_score,
    needs_attention,
    order_candidates,
    run_priority,
    sweep_page,
)
from icepack_dagster.domain.decisions.sensor_cursors import MaintenanceCursor, PendingTable, decode_cursor
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.engine.tick_judge import TickJudge, judge_pending
from icepack_dagster.store.table_facts import TableFactsStore

IN_FLIGHT = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


_MAX_SWEEP_WAITING = 500


def run_key(partition: str, health_event: int) -> str:
    """`health-` marks the state database's write numbers (Dagster storage ids named runs before)."""
    return f"maintain:{partition}:health-{health_event}"


def _sweep_decisions(
    tick: TickJudge,
    partitions: list[str],
    after: str | None,
    waiting: list[str],
    count: int,
    skip: frozenset[str],
) -> tuple[list[Decision], str | None]:
    """Healthy tables judged for an orphan sweep: those that waited last time (outside their window, no
    slot), then the next ones in round robin. A table in warning or critical is pending and gets orphan
    removal with its own maintenance; unknown never runs."""
    page, last = sweep_page(partitions, after, count, skip | frozenset(waiting))
    candidates = [p for p in waiting if p not in skip] + page
    measured = tick.prefetch(candidates)
    decisions = []
    for partition in candidates:
        facts = measured.get(partition)
        health = facts.health if facts is not None else None
        if facts is None or health is None or health.state is not HealthState.HEALTHY:
            continue
        candidate = PendingTable(health_event=facts.health_event, state=health.state, score=0.0)
        decisions.append(tick.judge(partition, candidate, sweep=True))
    return decisions, last


def _read_new_health(
    facts: TableFactsStore, cursor: MaintenanceCursor, limit: int
) -> tuple[int, dict[str, PendingTable], int]:
    """(new cursor position, pending tables, healths read): newest health per table wins."""
    after = cursor.after_health_event
    pending = dict(cursor.pending)
    events = facts.health_events_after(after, limit)
    for event in events:
        after = event.health_event
        health = event.health
        if health is None:
            continue
        if needs_attention(health):
            pending[event.table] = PendingTable(
                health_event=event.health_event, state=health.state, score=health_score(health)
            )
        else:
            pending.pop(event.table, None)
    return after, pending, len(events)


def _orphan_sweep(
    tick: TickJudge,
    platform: PlatformSettings,
    partitions: list[str],
    skip: frozenset[str],
    after: str | None,
    waiting: list[str],
    slots: int,
) -> tuple[list[Decision], list[Decision], str | None, list[str]]:
    """(sweeps judged, sweeps to launch, new round-robin position, tables that wait for the next tick):
    sweeps only take the slots unhealthy tables left."""
    if not platform.orphan_sweep or slots <= 0:
        return [], [], after, waiting
    count = platform.orphan_sweep_tables_per_tick
    sweeps, after = _sweep_decisions(tick, partitions, after, waiting, count, skip)
    swept, over = choose(sweeps, slots)
    waiting = [d.partition for d in sweeps if d.verdict == "wait"] + [d.partition for d in over]
    return sweeps, swept, after, waiting


def _run_request(decision: Decision, job_name: str) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=run_key(decision.partition, decision.health_event),
        job_name=job_name,
        partition_key=decision.partition,
        tags={
            **maintenance_tags(decision.partition, decision.health_event),
            **decision.run_tags,
            PRIORITY_TAG: str(run_priority([decision])),
        },
    )


def _busy_tables(in_flight: list[dg.DagsterRun]) -> frozenset[str]:
    """Tables a run in flight maintains: a one-table run's table, every table of a batch run."""
    busy = frozenset(table for run in in_flight if (table := table_of_run(run)) is not None)
    return busy | frozenset(table for run in in_flight for table in batch_tables(run.tags))


def _plan(
    tick: TickJudge, platform: PlatformSettings, decisions: list[Decision], slots: int
) -> tuple[list[PlannedRun], list[Decision]]:
    """(runs to launch, tables deferred): one run per table, or with maintenance_batch_size > 1 small
    tables sharing batch runs (domain/decisions/maintenance_batches.py); at most `slots` runs."""
    if platform.maintenance_batch_size > 1:
        return plan_batches(tick.prefetch, choose(decisions, len(decisions))[0], slots, platform)
    launch, deferred = choose(decisions, slots)
    return [PlannedRun((d,), batch=False) for d in launch], deferred


def build_maintenance_sensor(platform: PlatformSettings) -> dg.SensorDefinition:
    default = dg.DefaultSensorStatus(platform.default_status)
    sizing = platform.sizing_policy() if platform.run_sizing else None
    names = DeploymentNames.of(platform)
    one_job = build_maintenance_job(platform.deployment_name)
    batch_job = build_maintenance_batch_job(platform.deployment_name)

    @dg.sensor(
        name=DeploymentNames.of(platform).name("maintenance_sensor"),
        required_resource_keys={DeploymentNames.of(platform).icepack_resource},
        jobs=[one_job, batch_job],  # batch runs: maintenance_batch_size > 1
        minimum_interval_seconds=platform.maintenance_interval_seconds,
        default_status=default,
        description=f"Launches maintenance for unhealthy tables, most valuable first: at most "
        f"{platform.maintenance_runs_per_tick} per tick and {platform.max_maintenance_in_flight} in flight.",
    )
    def maintenance_sensor(context: dg.SensorEvaluationContext, **_direct: object) -> dg.SensorResult:
        icepack = icepack_of(context, DeploymentNames.of(platform))
        instance = context.instance
        pool = ensure_pool_limit(instance, platform)
        if pool is not None:
            message, wrong = pool
            (context.log.warning if wrong else context.log.info)(message)
        cursor = decode_cursor(MaintenanceCursor, context.cursor)
        facts = icepack.engine.facts
        after, pending, read = _read_new_health(facts, cursor, platform.health_events_per_tick)
        ordered = list(instance.get_dynamic_partitions(platform.partitions_name))
        tables = set(ordered)
        pending = {p: v for p, v in pending.items() if p in tables}
        sweep_after, sweep_waiting = cursor.sweep_after, [p for p in cursor.sweep_waiting if p in tables]
        in_flight = runs_maintaining(instance, platform, IN_FLIGHT)  # the sensor's runs and manual ones alike
        slots = min(platform.maintenance_runs_per_tick, platform.max_maintenance_in_flight - len(in_flight))

        def result(skip: str | None, requests: list[dg.RunRequest] | None = None) -> dg.SensorResult:
            kept = {p: pending[p] for p in order_candidates(pending)[: platform.max_pending_tables]}
            state = MaintenanceCursor(after_health_event=after, pending=kept, sweep_after=sweep_after,
                                      sweep_waiting=sweep_waiting[:_MAX_SWEEP_WAITING])
            return dg.SensorResult(run_requests=requests, skip_reason=skip, cursor=state.encode())

        if not pending and not platform.orphan_sweep:
            return result(f"no table needs maintenance ({read} new health event(s) read)")
        if slots <= 0:
            return result(f"{len(in_flight)} maintenance run(s) in flight, the cap is "
                          f"{platform.max_maintenance_in_flight}; {len(pending)} table(s) wait")
        busy = _busy_tables(in_flight)
        tick = TickJudge(icepack.engine, utc_now(), busy, sizing)
        decisions = judge_pending(tick, pending, platform.maintenance_candidates_per_tick)
        for decision in decisions:
            if decision.verdict == "drop":
                pending.pop(decision.partition, None)
                context.log.info(f"{decision.partition}: not maintained: {decision.reason}")
        planned, deferred = _plan(tick, platform, decisions, slots)
        launch = [d for run in planned for d in run.decisions]
        skip = frozenset(pending) | busy
        sweeps, swept, sweep_after, sweep_waiting = _orphan_sweep(
            tick, platform, ordered, skip, sweep_after, sweep_waiting, slots - len(planned)
        )
        launch += swept
        planned += [PlannedRun((d,), batch=False) for d in swept]
        for decision in launch:
            pending.pop(decision.partition, None)
        if not launch:
            if not decisions and not any(d.verdict == "launch" for d in sweeps):
                return result(f"no table needs maintenance ({read} new health event(s) read, {len(sweeps)} "
                              "healthy table(s) checked for a due orphan sweep)")
            return result("nothing launched: " + explain(decisions, deferred))
        context.log.info("launching maintenance: " + ", ".join(f"{d.partition} (priority {d.priority:.3g})"
                                                              for d in launch))
        requests = [
            batch_run_request(r, names) if r.batch else _run_request(r.decisions[0], one_job.name)
            for r in planned
        ]
        return result(None, requests)

    return maintenance_sensor
