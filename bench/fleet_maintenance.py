"""Benchmark: fleet maintenance throughput through the Dagster platform, against one plain Spark session.

N small tables (8 one-row appends: critical with small files) and a few large ones (8 appends of
30,000 rows, above the first sizing tier) are maintained end to end by a real Dagster deployment on
this machine (`bench/_platform.py`: the repository's dagster.yaml with its queue limits, a real
daemon running the real sensors, Dagster's default run launcher, real Spark in every run), once per
path, each path on its own fresh copies of the tables:

- *a run per table*: today's path (`maintenance_batch_size` 1), a local Spark per run;
- *batch runs, local Spark*: tables of the smallest sizing tier share `maintenance_batch` runs of up
  to `--batch-size` tables in one local Spark per run, `--batch-workers` tables at a time (each worker
  thread in a Spark session of its own); large tables keep a run each;
- *batch runs on a Spark Connect server*: the same runs with `spark.master=sc://...`, sending their
  SQL to one long-lived server started as `icepack spark connect-server` starts one
  (`spark/connect_server.py`, `--connect-master`, `--connect-driver-memory`); the large tables'
  one-table runs go there too. The server is started and warmed (`--warm-up` tables maintained
  through icepack's engine, untimed) before the platform starts. Its batches run without generated
  code, as icepack's do on a Connect server (`spark.connect_batch_codegen`); `--connect-batch-codegen`
  keeps it, for the two side by side.

With `--postgres`, each path's deployment keeps Dagster's storage and icepack's state in fresh
PostgreSQL databases (bench/_postgres.py), as production does; else SQLite; with `--pgbouncer` too,
Dagster's is reached through a PgBouncer in session mode, as docs/DAGSTER.md advises. The fleet summary's
automation sensor keeps its default interval (2 minutes). All with the same platform knobs (sensor
every 5 s, 2 runs per tick, 2 in flight; on the Connect path `--connect-in-flight`, since the runs in
flight are the server's concurrency; a tick judges
`max(50, 2 x --batch-size)` tables, so that it can fill its batches). Before the daemon
starts, one in-process health sync marks every table critical (not timed). Timed from the first
maintenance run's launch to the last table's `maintained_table` event. The floor is one plain PySpark
session, warmed like the server (`--warm-up` tables maintained through icepack's engine, untimed),
executing the statements the Connect path sent (SETs and CALLs, table names swapped; the session
setup once per session, as the runner sends it) back to back on
a copy of its tables, after the server stopped. The Connect path and the floor take all N small
tables; the two older paths, at about 45 s (run per table) and 60 s per batch of fixed cost, may take
a sample (`--per-table-sample`, `--local-batch-sample`; 0 skips a path), and their rates are their
sample's. Printed side by side: tables per hour, Spark CALL seconds, the per-table fixed overhead (run
seconds from launch to end, summed over runs, minus the CALL seconds, per table), tables/h against a
run per table, and the wall time per small table against the floor's; and each path's runs in launch
order (launch, first event, the first and last table's events, end), which shows where a path's wall
time went between its tables (queue and sensor waits, process starts). With `--batch-workers` above 1
the fixed overhead counts a batch run's seconds once per worker, and for context the benchmark also
times that many plain sessions of the floor's process running the small tables' statements at once,
on another copy. The *Connect floor* separates the server's own cost from the platform's: right after
the Connect path, with the server still warm, `--batch-workers` Connect sessions with no Dagster and no
icepack in between, set as the path's batches are, send the same statements at once (another copy,
`--connect-floor-sample` small tables), so the Connect path against it is what the runs, the status
reads and the events add. Every table's contents (row count, order-independent checksum) are checked
unchanged; the server JVM's open files are printed before and after the fleet.

    .venv/bin/python bench/fleet_maintenance.py [--small N] [--large N] [--batch-size N] [--batch-workers N]
        [--per-table-sample N] [--local-batch-sample N] [--warm-up N] [--connect-in-flight N]
        [--connect-floor-sample N] [--connect-batch-codegen] [--postgres [--pgbouncer]]
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dagster as dg  # noqa: E402
import pyarrow as pa  # noqa: E402

from bench import _pgbouncer, _postgres  # noqa: E402
from bench._fixtures import NAMESPACE, Bench, arguments, machine, ratio, table  # noqa: E402
from bench._platform import Platform, RunTimes  # noqa: E402
from bench._warm_spark import connect_settings, open_files, warm_connect_server, warm_up  # noqa: E402
from icepack_dagster.config.settings import load_settings  # noqa: E402
from icepack_dagster.definitions import build_definitions  # noqa: E402
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES  # noqa: E402
from icepack_dagster.defs.event_reads import metadata_of  # noqa: E402
from icepack_dagster.defs.health_sync.job import health_sync_run_config  # noqa: E402
from icepack_dagster.defs.materialization_codec import decode_report  # noqa: E402
from icepack_dagster.defs.partitions import (
    PARTITIONS_NAME,  # noqa: E402
)
from icepack_dagster.defs.run_tags import KIND_TAG, MAINTENANCE  # noqa: E402
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport  # noqa: E402
from icepack_dagster.domain.sql.procedures import SESSION_SETUP  # noqa: E402
from icepack_dagster.spark.connect import command_rows  # noqa: E402
from icepack_dagster.spark.connect_server import ConnectServerSize  # noqa: E402
from icepack_dagster.spark.session import build_spark_session, connect_batch_conf, is_connect_session  # noqa: E402
from tests.network import free_port  # noqa: E402
from tests.tables_testkit import arrow_fingerprint  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
LARGE_ROWS = 30_000
TIERS = [  # classification only (run sizing stays off: every run uses the bench's local[2] Spark)
    {"name": "small", "below_bytes": 1_000_000, "cpu": "1", "memory": "4Gi", "spark_master": "local[2]",
     "driver_memory": "2g", "shuffle_partitions": 4, "max_runtime_seconds": 3600},
    {"name": "large", "cpu": "2", "memory": "4Gi", "spark_master": "local[2]", "driver_memory": "2g",
     "shuffle_partitions": 4, "max_runtime_seconds": 3600},
]


@dataclass
class PathResult:
    name: str
    small: list[str]
    large: list[str]
    reports: dict[str, MaintenanceReport]
    event_times: dict[str, float]
    event_runs: dict[str, str]  # the run that wrote each table's event
    runs: list[RunTimes]
    first_launch: float
    workers: int  # tables a batch run maintains at once: its run seconds count this many times

    def call_seconds(self, tables: list[str]) -> float:
        return sum(r.duration_seconds for t in tables for r in self.reports[t].results if r.statements)

    def wall(self, tables: list[str]) -> float:
        return max(self.event_times[t] for t in tables) - self.first_launch


def make_table(bench: Bench, name: str, rows_per_append: int) -> str:
    table = bench.catalog.create_table((NAMESPACE, name), schema=SCHEMA)
    for n in range(8):
        ids = range(n * rows_per_append, (n + 1) * rows_per_append)
        table.append(pa.table({"id": list(ids), "name": [f"row {i}" for i in ids]}, schema=SCHEMA))
    return f"lake.{NAMESPACE}.{name}"


def make_set(bench: Bench, prefix: str, small: int, large: int) -> tuple[list[str], list[str]]:
    return (
        [make_table(bench, f"{prefix}_s{i:04d}", 1) for i in range(small)],
        [make_table(bench, f"{prefix}_l{i:02d}", LARGE_ROWS) for i in range(large)],
    )


def contents(bench: Bench, tables: list[str]) -> dict[str, Any]:
    return {t: arrow_fingerprint(bench.catalog.load_table(t.split(".", 1)[1])) for t in tables}


def run_path(bench: Bench, name: str, prefix: str, tables: tuple[list[str], list[str]], batch_size: int,
             timeout: float, master: str = "local[2]", in_flight: int = 2, workers: int = 2,
             postgres: bool = False, pgbouncer: bool = False, batch_codegen: bool = False) -> PathResult:
    """Maintain one set of tables through a fresh deployment (with `postgres`, Dagster's storage and
    icepack's state in fresh PostgreSQL databases, as production has them; with `pgbouncer` too,
    Dagster's reached through a PgBouncer in session mode, bench/_pgbouncer.py); returns what its runs
    did and when."""
    with contextlib.ExitStack() as stack:
        more: dict[str, Any] = {}
        dagster_database = None
        port = _postgres.PORT
        if postgres:
            dagster_database = stack.enter_context(_postgres.fresh_database("fleet_dagster"))
            state_database = stack.enter_context(_postgres.fresh_database("fleet_state"))
            more["state_url"] = _postgres.sqlalchemy_url(state_database)
            if pgbouncer:
                port = stack.enter_context(_pgbouncer.pgbouncer(bench.workdir / f"pgbouncer-{prefix}"))
        return _run_path(bench, name, prefix, tables, batch_size, timeout, master, in_flight, workers,
                         dagster_database, more, port, batch_codegen)


def _run_path(bench: Bench, name: str, prefix: str, tables: tuple[list[str], list[str]], batch_size: int,
              timeout: float, master: str, in_flight: int, workers: int, dagster_database: str | None,
              more: dict[str, Any], postgres_port: int, batch_codegen: bool) -> PathResult:
    small, large = tables
    everything = small + large
    config: dict[str, Any] = {
        "home": str(bench.workdir / "home"),
        "catalogs": {"lake": {"kind": "embedded"}},
        "spark": {"master": master, "driver_memory": "2g"}
        | ({"connect_timeout_seconds": 120, "connect_batch_codegen": batch_codegen}
           if master.startswith("sc://") else {}),
        "status_workers": 1,
        "include": [f"lake.{NAMESPACE}.{prefix}_*"],
        "platform": {
            "sensors_running_by_default": True,
            "health_sync_cron": "0 0 1 1 *",  # no scheduled sync during the benchmark
            "maintenance_interval_seconds": 5,
            "discovery_interval_seconds": 30,
            "maintenance_runs_per_tick": 2,
            "max_maintenance_in_flight": in_flight,
            "maintenance_batch_size": batch_size,
            "maintenance_batch_workers": workers,
            # a tick judges this many tables and forms its batches from them: two full batches per tick
            "maintenance_candidates_per_tick": max(50, 2 * batch_size),
            "sizing_tiers": TIERS,
        },
    } | more
    platform = Platform(bench.workdir / f"platform-{prefix}", config, queue_interval_seconds=1,
                        postgres_database=dagster_database, postgres_port=postgres_port)
    try:
        instance = platform.instance
        instance.add_dynamic_partitions(PARTITIONS_NAME, everything)
        defs = build_definitions(load_settings(**config))
        synced = defs.resolve_job_def("health_sync").execute_in_process(
            instance=instance, run_config=health_sync_run_config(everything, "all")
        )
        assert synced.success
        platform.start()
        events = _wait_for_maintenance(instance, everything, timeout, platform)
        maintenance = instance.get_run_records(dg.RunsFilter(tags={KIND_TAG: MAINTENANCE}))
        runs = [r.dagster_run.run_id for r in maintenance]
        times = platform.wait(runs, timeout=timeout)
    finally:
        platform.stop()
    reports = {}
    for partition, record in events.items():
        report = decode_report(metadata_of(record))
        assert report is not None, partition
        reports[partition] = report
    return PathResult(name, small, large, reports, {p: r.timestamp for p, r in events.items()},
                      {p: r.run_id for p, r in events.items()}, times, min(t.launched for t in times),
                      workers if batch_size > 1 else 1)


def print_timeline(path: PathResult) -> None:
    """Each run of a path, in launch order, in seconds from the path's first launch: where its wall
    time went (queue and sensor waits between runs, process start, tables, the end of the run)."""
    print(f"{path.name}: runs in launch order (s from the first launch)")
    for run in sorted(path.runs, key=lambda r: r.launched):
        start = path.first_launch
        tables = [t for t, run_id in path.event_runs.items() if run_id == run.run_id]
        times = sorted(path.event_times[t] - start for t in tables)
        large = sum(t in path.large for t in tables)
        span = f"tables' events {times[0]:.1f}-{times[-1]:.1f}" if times else "no table event"
        print(f"  {len(tables)} tables ({large} large): launched {run.launched - start:.1f}, "
              f"running {run.started - start:.1f}, {span}, ended {run.ended - start:.1f}")


def _wait_for_maintenance(
    instance: dg.DagsterInstance, tables: list[str], timeout: float, platform: Platform
) -> dict[str, Any]:
    """Each table's first `maintained_table` event (materialization or observation of a failure). The
    times are the events' own, so the event log is read every 5 s, not more often: reading it costs CPU
    the Spark server on the same cores would otherwise have (the floor runs with no such reader)."""
    deadline = time.monotonic() + timeout
    found: dict[str, Any] = {}
    while len(found) < len(tables):
        if time.monotonic() > deadline:
            missing = sorted(set(tables) - set(found))
            raise TimeoutError(f"{len(missing)} table(s) not maintained after {timeout:.0f} s: "
                               f"{missing[:5]}; see {platform.log}")
        filters = dg.AssetRecordsFilter(asset_key=DEFAULT_NAMES.maintained_table)
        records = [*instance.fetch_materializations(filters, limit=10_000).records,
                   *instance.fetch_observations(filters, limit=10_000).records]
        for record in records:
            partition = record.partition_key
            if partition in tables and partition not in found:
                found[partition] = record
        if len(found) < len(tables):
            time.sleep(5.0)
    return found


def floor_statements(reference: PathResult, table: str, copy: str) -> list[str]:
    """The statements `reference` sent for `table`, addressed to the floor's `copy` (name swapped): a
    result lists the session setup with each action, which the runner sends once per session
    (`floor_session`), not per action."""
    name, copy_name = table.rsplit(".", 1)[1], copy.rsplit(".", 1)[1]
    results = reference.reports[table].results
    return [statement.replace(name, copy_name) for result in results for statement in result.statements
            if statement not in SESSION_SETUP]


def floor_session(spark: Any) -> Any:
    """A plain session set up as the runner sets up each of its sessions."""
    session = spark.newSession()
    for statement in SESSION_SETUP:
        session.sql(statement)
    return session


def run_statements(spark: Any, statements: list[str]) -> None:
    """As the runner runs them: a SET runs when sent, a CALL's rows are collected from the driver (in a
    local session) or read from the Connect server's answer (`command_rows`)."""
    for statement in statements:
        result = spark.sql(statement)
        if statement.startswith("CALL"):
            command_rows(result) if is_connect_session(spark) else result.collect()


