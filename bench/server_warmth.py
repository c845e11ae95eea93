"""Benchmark: how a Spark JVM's CPU per table falls as it warms, on a Spark Connect server and in a plain
PySpark session, one session at a time and two at once.

The fleet benchmark (`bench/fleet_maintenance.py`) compares the Connect path with a plain session,
each warmed by a few tables first; this one shows how far from warm a JVM still is after them. Fleet
tables of 8 one-row appends get the statements icepack would send them (the engine's dry run: the
SETs and CALLs of `rewrite_data_files` and a first `remove_orphan_files`), sent with no Dagster and no
icepack in between. The Connect server is started as `icepack spark connect-server` starts one and
warmed through icepack's engine on `--warm-up` tables, as the fleet benchmark warms it; then it gets
`--rounds` rounds, each of one session running `--tables` tables back to back and then two sessions
at once running `--tables` each. After the server stopped, a plain session (`local[2]`, 2 GiB) warmed
alike gets the same rounds. Printed per round: wall seconds per table, and the JVM's CPU seconds per
table (user and system, through psutil: the server's process group, the plain session's JVM) with the
cores it used on average, and the classes the JVM loaded per table (`jstat -class`, the JDK's own
counter; it needs the JDK's tools): a warm JVM that runs a statement it has run before loads none,
unless it compiles the statement's generated code again (Spark SQL's codegen: each compilation
defines new classes). Every table's contents are checked unchanged.

    .venv/bin/python bench/server_warmth.py [--tables N] [--rounds N] [--warm-up N]
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._fixtures import Bench, arguments, machine, table  # noqa: E402
from bench._warm_spark import connect_settings, group_processes, warm_connect_server, warm_up  # noqa: E402
from bench.fleet_maintenance import contents, floor_session, make_set, run_statements  # noqa: E402
from icepack_dagster.defs.partitions import table_key  # noqa: E402
from icepack_dagster.domain.sql.procedures import SESSION_SETUP  # noqa: E402
from icepack_dagster.engine import Engine  # noqa: E402
from icepack_dagster.spark.connect_server import ConnectServerSize  # noqa: E402
from icepack_dagster.spark.session import build_spark_session  # noqa: E402
from tests.network import free_port  # noqa: E402

Processes = Callable[[], list[psutil.Process]]  # the JVM's processes, asked anew at each reading


def cpu_seconds(processes: Processes) -> float:
    """User and system CPU seconds so far of the processes `processes` returns now."""
    total = 0.0
    for process in processes():
        with contextlib.suppress(psutil.NoSuchProcess):  # ended meanwhile
            times = process.cpu_times()
            total += times.user + times.system
    return total


def classes_loaded(processes: Processes) -> int:
    """Classes the JVMs among `processes` have loaded so far, by the JDK's `jstat -class`."""
    total = 0
    for process in processes():
        if process.name() == "java":
            out = subprocess.run(["jstat", "-class", str(process.pid)], capture_output=True, text=True,
                                 check=True).stdout
            total += int(out.split("\n")[1].split()[0])  # the first column of its one row: Loaded
    return total


def statements_for(bench: Bench, tables: list[str]) -> dict[str, list[str]]:
    """The SETs and CALLs icepack's engine would send each table (a dry run), without the session
    setup, which each session runs once when it opens (`floor_session`)."""
    engine = Engine(bench.settings)
    return {
        name: [s for result in engine.maintain(table_key(name), dry_run=True, force=True).results
               for s in result.statements if s not in SESSION_SETUP]
        for name in tables
    }


def timed_round(spark: Any, jvm: Processes, work: list[list[str]],
                statements: dict[str, list[str]]) -> tuple[float, float, int]:
    """Wall and JVM CPU seconds, and the classes the JVM loaded, of one session per list in `work`, all
    at once, each running its tables' statements back to back."""
    def one(tables: list[str]) -> None:
        session = floor_session(spark)
        run_statements(session, [s for name in tables for s in statements[name]])

    threads = [threading.Thread(target=one, args=(tables,)) for tables in work]
    classes, cpu, started = classes_loaded(jvm), cpu_seconds(jvm), time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.monotonic() - started, cpu_seconds(jvm) - cpu, classes_loaded(jvm) - classes


def rounds(name: str, spark: Any, jvm: Processes, sets: list[list[str]], per_session: int,
           statements: dict[str, list[str]]) -> list[list[Any]]:
    """Alternately one session and two at once on the next tables of `sets`, one row per round."""
    rows = []
    for number, tables in enumerate(sets):
        sessions = 1 if number % 2 == 0 else 2
        work = [tables[i * per_session:(i + 1) * per_session] for i in range(sessions)]
        wall, cpu, classes = timed_round(spark, jvm, work, statements)
        n = sum(len(w) for w in work)
        rows.append([name, number // 2 + 1, sessions, n, wall, wall / n, cpu / n, cpu / wall, classes / n])
        print(f"{name}, round {number // 2 + 1}, {sessions} session(s): {n} tables in {wall:.1f} s",
              flush=True)
    return rows


def main() -> None:
    args = arguments(__doc__.splitlines()[0], lambda p: (
        p.add_argument("--tables", type=int, default=20, help="tables per session per round"),
        p.add_argument("--rounds", type=int, default=2, help="rounds (one session, then two at once)"),
        p.add_argument("--warm-up", type=int, default=10, help="tables maintained through the engine first"),
    ))
    if shutil.which("jstat") is None:
        sys.exit("server_warmth: jstat is missing: it counts the JVMs' classes; install the JDK's tools "
                 "(Debian: apt-get install openjdk-17-jdk-headless)")
    bench = Bench(args.workdir)
    tag = uuid.uuid4().hex[:6]
    per_round = [1, 2] * args.rounds

    def tables_of(side: str) -> tuple[list[str], list[list[str]]]:
        warm = make_set(bench, f"sw{tag}_{side}warm", args.warm_up, 0)[0]
        sets = [make_set(bench, f"sw{tag}_{side}{i}", args.tables * n, 0)[0] for i, n in enumerate(per_round)]
        return warm, sets

    (connect_warm, connect_sets), (plain_warm, plain_sets) = tables_of("c"), tables_of("p")
    every = [t for s in connect_sets + plain_sets for t in s]
    before = contents(bench, every)
    statements = statements_for(bench, every)
    print(f"{machine()}; {args.warm_up} warm-up tables per JVM, then "
          f"{args.rounds} round(s) of {args.tables} tables in one session and {args.tables} in each of two",
          flush=True)
    size = ConnectServerSize(master="local[2]", driver_memory="2g", port=free_port())
    with warm_connect_server(bench, size, bench.workdir / f"warmth-{tag}.log", connect_warm) as (url, group):
        session = build_spark_session(connect_settings(bench, url))
        server = partial(group_processes, group)
        rows = rounds("Connect server", session, server, connect_sets, args.tables, statements)
        session.stop()
    spark = bench.spark
    warm_up(bench.settings, spark, plain_warm)
    jvm = [c for c in psutil.Process().children(recursive=True) if c.name() == "java"]
    rows += rounds("plain session", spark, lambda: jvm, plain_sets, args.tables, statements)
    assert contents(bench, every) == before, "contents changed"
    table("JVM CPU per table as it warms (same statements, no Dagster, no icepack in between)",
          ["JVM", "round", "sessions at once", "tables", "wall s", "wall s/table", "JVM CPU s/table",
           "cores used", "classes loaded/table"], rows)
    print(f"every table's contents (row count, checksum) unchanged; load average {os.getloadavg()[0]:.1f} "
          "at the end")


if __name__ == "__main__":
    main()
