"""Benchmark: a steady health-sync run of 1,000 tables as a real run against the same run in process.

The fleet is bench/control_plane.py's (registered copies of one small real table, every table
critical). A real Dagster deployment on this machine (`bench/_platform.py`: the repository's
dagster.yaml, a real daemon, Dagster's default run launcher) holds the partitions; one first sync
writes every table. Then, alternately, the same steady run (writes: changes, nothing changed) is
executed in this process (`execute_in_process` on the same instance) and launched as a run through the
queue (`dagster job launch`, the daemon's launcher, a run process that imports the definitions and runs
the job's one op with its in-process executor). Printed side by side: the in-process wall time, the
real run from launch to end (process start, imports, definitions, execution; not the queue wait), and
the ratio; the same for CPU seconds.

Each round also runs a one-op job that does nothing (`bench/trivial_location.py`, a second code
location of the same deployment) in this process and as a real run: what its real run costs beyond its
in-process run is Dagster's own cost of a run process, so the health-sync run's cost beyond its
in-process run splits into Dagster's share and icepack's (importing its definitions and their
libraries). One unmeasured run of each job comes first: the deployment's first runs also compile the
modules its code servers did not import.

With `--full-sync` it measures instead a whole sync of every table (100,000 with `--tables 100000`)
as the deployment runs it: the real `health_sync_schedule`, ticking every minute in the real daemon,
requests one run per 1,000 tables; the queue starts them within the repository's dagster.yaml limits
(observation runs two at once); each is a real run process. Once for the first sync (every table new,
every table written), then for a steady sync (no table changed since), and between them the same steady
sync's runs executed one after the other in this process, side by side. Printed: the tables each sync
wrote (a steady sync writes the tables due their periodic rewrite: after a first sync of an hour,
many of them), wall time from the tick's first run queued to its last run's end, the runs' own times,
tables per second.

    .venv/bin/python bench/health_sync_run.py [--quick] [--tables N] [--rounds N] [--full-sync]
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _tables  # noqa: E402
from bench._fixtures import NAMESPACE, Bench, arguments, machine, ratio, table  # noqa: E402
from bench._platform import Platform, RunTimes  # noqa: E402
from bench.trivial_location import defs as trivial_defs  # noqa: E402
from bench.trivial_location import trivial  # noqa: E402
from icepack_dagster.config.settings import load_settings  # noqa: E402
from icepack_dagster.definitions import build_definitions  # noqa: E402
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES  # noqa: E402
from icepack_dagster.defs.health_sync.job import (  # noqa: E402
    build_health_sync_job,
    health_sync_requests,
    health_sync_run_config,
)
from icepack_dagster.defs.health_sync.schedule import SCHEDULE_NAME  # noqa: E402
from icepack_dagster.defs.partitions import PARTITIONS_NAME  # noqa: E402

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
ICEPACK_LOCATION = "icepack_dagster"  # workspace.yaml
TRIVIAL_LOCATION = "bench.trivial_location"
TRIVIAL_JOB = trivial.name
HEALTH_SYNC = build_health_sync_job(DEFAULT_NAMES.deployment).name


@dataclass(frozen=True)
class Round:
    """One round: the steady health sync in process and as a real run, then the do-nothing job both ways
    (seconds; CPU seconds of the process and its ended children)."""

    wall: float
    cpu: float
    run: RunTimes
    run_cpu: float
    trivial_in_cpu: float
    trivial: RunTimes
    trivial_cpu: float

    @property
    def dagster_share(self) -> float:
        return self.trivial_cpu - self.trivial_in_cpu

    @property
    def icepack_share(self) -> float:
        return self.run_cpu - self.cpu - self.dagster_share


def cpu_seconds() -> float:
    """This process's CPU seconds and those of its children that ended: Dagster's compute-log capture
    starts `tail` and watcher processes for every run, in process as in a run process, and the run
    process's figure (`Platform.run_measuring_cpu`) counts its children too."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def timed(work: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this process and its ended children, result)."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = work()
    return time.perf_counter() - wall, cpu_seconds() - cpu, result


