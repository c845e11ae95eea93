"""Benchmark: what refreshing the fleet summary costs, a run-status sensor against automation conditions.

The fleet is bench/control_plane.py's (registered copies of one small real table). For each way of
refreshing `fleet_summary` (`bench/fleet_refresh_location.py`: `sensor`, the run-status sensor icepack
used before; `condition`, the automation condition icepack ships; `eager`, `AutomationCondition.eager()`)
a fresh real deployment on this machine (`bench/_platform.py`: the repository's dagster.yaml, SQLite
storage, a real daemon, the queue, Dagster's default run launcher) runs the real `health_sync_schedule`
every minute for `--syncs` syncs, each one run per `--batch-size` tables, every run writing every table
(`health_sync_writes: all`, the most partition updates a sync makes; `--writes changes` writes only what
changed: after the first sync, nothing). The refresh sensor (the run-status sensor or the automation
condition sensor, both every 30 s: the run-status sensor at `maintenance_interval_seconds`, the
condition sensor at `fleet_summary_interval_seconds`) is the only other instigator on.
The window starts after the refresh sensor's first tick and ends once every run ended and no run was
created for two sensor intervals (the run-status sensor works through the syncs' successes one refresh
per tick, so it goes on after the last sync). Printed side by side, per variant:
- the health-sync runs, the refresh runs they led to (per sync) and the `fleet_summary`
  materializations;
- the refresh sensor's ticks in the window (a sensor ticks every interval whether anything happened
  or not: 120 an hour at 30 s), those that requested a run, and their evaluation time (a tick's end
  minus its start, as the instance records it: the run-status sensor runs in the code server, the
  automation condition sensor in the daemon);
- a refresh run's launch to end (process start, imports, definitions, the summary; `fleet_refresh`
  runs use the in-process executor, the condition's runs Dagster's implicit asset job and its default
  executor, one step process);
- the CPU seconds of the daemon, its code server and every run process in the window (health syncs
  included, the same work in every variant), so the difference between variants is the refreshes'.

    .venv/bin/python bench/fleet_refresh.py [--tables N] [--batch-size N] [--syncs N] [--writes all|changes]
        [--variants sensor,condition,eager]
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datetime import UTC

from bench._fixtures import Bench, arguments, machine, table  # noqa: E402
from bench._platform import FINISHED, Platform  # noqa: E402
from bench._whole_sync import HEALTH_SYNC, ICEPACK_LOCATION, fleet_and_settings  # noqa: E402
from bench.fleet_refresh_location import RUN_STATUS_SENSOR, VARIANTS  # noqa: E402
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES  # noqa: E402
from icepack_dagster.defs.fleet.fleet_automation import FLEET_AUTOMATION_SENSOR  # noqa: E402
from icepack_dagster.defs.health_sync.schedule import SCHEDULE_NAME  # noqa: E402
from icepack_dagster.defs.partitions import PARTITIONS_NAME  # noqa: E402

INTERVAL = 30  # both refresh sensors' minimum interval, so that the two ways tick alike


@dataclass(frozen=True)
class Outcome:
    variant: str
    health_runs: int
    refresh_runs: list[float]  # launch to end, seconds
    materializations: int
    ticks: list[float]  # evaluation seconds of each tick in the window
    requesting_ticks: int
    window: float
    cpu: float


def main() -> None:
    args = arguments(
        __doc__.splitlines()[0],
        lambda p: (
            p.add_argument("--tables", type=int, default=200, help="tables in the fleet (default 200)"),
            p.add_argument("--batch-size", type=int, default=50, help="tables per health-sync run"),
            p.add_argument("--syncs", type=int, default=3, help="scheduled syncs measured (default 3)"),
            p.add_argument("--writes", choices=("all", "changes"), default="all", help="what a sync writes"),
            p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, in this order"),
        ),
    )
    bench = Bench(args.workdir)
    print(f"Fleet refresh: {args.tables:,} tables, {args.syncs} syncs of one run per {args.batch_size} "
          f"tables, writes {args.writes}; {machine()}")
    keys, config = fleet_and_settings(bench, args.tables, {
        "health_sync_cron": "* * * * *", "health_sync_batch_size": args.batch_size,
        "health_sync_writes": args.writes, "maintenance_interval_seconds": INTERVAL,
        "fleet_summary_interval_seconds": INTERVAL,
    })
    partitions = [key.text for key in keys]
    runs_per_sync = len(range(0, args.tables, args.batch_size))
    outcomes = [
        measure(bench, variant, config, partitions, args.syncs * runs_per_sync)
        for variant in args.variants.split(",")
    ]
    print_outcomes(outcomes, args.syncs)


def measure(
    bench: Bench, variant: str, config: dict[str, Any], partitions: list[str], health_runs: int
) -> Outcome:
    platform = Platform(
        bench.workdir / f"platform-fleet-{variant}", config, queue_interval_seconds=1,
        icepack_module="bench.fleet_refresh_location", env={"BENCH_FLEET_REFRESH": variant},
    )
    refresh = RUN_STATUS_SENSOR if variant == "sensor" else FLEET_AUTOMATION_SENSOR
    instance = platform.instance
    try:
        instance.add_dynamic_partitions(PARTITIONS_NAME, partitions)
        platform.start()
        platform.schedule("start", refresh, location=ICEPACK_LOCATION, kind="sensor")
        _wait(lambda: _ticks(instance, refresh, 0.0, time.time()), f"{refresh}'s first tick", 300)
        _wait(lambda: _all_ended(instance), "the runs of the first tick", 300)
        start, cpu = time.time(), platform.cpu_seconds()
        platform.schedule("start", SCHEDULE_NAME, location=ICEPACK_LOCATION)
        requested = f"{health_runs} health-sync runs"
        _wait(lambda: len(_health_runs(instance, start)) >= health_runs, requested, 900)
        platform.schedule("stop", SCHEDULE_NAME, location=ICEPACK_LOCATION)
        _wait(lambda: _all_ended(instance), "the health syncs' end", 900)
        _wait(lambda: _quiet(instance, start), "the refreshes' end", 1800)
        end, cpu = time.time(), platform.cpu_seconds() - cpu
        platform.schedule("stop", refresh, location=ICEPACK_LOCATION, kind="sensor")
        ticks = _ticks(instance, refresh, start, end)
        records = instance.get_run_records(dg.RunsFilter(created_after=_utc(start), created_before=_utc(end)))
        refreshes = [
            platform.times(r.dagster_run.run_id) for r in records if r.dagster_run.job_name != HEALTH_SYNC
        ]
        summaries = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=DEFAULT_NAMES.fleet_summary, after_timestamp=start, before_timestamp=end
            ), 10_000
        ).records
        return Outcome(
            variant=variant,
            health_runs=len(_health_runs(instance, start)),
            refresh_runs=[t.launch_to_end for t in refreshes],
            materializations=len(summaries),
            ticks=[(t.end_timestamp or t.timestamp) - t.timestamp for t in ticks],
            requesting_ticks=sum(1 for t in ticks if t.run_ids),
            window=end - start,
            cpu=cpu,
        )
    finally:
        platform.stop()


def _utc(epoch: float) -> Any:
    from datetime import datetime

    return datetime.fromtimestamp(epoch, tz=UTC)


def _health_runs(instance: dg.DagsterInstance, start: float) -> list[dg.RunRecord]:
    return list(instance.get_run_records(dg.RunsFilter(job_name=HEALTH_SYNC, created_after=_utc(start))))


def _quiet(instance: dg.DagsterInstance, start: float) -> bool:
    """Every run ended, and none was created in the last two sensor intervals: the refresh sensor has
    worked through what the syncs left it (the run-status sensor requests one refresh per tick)."""
    records = instance.get_run_records(dg.RunsFilter(created_after=_utc(start)))
    latest = max((r.create_timestamp.timestamp() for r in records), default=start)
    ended = max((r.end_time or 0 for r in records), default=start)
    return _all_ended(instance) and time.time() > max(latest, ended) + 2 * INTERVAL


def _all_ended(instance: dg.DagsterInstance) -> bool:
    return all(r.dagster_run.status in FINISHED for r in instance.get_run_records())


def _ticks(instance: dg.DagsterInstance, name: str, start: float, end: float) -> list[Any]:
    """The finished ticks of the instigator `name` that started in [start, end]."""
    states = [s for s in instance.all_instigator_state() if s.instigator_name == name]
    ticks = [
        tick
        for state in states
        for tick in instance.get_ticks(state.instigator_origin_id, state.selector_id, after=start, before=end)
        if tick.end_timestamp is not None or tick.status.value != "STARTED"
    ]
    return sorted(ticks, key=lambda t: t.timestamp)


def _wait(ready: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout:.0f} s")
        time.sleep(1)


def print_outcomes(outcomes: list[Outcome], syncs: int) -> None:
    rows = []
    for o in outcomes:
        runs = o.refresh_runs
        rows.append([
            o.variant, o.health_runs, len(runs), len(runs) / syncs, o.materializations,
            len(o.ticks), o.requesting_ticks, 3600 / INTERVAL,
            statistics.fmean(o.ticks) if o.ticks else 0.0, max(o.ticks, default=0.0), sum(o.ticks),
            statistics.fmean(runs) if runs else 0.0, o.window, o.cpu,
        ])
    table(
        f"Refreshing fleet_summary over {syncs} scheduled health syncs (the window: from the refresh "
        f"sensor's first tick until no run was created or running for {2 * INTERVAL} s)",
        ["variant", "health-sync runs", "refresh runs", "per sync", "fleet_summary materializations",
         "refresh ticks", "ticks requesting a run", "ticks/h", "tick eval s mean", "tick eval s max",
         "tick eval s total", "refresh run s (launch to end)", "window s",
         "CPU s (daemon, code server, runs)"],
        rows,
    )


if __name__ == "__main__":
    main()
