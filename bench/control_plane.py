"""Benchmark 4: the control plane at fleet scale, through the real Dagster definitions.

A fleet of real catalog entries (registered copies of one small real table of eight one-row appends,
so every table is critical with small files; 10,000, or 1,000 with --quick) is managed by
`build_definitions` on a real Dagster instance (SQLite storage in a temporary DAGSTER_HOME, as
`dagster dev` uses). Measured: the engine's discovery, the discovery sensor's first tick (every table
new) and a steady tick, adding every table as a dynamic partition, health-sync runs (tables/s, and how
many runs a full sync takes): first syncs (every table new), then, after real commits to 1% of the
synced tables, the same runs as the schedule makes them (writing changed tables) and writing every
table, side by side; and the maintenance sensor's tick after those runs. Ticks are timed with
tracemalloc off; peak memory comes from a second, traced tick. `--postgres` puts Dagster's storage in
PostgreSQL as production does (deploy/dagster/dagster.prod.yaml; a fresh database on the local server).

    .venv/bin/python bench/control_plane.py [--quick] [--postgres]
"""

from __future__ import annotations

import contextlib
import math
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dagster as dg  # noqa: E402

from bench import _postgres, _tables  # noqa: E402
from bench._fixtures import NAMESPACE, Bench, arguments, machine, ratio, table, timed  # noqa: E402
from icepack_dagster.config.platform import PlatformSettings  # noqa: E402
from icepack_dagster.definitions import build_definitions  # noqa: E402
from icepack_dagster.defs.health_sync.job import health_sync_run_config  # noqa: E402
from icepack_dagster.defs.partitions import PARTITIONS_NAME  # noqa: E402
from icepack_dagster.engine import Engine  # noqa: E402

SYNC_NODE = "sync_tables"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}  # no DEBUG line per event


@contextlib.contextmanager
def dagster_instance(postgres: bool) -> Iterator[dg.DagsterInstance]:
    """SQLite storage in a temporary DAGSTER_HOME, or the production YAML's PostgreSQL storage in a
    fresh database on the local server (127.0.0.1:5432, user postgres), dropped afterwards."""
    if not postgres:
        with dg.instance_for_test() as instance:
            yield instance
        return
    with (
        _postgres.fresh_database("dagster") as name,
        dg.instance_for_test(overrides=_postgres.production_instance(name)) as instance,
    ):
        yield instance


def tick(defs: dg.Definitions, name: str, instance: dg.DagsterInstance, cursor: str | None) -> Any:
    sensor = defs.resolve_sensor_def(name)
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=defs.resources) as context:
        return sensor(context)


