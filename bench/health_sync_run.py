"""Benchmark: a steady health-sync run of 1,000 tables as a real run against the same run in process.

The fleet is bench/control_plane.py's (registered copies of one small real table, every table
critical). A real Dagster deployment on this machine (`bench/_platform.py`: the repository's
dagster.yaml, a real daemon, Dagster's default run launcher) holds the partitions; one first sync
writes every table. Then, alternately, the same steady run (writes: changes, nothing changed) is
executed in this process (`execute_in_process` on the same instance) and launched as a run through the
queue (`dagster job launch`, the daemon's launcher, a `dagster api execute_run` process that imports
the definitions and runs the job's one op with its in-process executor). Printed side by side: the
in-process wall time, the real run from launch to end (process start, imports, definitions,
execution; not the queue wait), and the ratio.

    .venv/bin/python bench/health_sync_run.py [--quick] [--tables N] [--rounds N]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _tables  # noqa: E402
from bench._fixtures import NAMESPACE, Bench, arguments, machine, ratio, table, timed  # noqa: E402
from bench._platform import Platform  # noqa: E402
from icepack_dagster.definitions import build_definitions  # noqa: E402
from icepack_dagster.defs.health_sync.job import health_sync_run_config  # noqa: E402
from icepack_dagster.defs.partitions import PARTITIONS_NAME  # noqa: E402
from icepack_dagster.settings import load_settings  # noqa: E402

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def main() -> None:
    args = arguments(
        __doc__.splitlines()[0],
        lambda p: (
            p.add_argument("--tables", type=int, help="tables in the run (default 1,000; 200 with --quick)"),
            p.add_argument("--rounds", type=int, default=3, help="in-process/real-run pairs (default 3)"),
        ),
    )
    bench = Bench(args.workdir)
    count = args.tables or (200 if args.quick else 1_000)
    print(f"Health-sync run benchmark ({count:,} tables); {machine()}")
    wall, _, keys = timed(lambda: _tables.fleet(bench, count, prefix=f"ctl{count}", appends=8))
    print(f"fleet of {count:,} registered tables ready in {wall:.1f} s (made once per work directory)")
    config: dict[str, Any] = {
        "home": str(bench.workdir / "home"),
        "catalogs": {"lake": {"kind": "embedded"}},
        "spark": {"master": "local[2]", "driver_memory": "2g"},
        "status_workers": 1,
        "include": [f"lake.{NAMESPACE}.ctl{count}_[0-9]*"],
        "platform": {"sensors_running_by_default": False, "health_sync_batch_size": count},
    }
    defs = build_definitions(load_settings(**config))
    job = defs.resolve_job_def("health_sync")
    partitions = [key.text for key in keys]
    run_config = health_sync_run_config(partitions, "changes")

    platform = Platform(bench.workdir / "platform-health-sync", config, queue_interval_seconds=1)
    rows: list[list[Any]] = []
    try:
        instance = platform.instance
        instance.add_dynamic_partitions(PARTITIONS_NAME, partitions)
        def in_process() -> Any:
            return job.execute_in_process(instance=instance, run_config=run_config | QUIET)

        wall, _, first = timed(in_process)
        assert first.success
        rows.append([f"first sync, in process ({count:,} tables written)", wall, *["-"] * 6])
        platform.start()
        inner, real = [], []
        for _ in range(args.rounds):
            wall, cpu, result = timed(in_process)
            assert result.success
            inner.append((wall, cpu))
            run_id = platform.launch("health_sync", run_config | QUIET)
            times, worker_cpu = platform.wait_measuring_cpu(run_id, timeout=600)
            assert times.status.value == "SUCCESS", f"run {run_id} ended {times.status}; see {platform.log}"
            real.append((times, worker_cpu))
        for index, ((wall, cpu), (run, worker_cpu)) in enumerate(zip(inner, real, strict=True)):
            rows.append([f"steady run {index + 1}", wall, run.launch_to_end, run.process_start,
                         ratio(run.launch_to_end, wall), cpu, worker_cpu, ratio(worker_cpu, cpu)])
        best_wall, best_cpu = min(w for w, _ in inner), min(c for _, c in inner)
        best_run, best_worker = min(r.launch_to_end for r, _ in real), min(c for _, c in real)
        rows.append(["best of each (a shared machine only adds time)", best_wall, best_run,
                     min(r.process_start for r, _ in real), ratio(best_run, best_wall), best_cpu, best_worker,
                     ratio(best_worker, best_cpu)])
    finally:
        platform.stop()
    table(
        f"A steady health-sync run of {count:,} tables (nothing changed): in this process vs as a real run "
        "(daemon, default run launcher, SQLite storage)",
        ["run", "in process s", "real run s (launch to end)", "of which process start s",
         "real / in process", "in process CPU s", "run worker CPU s", "CPU real / in process"],
        rows,
    )


if __name__ == "__main__":
    main()
