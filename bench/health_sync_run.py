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
as the deployment runs it (`bench/_whole_sync.py`): the real `health_sync_schedule` ticking in the real
daemon, one run per 1,000 tables through the queue, each a real run process; a first sync, a steady
sync after real commits to 1% of the tables (also run one after the other in this process), and a sync
after real commits to a quarter of them. With `--postgres`, Dagster's storage and icepack's state
database are fresh PostgreSQL databases on the local server, dropped afterwards; with `--pgbouncer`
too, Dagster's is reached through a PgBouncer in session mode (bench/_pgbouncer.py). With `--catalog rest`
or `glue` the fleet is registered in Iceberg's REST server 1.11.0 (conditional loads) or moto's Glue,
started by the benchmark, and synced there (the commits go through that catalog too). `--healthy-fleet`
syncs a fleet of healthy tables instead (bench/_whole_sync.py, `FleetShape`), `--batch-size` sets the
tables per run, `--no-quarter` leaves out the last sync.

    .venv/bin/python bench/health_sync_run.py [--quick] [--tables N] [--rounds N]
        [--full-sync [--catalog lake|rest|glue] [--postgres [--pgbouncer]] [--healthy-fleet]
                     [--batch-size N] [--no-quarter]]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._fixtures import Bench, arguments, machine, ratio, table  # noqa: E402
from bench._platform import Platform, RunTimes  # noqa: E402
from bench._whole_sync import (  # noqa: E402
    HEALTH_SYNC,
    ICEPACK_LOCATION,
    QUIET,
    FleetShape,
    fleet_and_settings,
    full_sync,
    timed,
)
from bench.trivial_location import defs as trivial_defs  # noqa: E402
from bench.trivial_location import trivial  # noqa: E402
from icepack_dagster.config.settings import load_settings  # noqa: E402
from icepack_dagster.definitions import build_definitions  # noqa: E402
from icepack_dagster.defs.health_sync.job import health_sync_run_config  # noqa: E402
from icepack_dagster.defs.partitions import PARTITIONS_NAME  # noqa: E402

TRIVIAL_LOCATION = "bench.trivial_location"
TRIVIAL_JOB = trivial.name


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
            p.add_argument("--postgres", action="store_true",
                           help="with --full-sync: Dagster's storage and icepack's state in PostgreSQL"),
            p.add_argument("--catalog", default="lake", choices=("lake", "rest", "glue"),
                           help="with --full-sync: the fleet in the embedded SQL catalog (default), "
                           "Iceberg's REST server 1.11.0 or moto's Glue"),
            p.add_argument("--pgbouncer", action="store_true",
                           help="with --postgres: Dagster's storage through PgBouncer (session mode)"),
            p.add_argument("--healthy-fleet", action="store_true",
                           help="with --full-sync: a fleet of healthy tables (rewritten daily) instead of "
                           "critical ones (rewritten hourly)"),
            p.add_argument("--batch-size", type=int,
                           help="with --full-sync: tables per health-sync run (default: the platform's)"),
            p.add_argument("--no-quarter", action="store_true",
                           help="with --full-sync: without the sync after commits to a quarter of the fleet"),
        ),
    )
    bench = Bench(args.workdir)
    count = args.tables or (200 if args.quick else 1_000)
    if args.full_sync:
        shape = FleetShape(args.healthy_fleet, args.batch_size, quarter=not args.no_quarter)
        full_sync(bench, count, args.postgres, args.pgbouncer, args.catalog, shape)
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


if __name__ == "__main__":
    main()