def real_run(
    platform: Platform, job: str, run_config: dict[str, Any], location: str
) -> tuple[RunTimes, float]:
    """Launch `job` as a real run and wait for it: its times and its run process's CPU seconds."""
    times, worker_cpu = platform.run_measuring_cpu(job, run_config, location=location)
    assert times.status.value == "SUCCESS", f"run {times.run_id} ended {times.status}; see {platform.log}"
    return times, worker_cpu


def main() -> None:
    args = arguments(
        __doc__.splitlines()[0],
        lambda p: (
            p.add_argument("--tables", type=int, help="tables in the run (default 1,000; 200 with --quick)"),
            p.add_argument("--rounds", type=int, default=3, help="in-process/real-run pairs (default 3)"),
            p.add_argument("--full-sync", action="store_true",
                           help="a whole sync of every table through the real schedule and queue instead"),
        ),
    )
    bench = Bench(args.workdir)
    count = args.tables or (200 if args.quick else 1_000)
    if args.full_sync:
        full_sync(bench, count)
        return
    print(f"Health-sync run benchmark ({count:,} tables); {machine()}")
    keys, config = fleet_and_settings(bench, count, {"health_sync_batch_size": count}, status_workers=1)
    job = build_definitions(load_settings(**config)).resolve_job_def(HEALTH_SYNC)
    partitions = [key.text for key in keys]
    platform = Platform(
        bench.workdir / "platform-health-sync", config, queue_interval_seconds=1,
        more_locations=(TRIVIAL_LOCATION,),
    )
    try:
        platform.instance.add_dynamic_partitions(PARTITIONS_NAME, partitions)
        steady = health_sync_run_config(partitions, "changes") | QUIET
        first_wall, rounds = measure(platform, job, steady, args.rounds)
    finally:
        platform.stop()
    print_results(count, first_wall, rounds)


def measure(
    platform: Platform, job: Any, run_config: dict[str, Any], count: int
) -> tuple[float, list[Round]]:
    """The first sync in process, one unmeasured real run of each job, then `count` rounds."""
    instance = platform.instance
    trivial_job = trivial_defs.resolve_job_def(TRIVIAL_JOB)

    def in_process() -> Any:
        return job.execute_in_process(instance=instance, run_config=run_config)

    def trivial_in_process() -> Any:
        return trivial_job.execute_in_process(instance=instance, run_config=QUIET)

    first_wall, _, first = timed(in_process)
    assert first.success
    platform.start()
    warm_ups = ((job.name, run_config, ICEPACK_LOCATION), (TRIVIAL_JOB, QUIET, TRIVIAL_LOCATION))
    for name, config, location in warm_ups:
        platform.wait([platform.launch(name, config, location=location)], timeout=600)
    rounds = []
    for _ in range(count):
        wall, cpu, result = timed(in_process)
        assert result.success
        run, run_cpu = real_run(platform, job.name, run_config, ICEPACK_LOCATION)
        _, trivial_in_cpu, trivial_result = timed(trivial_in_process)
        assert trivial_result.success
        trivial, trivial_cpu = real_run(platform, TRIVIAL_JOB, QUIET, TRIVIAL_LOCATION)
        rounds.append(Round(wall, cpu, run, run_cpu, trivial_in_cpu, trivial, trivial_cpu))
    return first_wall, rounds