def run_floor(bench: Bench, reference: PathResult, tables: list[str], floor_tables: list[str]) -> float:
    """Wall seconds of one plain session running the statements `reference` ran on `tables`, on the
    floor's copies, back to back."""
    statements = [s for ref, copy in zip(tables, floor_tables, strict=True)
                  for s in floor_statements(reference, ref, copy)]
    session = floor_session(bench.spark)
    started = time.perf_counter()
    run_statements(session, statements)
    return time.perf_counter() - started


def run_floor_in_parallel(spark: Any, reference: PathResult, tables: list[str], floor_tables: list[str],
                          sessions: int) -> float:
    """Wall seconds of `sessions` sessions of `spark` (the floor's plain session, or a Connect session
    on the server) running those statements at once, a table at a time each."""
    local = threading.local()
    work = [floor_statements(reference, ref, copy) for ref, copy in zip(tables, floor_tables, strict=True)]

    def one(statements: list[str]) -> None:
        if not hasattr(local, "session"):
            local.session = floor_session(spark)
        run_statements(local.session, statements)

    started = time.perf_counter()
    with ThreadPoolExecutor(sessions) as pool:
        list(pool.map(one, work))
    return time.perf_counter() - started


def run_connect_path(bench: Bench, args: Any, prefix: str, tables: tuple[list[str], list[str]],
                     warm_tables: list[str], floor_tables: list[str]) -> tuple[PathResult, str, float]:
    """Start and warm a Connect server, maintain `tables` through the platform with
    `spark.master=sc://...`, then run the Connect floor on `floor_tables`, copies of the first small
    tables; returns the path, the server's open files before and after, and the Connect floor's wall
    seconds."""
    size = ConnectServerSize(master=args.connect_master, driver_memory=args.connect_driver_memory,
                             port=free_port())
    log = bench.workdir / f"connect-{prefix}.log"
    with warm_connect_server(bench, size, log, warm_tables) as (url, server):
        files_before = open_files(server)
        name = (f"batch runs on a Spark Connect server ({args.connect_master}, up to {args.batch_size}, "
                f"{args.batch_workers} at once, {args.connect_in_flight} run(s) in flight"
                + (", codegen kept)" if args.connect_batch_codegen else ")"))
        path = run_path(bench, name, prefix, tables, args.batch_size, args.timeout, master=url,
                        in_flight=args.connect_in_flight, workers=args.batch_workers, postgres=args.postgres,
                        pgbouncer=args.pgbouncer, batch_codegen=args.connect_batch_codegen)
        files = f"server JVM open files {files_before} -> {open_files(server)}"
        settings = connect_settings(bench, url)
        if not args.connect_batch_codegen:  # the Connect floor's sessions are set as the path's batches are
            conf = settings.spark.conf | connect_batch_conf(settings)
            spark = settings.spark.model_copy(update={"conf": conf})
            settings = settings.model_copy(update={"spark": spark})
        base = build_spark_session(settings)
        try:
            floor_wall = run_floor_in_parallel(base, path, path.small[:len(floor_tables)], floor_tables,
                                               args.batch_workers)
        finally:
            base.stop()
    return path, files, floor_wall


