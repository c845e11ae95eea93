"""Benchmark: a health-sync run's writes to Dagster's PostgreSQL storage, directly and through PgBouncer.

Dagster's PostgreSQL storages open a connection per write outside the webserver and the daemon (see
bench/_pgbouncer.py), and a health-sync run that writes a table stores 4 events for it (its
`table_status` and `table_health` materializations and two check evaluations: bench/HISTORY.md,
26 November 2026). This measures what that costs and what a PgBouncer in session mode in front of the
server saves, on the real job: the fleet of bench/control_plane.py (registered copies of one small real
table), Dagster's storage in a fresh PostgreSQL database with the production instance's settings
(`deploy/dagster/dagster.prod.yaml`), icepack's state database in another (direct: it keeps its own
pool). One untimed run reads every table first; then each round executes the same health-sync run
(`writes: all`: every table written, as in a first sync, its statuses unchanged so nothing is read
again) in this process once on an instance whose storage connects directly and once on one whose
storage connects through PgBouncer, the order alternating between rounds, both on the same database.
Printed per run: wall and CPU seconds (this process), the sessions PostgreSQL's server established to
Dagster's database during it (`pg_stat_database.sessions`: a forked server process each; through
PgBouncer only the pooler's own), the events stored, and per table written; then the medians and
their ratio. The server's CPU is not in these figures (it is shared with whatever else runs).

    .venv/bin/python bench/health_sync_pgbouncer.py [--quick] [--tables N] [--rounds N]
"""

from __future__ import annotations

import contextlib
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dagster as dg  # noqa: E402

from bench import _postgres  # noqa: E402
from bench._fixtures import REPO, Bench, arguments, machine, ratio, table  # noqa: E402
from bench._pgbouncer import pgbouncer  # noqa: E402
from bench._whole_sync import HEALTH_SYNC, QUIET, fleet_and_settings, timed  # noqa: E402
from icepack_dagster.config.settings import load_settings  # noqa: E402
from icepack_dagster.definitions import build_definitions  # noqa: E402
from icepack_dagster.defs.health_sync.job import health_sync_run_config  # noqa: E402
from icepack_dagster.defs.partitions import PARTITIONS_NAME  # noqa: E402

DIRECT, POOLED = "direct", "through PgBouncer"


def instance(home: Path, database: str, port: int) -> dg.DagsterInstance:
    """A Dagster instance under `home`: the repository's dagster.yaml with the production instance's
    PostgreSQL storage on `database`, reached at `port`."""
    home.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load((REPO / "dagster.yaml").read_text())
    config["storage"] = _postgres.production_instance(database, port)["storage"]
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    return dg.DagsterInstance.from_config(str(home))


def main() -> None:
    args = arguments(
        __doc__.splitlines()[0],
        lambda p: (
            p.add_argument("--tables", type=int, help="tables in the run (default 500; 100 with --quick)"),
            p.add_argument("--rounds", type=int, default=3, help="direct/pooled pairs (default 3)"),
        ),
    )
    bench = Bench(args.workdir)
    count = args.tables or (100 if args.quick else 500)
    print(f"Health-sync run writing {count:,} tables, Dagster's storage on PostgreSQL directly and through "
          f"PgBouncer; {machine()}")
    with contextlib.ExitStack() as stack:
        dagster_db = stack.enter_context(_postgres.fresh_database("dagster"))
        state_db = stack.enter_context(_postgres.fresh_database("state"))
        keys, config = fleet_and_settings(bench, count, {"health_sync_batch_size": count},
                                          state_url=_postgres.sqlalchemy_url(state_db))
        job = build_definitions(load_settings(**config)).resolve_job_def(HEALTH_SYNC)
        port = stack.enter_context(pgbouncer(bench.workdir / "pgbouncer"))
        homes = bench.workdir / "pgbouncer-homes"
        instances = {
            DIRECT: stack.enter_context(instance(homes / "direct", dagster_db, _postgres.PORT)),
            POOLED: stack.enter_context(instance(homes / "pooled", dagster_db, port)),
        }
        instances[DIRECT].add_dynamic_partitions(PARTITIONS_NAME, [key.text for key in keys])
        run_config = health_sync_run_config([key.text for key in keys], "all") | QUIET

        counted = [0]  # sessions established to Dagster's database up to the end of the last run

        def run(path: str) -> dict[str, Any]:
            wall, cpu, result = timed(lambda: job.execute_in_process(instance=instances[path],
                                                                     run_config=run_config))
            assert result.success, f"the {path} run failed"
            before, counted[0] = counted[0], _postgres.sessions(dagster_db)
            events = len(instances[path].all_logs(result.run_id))
            return {"path": path, "wall": wall, "cpu": cpu, "sessions": counted[0] - before, "events": events}

        counted[0] = _postgres.sessions(dagster_db)
        run(DIRECT)  # untimed: every table's status read once, the state database filled
        rows: list[dict[str, Any]] = []
        for round_index in range(args.rounds):
            order = (DIRECT, POOLED) if round_index % 2 == 0 else (POOLED, DIRECT)
            for path in order:
                measured = run(path)
                rows.append(measured | {"round": round_index + 1})
                print(f"round {round_index + 1}, {path}: {measured['wall']:.1f} s")
    table(
        f"Health-sync run, {count:,} tables written (median of {args.rounds} each, order alternating)",
        ["round", "storage connection", "wall s", "CPU s (this process)", "ms per table (wall)",
         "server sessions", "sessions per table", "events per table"],
        [[r["round"], r["path"], f"{r['wall']:.1f}", f"{r['cpu']:.1f}", f"{1000 * r['wall'] / count:.1f}",
          r["sessions"], f"{r['sessions'] / count:.2f}", f"{r['events'] / count:.2f}"] for r in rows],
    )
    medians = {p: statistics.median(r["wall"] for r in rows if r["path"] == p) for p in (DIRECT, POOLED)}
    cpus = {p: statistics.median(r["cpu"] for r in rows if r["path"] == p) for p in (DIRECT, POOLED)}
    print(f"\nmedian wall: direct {medians[DIRECT]:.1f} s, through PgBouncer {medians[POOLED]:.1f} s: "
          f"direct is {ratio(medians[DIRECT], medians[POOLED])} the pooled run's wall time; "
          f"CPU (this process) direct {cpus[DIRECT]:.1f} s, pooled {cpus[POOLED]:.1f} s "
          f"({ratio(cpus[DIRECT], cpus[POOLED])})")


if __name__ == "__main__":
    main()