def print_results(count: int, first_wall: float, rounds: list[Round]) -> None:
    rows: list[list[Any]] = [[f"first sync, in process ({count:,} tables written)", first_wall, *["-"] * 6]]
    for index, r in enumerate(rounds):
        rows.append([f"steady run {index + 1}", r.wall, r.run.launch_to_end, r.run.process_start,
                     ratio(r.run.launch_to_end, r.wall), r.cpu, r.run_cpu, ratio(r.run_cpu, r.cpu)])
    best_wall, best_cpu = min(r.wall for r in rounds), min(r.cpu for r in rounds)
    best_run, best_run_cpu = min(r.run.launch_to_end for r in rounds), min(r.run_cpu for r in rounds)
    rows.append(["best of each (a shared machine only adds time)", best_wall, best_run,
                 min(r.run.process_start for r in rounds), ratio(best_run, best_wall), best_cpu, best_run_cpu,
                 ratio(best_run_cpu, best_cpu)])
    table(
        f"A steady health-sync run of {count:,} tables (nothing changed): in this process vs as a real run "
        "(daemon, default run launcher, SQLite storage)",
        ["run", "in process s", "real run s (launch to end)", "of which process start s",
         "real / in process", "in process CPU s", "run process CPU s", "CPU real / in process"],
        rows,
    )
    shares = [[f"round {index + 1}", r.trivial.launch_to_end, r.trivial_in_cpu, r.trivial_cpu,
               r.dagster_share, r.run_cpu - r.cpu, r.icepack_share] for index, r in enumerate(rounds)]
    shares.append(["best of each", min(r.trivial.launch_to_end for r in rounds),
                   min(r.trivial_in_cpu for r in rounds), min(r.trivial_cpu for r in rounds),
                   min(r.dagster_share for r in rounds), min(r.run_cpu - r.cpu for r in rounds),
                   min(r.icepack_share for r in rounds)])
    table(
        "CPU a run process adds to its work: a one-op job that does nothing, in this process and as a "
        "real run on the same deployment (what its real run adds is Dagster's share), against what the "
        "health-sync run adds (the rest is icepack's share: its definitions and their libraries)",
        ["round", "do-nothing real run s (launch to end)", "do-nothing in process CPU s",
         "do-nothing real run CPU s", "Dagster's share CPU s", "health sync adds CPU s",
         "icepack's share CPU s"],
        shares,
    )


def fleet_and_settings(
    bench: Bench, count: int, platform: dict[str, Any], **more: Any
) -> tuple[list[Any], dict[str, Any]]:
    """bench/control_plane.py's fleet of `count` critical tables (made once per work directory) and the
    settings of a deployment that syncs it, its sensors stopped, with `platform` knobs on top."""
    wall, _, keys = timed(lambda: _tables.fleet(bench, count, prefix=f"ctl{count}", appends=8))
    print(f"fleet of {count:,} registered tables ready in {wall:.1f} s (made once per work directory)")
    config: dict[str, Any] = {
        "home": str(bench.workdir / "home"),
        "catalogs": {"lake": {"kind": "embedded"}},
        "spark": {"master": "local[2]", "driver_memory": "2g"},
        "include": [f"lake.{NAMESPACE}.ctl{count}_[0-9]*"],
        "platform": {"sensors_running_by_default": False} | platform,
        **more,
    }
    return keys, config


def full_sync(bench: Bench, count: int) -> None:
    """A first and a steady sync of `count` tables as real runs through the real schedule and queue,
    with the steady sync also run serially in this process."""
    print(f"Whole health sync of {count:,} tables as real runs; {machine()}")
    keys, config = fleet_and_settings(bench, count, {"health_sync_cron": "* * * * *"})
    settings = load_settings(**config)
    job = build_definitions(settings).resolve_job_def(HEALTH_SYNC)
    batch = settings.platform.health_sync_batch_size
    platform = Platform(bench.workdir / f"platform-sync{count}", config, queue_interval_seconds=1)
    rows: list[list[Any]] = []
    try:
        platform.instance.add_dynamic_partitions(PARTITIONS_NAME, [key.text for key in keys])
        platform.start()
        first = scheduled_sync(platform, len(range(0, count, batch)))
        rows.append(sync_row(platform, "first sync (every table new), real runs", count, first))
        # the schedule's own batches: the partitions in the instance's order, as its tick reads them
        partitions = platform.instance.get_dynamic_partitions(PARTITIONS_NAME)
        requests = health_sync_requests(
            HEALTH_SYNC, partitions, batch, "bench", settings.platform.health_sync_writes
        )
        serial, _, results = timed(lambda: [
            job.execute_in_process(instance=platform.instance, run_config=dict(request.run_config) | QUIET)
            for request in requests
        ])
        assert all(result.success for result in results)
        written = tables_written(platform, [result.run_id for result in results])
        rows.append([f"steady sync, its {len(requests)} runs one after the other in this process", count,
                     written, len(requests), serial, "-", serial / len(requests), "-", "-", count / serial])
        steady = scheduled_sync(platform, len(requests))
        rows.append(sync_row(platform, "steady sync (no table changed), real runs", count, steady))
    finally:
        platform.stop()
    table(
        f"A whole health sync of {count:,} tables: the real schedule's tick, the queue (observation runs "
        "two at once, the repository's dagster.yaml), Dagster's default run launcher, SQLite storage",
        ["sync", "tables", "written", "runs", "wall s (first queued to last end)", "at most at once",
         "per run s (launch to end)", "of which process start s", "slowest run s", "tables/s"],
        rows,
    )
    print(f"\nsteady sync as real runs vs its runs one after the other in one process: "
          f"{ratio(sync_wall(steady), serial)} of the wall time")