def main() -> None:
    args = arguments(
        __doc__.splitlines()[0],
        lambda p: (
            p.add_argument("--small", type=int, default=10, help="small tables: the Connect path, the floor"),
            p.add_argument("--large", type=int, default=2, help="large tables per path (default 2)"),
            p.add_argument("--batch-size", type=int, default=20, help="maintenance_batch_size (default 20)"),
            p.add_argument("--batch-workers", type=int, default=2,
                           help="maintenance_batch_workers: tables a batch run maintains at once"),
            p.add_argument("--per-table-sample", type=int, default=None,
                           help="small tables for today's run-per-table path (default: --small; 0 skips it)"),
            p.add_argument("--local-batch-sample", type=int, default=None,
                           help="small tables for the local-Spark batch path (default: --small; 0 skips it)"),
            p.add_argument("--warm-up", type=int, default=3,
                           help="tables maintained untimed on the Connect server and the floor's session"),
            p.add_argument("--connect-master", default="local[2]", help="the Connect server's master"),
            p.add_argument("--connect-driver-memory", default="2g", help="the Connect server's heap"),
            p.add_argument("--connect-in-flight", type=int, default=2,
                           help="maintenance runs at once on the Connect path (others: 2)"),
            p.add_argument("--connect-batch-codegen", action="store_true",
                           help="spark.connect_batch_codegen on the Connect path"),
            p.add_argument("--connect-floor-sample", type=int, default=None,
                           help="small tables for the Connect floor (default: --small)"),
            p.add_argument("--timeout", type=float, default=3600, help="seconds per path before giving up"),
            p.add_argument("--postgres", action="store_true",
                           help="Dagster's storage and icepack's state in PostgreSQL, as in production"),
            p.add_argument("--pgbouncer", action="store_true",
                           help="with --postgres: Dagster's storage through PgBouncer (session mode)"),
        ),
    )
    bench = Bench(args.workdir)
    tag = uuid.uuid4().hex[:6]
    samples = {"run": _sample(args.per_table_sample, args.small),
               "batch": _sample(args.local_batch_sample, args.small),
               "connect": args.small, "floor": args.small,
               "floors": args.small if args.batch_workers > 1 else 0,
               "cfloor": _sample(args.connect_floor_sample, args.small)}
    storage = "PostgreSQL (Dagster's storage and icepack's state)" if args.postgres else "SQLite"
    if args.pgbouncer:
        if not args.postgres:
            raise SystemExit("--pgbouncer needs --postgres: it pools the connections to Dagster's PostgreSQL")
        storage += ", Dagster's through PgBouncer"
    print(f"Fleet maintenance benchmark, {storage} storage ({args.small} small + {args.large} large tables "
          f"for the Connect path and the floor; samples: {samples['run']} small for a run per table, "
          f"{samples['batch']} for local batches); {machine()}")
    small_only = ("floors", "cfloor")
    # a path's deployment includes `fm{tag}_{path}_*`: no other set's name may start with a path's name
    # followed by "_" (a set named connect_floor was maintained by the Connect path's daemon)
    sets = {name: make_set(bench, f"fm{tag}_{name}", n, 0 if name in small_only else args.large)
            for name, n in samples.items() if n}
    warm = {name: make_set(bench, f"fm{tag}_warm{name}", args.warm_up, 0)[0] for name in ("connect", "floor")}
    before = {name: contents(bench, [*s[0], *s[1]]) for name, s in sets.items()}

    paths = []
    if samples["run"]:
        paths.append(run_path(bench, "a run per table (today)", f"fm{tag}_run", sets["run"], 1, args.timeout,
                              postgres=args.postgres, pgbouncer=args.pgbouncer))
    if samples["batch"]:
        paths.append(run_path(bench, f"batch runs, local Spark per run (up to {args.batch_size}, "
                              f"{args.batch_workers} at once)", f"fm{tag}_batch", sets["batch"],
                              args.batch_size, args.timeout, workers=args.batch_workers,
                              postgres=args.postgres, pgbouncer=args.pgbouncer))
    connect, server_files, connect_floor_wall = run_connect_path(
        bench, args, f"fm{tag}_connect", sets["connect"], warm["connect"], sets["cfloor"][0]
    )
    paths.append(connect)
    for path in paths:  # as soon as they are known: a later failure keeps these
        tables = path.small + path.large
        print(f"{path.name}: {len(tables)} tables in {path.wall(tables):.1f} s, {len(path.runs)} runs, "
              f"{path.call_seconds(tables):.1f} s of Spark actions", flush=True)
        print_timeline(path)
    warm_up(bench.settings, bench.spark, warm["floor"])
    floor_small, floor_large = sets["floor"]
    floor_wall_small = run_floor(bench, connect, connect.small, floor_small)
    floor_wall_large = run_floor(bench, connect, connect.large, floor_large)
    floors_wall = (run_floor_in_parallel(bench.spark, connect, connect.small, sets["floors"][0],
                                         args.batch_workers) if "floors" in sets else None)

    for name, tables in sets.items():
        after = contents(bench, [*tables[0], *tables[1]])
        assert after == before[name], f"contents changed in the {name} set"
    for path in paths:
        failed = [t for t, r in path.reports.items() if r.outcome != "succeeded"]
        assert not failed, f"{path.name}: not succeeded: {[(t, path.reports[t].outcome) for t in failed]}"
    print_results(args.small, floor_wall_small, paths, has_baseline=bool(samples["run"]))
    print(f"large tables: the floor runs their statements in {floor_wall_large:.1f} s; {server_files} "
          f"over the Connect path")
    if floors_wall is not None:
        rate = 3600 * args.small / floors_wall
        print(f"context: {args.batch_workers} plain sessions of the floor's process at once run the small "
              f"tables' statements in {floors_wall:.1f} s ({rate:.0f} tables/h); the Connect path's small "
              f"tables took {ratio(connect.wall(connect.small), floors_wall)} that")
    floor_n = len(sets["cfloor"][0])
    per_table = connect_floor_wall / floor_n
    print(f"Connect floor: {args.batch_workers} Connect sessions at once on the same server, no Dagster, "
          f"run the statements of {floor_n} small tables in {connect_floor_wall:.1f} s ({per_table:.3f} "
          f"s/table, {ratio(per_table, floor_wall_small / args.small)} the floor's per table); the Connect "
          f"path's small tables took {ratio(connect.wall(connect.small) / len(connect.small), per_table)} "
          "that per table (what the platform adds)")
    print("every table's contents (row count, checksum) unchanged; every maintenance succeeded; "
          f"load average {os.getloadavg()[0]:.1f} at the end")


