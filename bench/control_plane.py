"""Benchmark 4: the control plane at fleet scale, through the real Dagster definitions.

A fleet of real catalog entries (registered copies of one small real table of eight one-row appends,
so every table is critical with small files; 10,000, or 1,000 with --quick) is managed by
`build_definitions` on a real Dagster instance (SQLite storage in a temporary DAGSTER_HOME, as
`dagster dev` uses). Measured: the engine's discovery, the discovery sensor's first tick (every table
new) and a steady tick, adding every table as a dynamic partition, health-sync runs (tables/s, and how
many runs a full sync takes), and the maintenance sensor's tick after those runs. Ticks are timed with
tracemalloc off; peak memory comes from a second, traced tick. `--postgres` puts Dagster's storage in
PostgreSQL as production does (deploy/dagster/dagster.prod.yaml; a fresh database on the local server).

    .venv/bin/python bench/control_plane.py [--quick] [--postgres]
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dagster as dg  # noqa: E402

from bench import _tables  # noqa: E402
from bench._fixtures import NAMESPACE, Bench, arguments, machine, table, timed  # noqa: E402
from icepack_dagster.definitions import build_definitions  # noqa: E402
from icepack_dagster.defs.partitions import PARTITIONS_NAME  # noqa: E402
from icepack_dagster.defs.platform_settings import PlatformSettings  # noqa: E402
from icepack_dagster.defs.tags import range_tags  # noqa: E402
from icepack_dagster.engine import Engine  # noqa: E402

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}  # no DEBUG line per event


@contextlib.contextmanager
def dagster_instance(postgres: bool) -> Iterator[dg.DagsterInstance]:
    """SQLite storage in a temporary DAGSTER_HOME, or the production YAML's PostgreSQL storage in a
    fresh database on the local server (127.0.0.1:5432, user postgres), dropped afterwards."""
    if not postgres:
        with dg.instance_for_test() as instance:
            yield instance
        return
    import psycopg2
    import yaml

    name = f"icepack_bench_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres")
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    env = {"DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": "5432", "DAGSTER_PG_USER": "postgres",
           "DAGSTER_PG_PASSWORD": "", "DAGSTER_PG_DB": name}
    os.environ.update(env)
    production = Path(__file__).resolve().parents[1] / "deploy" / "dagster" / "dagster.prod.yaml"
    config = yaml.safe_load(production.read_text())
    try:
        with dg.instance_for_test(overrides=config) as instance:
            yield instance
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


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
        lambda p: p.add_argument("--postgres", action="store_true", help="Dagster storage in PostgreSQL"),
    )
    bench = Bench(args.workdir)
    count, synced_runs = (1_000, 2) if args.quick else (10_000, 5)
    print(f"Control plane benchmark ({'quick' if args.quick else 'full'}); {machine()}")
    wall, _, keys = timed(lambda: _tables.fleet(bench, count, prefix="ctl", appends=8))
    print(f"fleet of {count:,} registered tables ready in {wall:.1f} s (made once per work directory)")
    zeros = "0" * (5 - len(str(count - 1)))  # ctl_00000..ctl_00999 are ctl_00*: exactly `count` tables
    settings = bench.settings.model_copy(update={"include": [f"lake.{NAMESPACE}.ctl_{zeros}*"]})
    platform = PlatformSettings(sensors_running_by_default=False)
    defs = build_definitions(settings, platform)
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

        batch = platform.health_sync_batch_size
        job = defs.resolve_job_def("health_sync")
        synced = 0
        for index in range(synced_runs):
            chunk = partitions[index * batch : (index + 1) * batch]
            wall, cpu, result = timed(
                lambda c=chunk: job.execute_in_process(
                    instance=instance, tags=range_tags(c[0], c[-1]), run_config=QUIET
                )
            )
            assert result.success
            synced += len(chunk)
            rows.append([f"health-sync run {index + 1} ({len(chunk)} tables)", wall, cpu, "-",
                         f"{len(chunk) / wall:.0f} tables/s"])
        runs_needed = math.ceil(count / batch)
        rows.append([f"a full health sync of {count:,} tables", "-", "-", "-",
                     f"{runs_needed} runs of {batch} tables"])

        wall, cpu, result = timed(lambda: tick(defs, "maintenance_sensor", instance, None))
        peak = traced_peak_mib(lambda: tick(defs, "maintenance_sensor", instance, None))
        rows.append([f"maintenance sensor tick ({synced:,} new health events)", wall, cpu, peak,
                     _describe(result)])
        wall, cpu, again = timed(lambda: tick(defs, "maintenance_sensor", instance, result.cursor))
        rows.append(["maintenance sensor, steady tick", wall, cpu, "-", _describe(again)])

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