def scheduled_sync(platform: Platform, runs: int) -> list[RunTimes]:
    """Start the schedule, wait for the tick that requests `runs` health-sync runs, stop the schedule
    (no second tick joins), and wait for those runs: their times, ordered by end."""
    health_sync = dg.RunsFilter(job_name=HEALTH_SYNC)
    known = {r.dagster_run.run_id for r in platform.instance.get_run_records(filters=health_sync)}

    def new_runs() -> list[str]:
        records = platform.instance.get_run_records(filters=health_sync)
        return [r.dagster_run.run_id for r in records if r.dagster_run.run_id not in known]

    platform.schedule("start", SCHEDULE_NAME, location=ICEPACK_LOCATION)
    deadline = time.monotonic() + 180
    while len(requested := new_runs()) < runs:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(requested)} of {runs} runs requested after 180 s; see {platform.log}")
        time.sleep(0.5)
    platform.schedule("stop", SCHEDULE_NAME, location=ICEPACK_LOCATION)
    requested = new_runs()
    assert len(requested) == runs, f"{len(requested)} runs requested, expected {runs} (a second tick?)"
    times = platform.wait(requested, timeout=7_200)
    failed = [t.run_id for t in times if t.status != dg.DagsterRunStatus.SUCCESS]
    assert not failed, f"runs that did not succeed: {failed}; see {platform.log}"
    return sorted(times, key=lambda t: t.ended)


def at_most_at_once(times: list[RunTimes]) -> int:
    """The most runs that were between launch and end at the same moment."""
    edges = sorted([(t.launched, 1) for t in times] + [(t.ended, -1) for t in times])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def tables_written(platform: Platform, run_ids: list[str]) -> int:
    """Tables whose `table_health` the runs wrote: all of them in a first sync; in a steady one those
    that changed or were due their periodic rewrite (hourly for a table needing attention, each at its
    own moment: `domain/health/sync_writes.py`), so a sync after a long first one writes more."""
    kind = dg.DagsterEventType.ASSET_MATERIALIZATION
    return sum(
        1
        for run_id in run_ids
        for record in platform.instance.get_records_for_run(run_id, of_type=kind, limit=1_000_000).records
        if (event := record.event_log_entry.dagster_event) is not None
        and event.asset_key == DEFAULT_NAMES.table_health
    )


def sync_wall(times: list[RunTimes]) -> float:
    """From the first run queued to the last run's end (`times` ordered by end)."""
    return times[-1].ended - min(t.created for t in times)


def sync_row(platform: Platform, name: str, count: int, times: list[RunTimes]) -> list[Any]:
    wall = sync_wall(times)
    written = tables_written(platform, [t.run_id for t in times])
    return [name, count, written, len(times), wall, at_most_at_once(times),
            sum(t.launch_to_end for t in times) / len(times),
            sum(t.process_start for t in times) / len(times),
            max(t.launch_to_end for t in times), count / wall]


if __name__ == "__main__":
    main()