def _sample(flag: int | None, small: int) -> int:
    """A path's small tables: the flag's sample (0 skips the path), or all of them."""
    return small if flag is None else min(flag, small)


def print_results(small: int, floor_wall_small: float, paths: list[PathResult], has_baseline: bool) -> None:
    """One row per path; a sampled path's rates are its sample's, its ratio to the floor per table."""
    floor_per_table = floor_wall_small / small
    rows: list[list[Any]] = [[
        "floor: one plain PySpark session (warmed), same statements", f"{small}", floor_wall_small,
        3600 / floor_per_table, floor_wall_small, "-", "-", "1.00x",
    ]]
    baseline_rate = None
    for path in paths:
        tables = path.small + path.large
        small_wall = path.wall(path.small)
        run_seconds = sum(r.launch_to_end for r in path.runs)
        overhead = (run_seconds * path.workers - path.call_seconds(tables)) / len(tables)
        rate = 3600 * len(tables) / path.wall(tables)
        baseline_rate = baseline_rate or (rate if has_baseline else None)
        rows.append([
            f"{path.name}: {len(path.runs)} runs", f"{len(path.small)} + {len(path.large)} large",
            path.wall(tables), rate, path.call_seconds(tables), overhead,
            f"{ratio(rate, baseline_rate) if baseline_rate else '-'} ({small_wall:.0f} s for the small ones)",
            ratio(small_wall / len(path.small), floor_per_table),
        ])
    table(
        "Fleet maintenance, end to end through Dagster (first launch to last table) vs one plain session",
        ["path", "tables", "wall s", "tables/h", "Spark CALL s", "fixed overhead s/table",
         "tables/h vs a run per table", "small tables vs floor, per table"],
        rows,
    )


if __name__ == "__main__":
    main()