def traced_peak_mib(work: Any) -> float:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> None:
    args = arguments(
        __doc__.splitlines()[0],
        lambda p: (
            p.add_argument("--postgres", action="store_true", help="Dagster storage in PostgreSQL"),
            p.add_argument("--tables", type=int, help="fleet size (default 10,000; 1,000 with --quick)"),
        ),
    )
    bench = Bench(args.workdir)
    count, synced_runs = (1_000, 2) if args.quick else (10_000, 5)
    count = args.tables or count
    print(f"Control plane benchmark ({'quick' if args.quick else 'full'}); {machine()}")
    wall, _, keys = timed(lambda: _tables.fleet(bench, count, prefix=f"ctl{count}", appends=8))
    print(f"fleet of {count:,} registered tables ready in {wall:.1f} s (made once per work directory)")
    # One fleet per size (prefix ctl<count>), made once per work directory; the seed table is left out.
    settings = bench.settings.model_copy(update={"include": [f"lake.{NAMESPACE}.ctl{count}_[0-9]*"]})
    # --quick: batches of 250 so two runs still cover part of the 1,000 tables; otherwise the default.
    platform = PlatformSettings(sensors_running_by_default=False, **({"health_sync_batch_size": 250}
                                                                       if args.quick else {}))
    defs = build_definitions(settings.model_copy(update={"platform": platform}))
    rows: list[list[Any]] = []

    engine = Engine(settings, catalogs=bench.catalogs)
    wall, cpu, found = timed(engine.discover)
    assert len(found.tables) == count and found.complete, (len(found.tables), found.failures[:3])
    rows.append([f"engine.discover() of {count:,} tables", wall, cpu, traced_peak_mib(engine.discover), "-"])

    with dagster_instance(args.postgres) as instance:
        wall, cpu, first = timed(lambda: tick(defs, "iceberg_table_discovery", instance, None))
        peak = traced_peak_mib(lambda: tick(defs, "iceberg_table_discovery", instance, None))
        requests = first.dynamic_partitions_requests or []
        added = sum(len(r.partition_keys) for r in requests if isinstance(r, dg.AddDynamicPartitionsRequest))
        runs = len(first.run_requests or [])
        rows.append(["discovery sensor, first tick (all new)", wall, cpu, peak,
                     f"{added:,} partitions + {runs} health-sync runs requested"])

        partitions = [key.text for key in found.tables]
        wall, cpu, _ = timed(lambda: instance.add_dynamic_partitions(PARTITIONS_NAME, partitions))
        rows.append([f"add {count:,} dynamic partitions", wall, cpu, "-", "one instance call"])

        wall, cpu, steady = timed(lambda: tick(defs, "iceberg_table_discovery", instance, first.cursor))
        peak = traced_peak_mib(lambda: tick(defs, "iceberg_table_discovery", instance, first.cursor))
        rows.append(["discovery sensor, steady tick", wall, cpu, peak, _describe(steady)])

        batch = platform.health_sync_batch(count)
        job = defs.resolve_job_def("health_sync")
        chunks = [partitions[i * batch : (i + 1) * batch] for i in range(synced_runs)]
        assert all(chunks), f"{synced_runs} runs of {batch} need more than {count} tables"

        def sync(chunk: list[str], writes: str) -> tuple[float, float, int]:
            wall, cpu, result = timed(
                lambda: job.execute_in_process(
                    instance=instance, run_config=health_sync_run_config(chunk, writes) | QUIET
                )
            )
            assert result.success
            return wall, cpu, len(result.asset_materializations_for_node(SYNC_NODE)) // 2

        first = [sync(chunk, "changes") for chunk in chunks]  # every table is new: all written
        for index, (wall, cpu, written) in enumerate(first):
            rows.append([f"first health-sync run {index + 1} ({len(chunks[index])} tables)", wall, cpu, "-",
                         f"{len(chunks[index]) / wall:.0f} tables/s, {written} written"])
        synced = sum(len(chunk) for chunk in chunks)
        changed = partitions[:synced:100]  # 1% of the synced tables get a real commit
        for partition in changed:
            _tables.append_one_row(bench, Engine(settings, catalogs=bench.catalogs).resolve(partition))
        steady = [sync(chunk, "changes") for chunk in chunks]
        every = [sync(chunk, "all") for chunk in chunks]  # the same runs writing every table
        for label, runs in (("writing changed tables", steady), ("writing every table", every)):
            wall = sum(r[0] for r in runs) / len(runs)
            cpu = sum(r[1] for r in runs) / len(runs)
            written = sum(r[2] for r in runs)
            rows.append([f"steady health-sync run, 1% changed, {label} (mean of {len(runs)})", wall, cpu,
                         "-", f"{batch / wall:.0f} tables/s, {written} of {synced} written"])
        steady_wall = sum(r[0] for r in steady) / len(steady)
        every_wall = sum(r[0] for r in every) / len(every)
        runs_needed = math.ceil(count / batch)
        rows.append([f"a full steady sync of {count:,} tables ({runs_needed} runs x mean run)",
                     runs_needed * steady_wall, "-", "-",
                     f"writing every table: {runs_needed * every_wall:.0f} s; "
                     f"{ratio(every_wall, steady_wall)} faster"])

        wall, cpu, result = timed(lambda: tick(defs, "maintenance_sensor", instance, None))
        peak = traced_peak_mib(lambda: tick(defs, "maintenance_sensor", instance, None))
        rows.append(["maintenance sensor tick (every health event new)", wall, cpu, peak,
                     f"{_describe(result)}; cursor {len(result.cursor or '') / 1024:.0f} KiB"])
        wall, cpu, again = timed(lambda: tick(defs, "maintenance_sensor", instance, result.cursor))
        rows.append(["maintenance sensor, steady tick", wall, cpu, "-", _describe(again)])

        removed = partitions[-min(10_000, count // 2) :]

        def remove() -> None:  # what the daemon does with the discovery sensor's delete request
            for partition in removed:
                instance.delete_dynamic_partition(PARTITIONS_NAME, partition)

        wall, cpu, _ = timed(remove)
        rows.append([f"remove {len(removed):,} dynamic partitions", wall, cpu, "-",
                     "one call each, as the daemon applies a delete request"])

    table(
        f"Control plane over {count:,} tables ({'PostgreSQL' if args.postgres else 'SQLite'} Dagster "
        "instance, one process)",
        ["step", "wall s", "cpu s", "peak heap MiB", "outcome"],
        rows,
    )


def _describe(result: Any) -> str:
    if isinstance(result, dg.SkipReason):
        return f"skip: {result.skip_message[:70]}"
    if isinstance(result, dg.SensorResult):
        runs = len(result.run_requests or [])
        skip = result.skip_reason.skip_message[:60] if result.skip_reason else ""
        return f"{runs} run(s) requested" + (f"; skip: {skip}" if skip else "")
    return type(result).__name__


if __name__ == "__main__":
    main()
