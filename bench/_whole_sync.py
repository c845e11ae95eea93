"""A whole health sync of a fleet as the deployment runs it (`bench/health_sync_run.py --full-sync`).

The fleet is bench/control_plane.py's (registered copies of one small real table, every table
critical). The real `health_sync_schedule`, ticking every minute in the real daemon
(`bench/_platform.py`), requests one run per 1,000 tables; the queue starts them within the
repository's dagster.yaml limits (observation runs two at once); each is a real run process. Syncs,
one after the other:

- first: every table new, every table written;
- steady, its runs one after the other in this process: after a real commit (a PyIceberg append of one
  row) to 1% of the tables;
- steady, real runs: after a real commit to another 1%;
- a quarter of the fleet rewritten, real runs: after a real commit to 25% of the tables, whose status
  is then read again and written.

A scheduled sync also writes the tables due their periodic rewrite (hourly for these critical tables,
each at its own moment, at the earliest half an hour after its last write:
`domain/health/sync_writes.py`), so a sync long after the first writes more than its commits.

Storage: SQLite (Dagster's under DAGSTER_HOME, icepack's state database under the icepack home), or
with `postgres` both in fresh PostgreSQL databases on the local server (Dagster's with the production
instance's storage settings, icepack's through `state_url`), dropped afterwards; with `pgbouncer` too,
every process reaches Dagster's through a PgBouncer in session mode (bench/_pgbouncer.py; icepack's
state database keeps its own connection pool and is reached directly). The fleet's catalog is
the embedded SQLite catalog, or (`catalog`) Iceberg's REST server 1.11.0, whose conditional loads
answer 304 for unchanged tables, or moto's Glue, started here with the fleet registered in it afresh
(the same metadata files), the commits made through it. Printed per sync: tables written, wall time
from the tick's first run queued to its last run's end, the runs' own times, tables per second; the
events the sync's runs stored in Dagster's event log per table written, by type; on PostgreSQL also the
rows each table of both databases gained or changed (PostgreSQL's statistics).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from bench import _pgbouncer, _postgres, _tables
from bench._fixtures import NAMESPACE, Bench, machine, ratio, table
from bench._platform import Platform, RunTimes
from icepack_dagster.config.settings import load_settings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.health_sync.job import build_health_sync_job, health_sync_requests
from icepack_dagster.defs.health_sync.schedule import SCHEDULE_NAME
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests import tiers
from tests.config.catalogs.servers import ETAG_REST_SERVER, moto_server, rest_catalog_server

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
ICEPACK_LOCATION = "icepack_dagster"  # workspace.yaml
HEALTH_SYNC = build_health_sync_job(DEFAULT_NAMES.deployment).name
Writes = dict[str, tuple[int, int, int]]
MATERIALIZATION = dg.DagsterEventType.ASSET_MATERIALIZATION.value
TABLE_HEALTH = DEFAULT_NAMES.table_health


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


def fleet_and_settings(
    bench: Bench, count: int, platform: dict[str, Any], served: ServedCatalog | None = None, appends: int = 8,
    **more: Any
) -> tuple[list[TableKey], dict[str, Any]]:
    """bench/control_plane.py's fleet of `count` critical tables (made once per work directory; with fewer
    than 8 `appends`, a fleet of healthy tables beside it) and the settings of a deployment that syncs it,
    its sensors stopped, with `platform` knobs on top; with `served`, the fleet registered in that catalog
    too (fresh each run), and synced there."""
    prefix = f"ctl{count}" if appends == 8 else f"ctl{count}a{appends}"
    wall, _, keys = timed(lambda: _tables.fleet(bench, count, prefix=prefix, appends=appends))
    print(f"fleet of {count:,} registered tables ready in {wall:.1f} s (made once per work directory)")
    catalogs: dict[str, Any] = {"lake": {"kind": "embedded"}}
    if served is not None:
        catalogs[served.name] = served.config
        wall, _, keys = timed(lambda: served.register(bench, keys))
        print(f"the fleet registered in the {served.name} catalog in {wall:.1f} s")
    catalog = keys[0].catalog
    config: dict[str, Any] = {
        "home": str(bench.workdir / "home"),
        "catalogs": catalogs,
        "spark": {"master": "local[2]", "driver_memory": "2g"},
        "include": [f"{catalog}.{NAMESPACE}.{prefix}_[0-9]*"],
        "platform": {"sensors_running_by_default": False} | platform,
        **more,
    }
    return keys, config


@dataclass(frozen=True)
class ServedCatalog:
    """A catalog served by a server this benchmark started (Iceberg's REST server, moto's Glue): its name,
    its settings, and the environment the deployment's processes need to reach it."""

    name: str
    config: dict[str, Any]
    env: dict[str, str]

    def catalog(self, bench: Bench) -> Any:
        return CatalogSet(load_settings(home=bench.workdir / "home", catalogs={self.name: self.config})).get(
            self.name
        )

    def register(self, bench: Bench, lake_keys: list[TableKey]) -> list[TableKey]:
        """The lake's tables registered here under the same names (their metadata files as they are)."""
        os.environ.update(self.env)
        catalog = self.catalog(bench)
        catalog.create_namespace_if_not_exists(NAMESPACE)
        locations = bench.catalogs.metadata_locations("lake", [k.identifier for k in lake_keys])
        keys = [TableKey(catalog=self.name, namespace=k.namespace, name=k.name) for k in lake_keys]
        for key, lake_key in zip(keys, lake_keys, strict=True):
            catalog.register_table(key.identifier, locations[lake_key.identifier])
        return keys


@contextlib.contextmanager
def served_catalog(bench: Bench, kind: str) -> Iterator[ServedCatalog | None]:
    """The catalog a whole sync runs on: None for the embedded SQL catalog (`lake`); `rest`: Iceberg's
    REST server 1.11.0, which answers conditional loads with 304; `glue`: moto's Glue."""
    if kind == "lake":
        yield None
        return
    bench.workdir.mkdir(parents=True, exist_ok=True)
    servers = Path(tempfile.mkdtemp(prefix="servers-", dir=bench.workdir))
    if kind == "rest":
        tiers.entering(frozenset({"jvm_servers"}))  # the server's guard is the suite's: this run starts it
        with rest_catalog_server(bench.settings.spark.jar_cache, servers, ETAG_REST_SERVER) as url:
            yield ServedCatalog("rest", {"kind": "rest", "uri": url, "warehouse": "lake"}, {})
    elif kind == "glue":
        with moto_server(servers, days_behind=0) as url:
            credentials = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
            yield ServedCatalog("glue", {"kind": "glue", "region": "us-east-1", "endpoint": url}, credentials)
    else:
        raise SystemExit(f"--catalog: unknown {kind!r}; choose lake, rest or glue")


@dataclass
class Sync:
    """One measured sync: its runs (ordered by end), what it wrote and what its commits changed."""

    name: str
    times: list[RunTimes]
    committed: int
    commit_seconds: float
    load: float
    written: int = 0
    events: Counter[str] = field(default_factory=Counter)
    rows: Writes = field(default_factory=dict)


@dataclass(frozen=True)
class FleetShape:
    """What a whole sync runs on: every table critical (8 small files: rewritten hourly) or healthy (2 small
    files, fewer than a SMALL_FILES issue needs: rewritten daily, never within 12 hours of its first write,
    and a one-row commit leaves it healthy, so its status comes from its snapshot summaries); tables per
    health-sync run (None: the platform's default); whether the quarter-changed sync runs."""

    healthy: bool = False
    batch_size: int | None = None
    quarter: bool = True

    @property
    def appends(self) -> int:
        return 2 if self.healthy else 8

    def describe(self) -> str:
        tables = "healthy tables (rewritten daily)" if self.healthy else "critical tables (rewritten hourly)"
        return tables + (f", {self.batch_size:,} per run" if self.batch_size else "")


def full_sync(
    bench: Bench, count: int, postgres: bool, pgbouncer: bool = False, catalog: str = "lake",
    shape: FleetShape = FleetShape(),
) -> None:
    """The four syncs of the module's docstring on `count` tables, on SQLite or PostgreSQL storage (with
    `pgbouncer`, Dagster's reached through a PgBouncer in session mode: bench/_pgbouncer.py), the fleet
    in `catalog` (`served_catalog`), shaped by `shape`."""
    storage = ("PostgreSQL through PgBouncer" if pgbouncer else "PostgreSQL") if postgres else "SQLite"
    print(f"Whole health sync of {count:,} {shape.describe()} in the {catalog} catalog as real runs, "
          f"{storage} storage; {machine()}")
    with contextlib.ExitStack() as stack:
        databases: dict[str, str] = {}
        more: dict[str, Any] = {}
        if postgres:
            for kind in ("dagster", "state"):
                databases[kind] = stack.enter_context(_postgres.fresh_database(kind))
            more["state_url"] = _postgres.sqlalchemy_url(databases["state"])
        port = stack.enter_context(_pgbouncer.pgbouncer(bench.workdir / "pgbouncer")) if pgbouncer else None
        served = stack.enter_context(served_catalog(bench, catalog))
        knobs: dict[str, Any] = {"health_sync_cron": "* * * * *"}
        if shape.batch_size:
            knobs["health_sync_batch_size"] = shape.batch_size
        keys, config = fleet_and_settings(bench, count, knobs, served, shape.appends, **more)
        settings = load_settings(**config)
        job = build_definitions(settings).resolve_job_def(HEALTH_SYNC)
        batch = settings.platform.health_sync_batch(count)
        platform = Platform(bench.workdir / f"platform-sync{count}", config, queue_interval_seconds=1,
                            env=served.env if served is not None else None,
                            postgres_database=databases.get("dagster"), postgres_port=port or _postgres.PORT)
        stack.callback(platform.stop)  # before the databases are dropped
        runs = len(range(0, count, batch))
        platform.instance.add_dynamic_partitions(PARTITIONS_NAME, [key.text for key in keys])
        platform.start()
        syncs = [scheduled_sync(platform, "first sync (every table new), real runs", runs, databases)]

        # the schedule's own batches: the partitions in the instance's order, as its tick reads them
        committed, commit_seconds = commit_to(bench, keys[0::100], served)
        partitions = platform.instance.get_dynamic_partitions(PARTITIONS_NAME)
        requests = health_sync_requests(
            DEFAULT_NAMES, partitions, batch, "bench", settings.platform.health_sync_writes
        )
        load = os.getloadavg()[0]
        serial, _, results = timed(lambda: [
            job.execute_in_process(instance=platform.instance, run_config=dict(request.run_config) | QUIET)
            for request in requests
        ])
        assert all(result.success for result in results)
        in_process = Sync("steady sync (1% changed), its runs one after the other in this process", [],
                          committed, commit_seconds, load)
        account(platform, in_process, [result.run_id for result in results])
        print(f"{in_process.name}: {serial:.0f} s, {in_process.written:,} written")

        committed, commit_seconds = commit_to(bench, keys[1::100], served)
        syncs.append(scheduled_sync(platform, "steady sync (1% changed), real runs", runs, databases,
                                    committed, commit_seconds))
        if shape.quarter:
            committed, commit_seconds = commit_to(bench, keys[2::4], served)
            syncs.append(scheduled_sync(platform, "a quarter of the fleet changed, real runs", runs,
                                        databases, committed, commit_seconds))
    print_syncs(count, storage, syncs, in_process, serial)


def commit_to(bench: Bench, keys: list[TableKey], served: ServedCatalog | None) -> tuple[int, float]:
    """A real commit (one appended row) to each of `keys`, through their catalog, in this process, the
    daemon idle."""
    catalog = served.catalog(bench) if served is not None else None
    wall, _, _ = timed(lambda: [_tables.append_one_row(bench, key, catalog) for key in keys])
    print(f"committed to {len(keys):,} tables in {wall:.1f} s")
    return len(keys), wall


def scheduled_sync(
    platform: Platform, name: str, runs: int, databases: dict[str, str], committed: int = 0,
    commit_seconds: float = 0.0,
) -> Sync:
    """Start the schedule, wait for the tick that requests `runs` health-sync runs, stop the schedule
    (no second tick joins), and wait for those runs; then count what they wrote."""
    health_sync = dg.RunsFilter(job_name=HEALTH_SYNC)
    known = {r.dagster_run.run_id for r in platform.instance.get_run_records(filters=health_sync)}

    def new_runs() -> list[str]:
        records = platform.instance.get_run_records(filters=health_sync)
        return [r.dagster_run.run_id for r in records if r.dagster_run.run_id not in known]

    before = _postgres.row_writes(databases) if databases else {}
    load = os.getloadavg()[0]
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
    sync = Sync(name, sorted(times, key=lambda t: t.ended), committed, commit_seconds, load)
    if databases:
        sync.rows = _postgres.writes_between(before, _postgres.row_writes(databases))
    account(platform, sync, requested)
    print(f"{name}: {sync_wall(sync.times):.0f} s, {sync.written:,} written")
    return sync


def account(platform: Platform, sync: Sync, run_ids: list[str]) -> None:
    """The sync's tables written (its `table_health` materializations: all of them in a first sync; in
    a steady one those that changed or were due their periodic rewrite) and the events its runs
    stored, by type."""
    for run_id in run_ids:
        for record in platform.instance.get_records_for_run(run_id, limit=1_000_000).records:
            event = record.event_log_entry.dagster_event
            kind = event.event_type_value if event is not None else "log message"
            sync.events[kind] += 1
            if event is not None and kind == MATERIALIZATION and event.asset_key == TABLE_HEALTH:
                sync.written += 1


def at_most_at_once(times: list[RunTimes]) -> int:
    """The most runs that were between launch and end at the same moment."""
    edges = sorted([(t.launched, 1) for t in times] + [(t.ended, -1) for t in times])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def sync_wall(times: list[RunTimes]) -> float:
    """From the first run queued to the last run's end (`times` ordered by end)."""
    return times[-1].ended - min(t.created for t in times)


def print_syncs(count: int, storage: str, syncs: list[Sync], in_process: Sync, serial: float) -> None:
    rows: list[list[Any]] = []
    for sync in [syncs[0], in_process, *syncs[1:]]:
        t = sync.times
        if t:
            wall = sync_wall(t)
            rows.append([sync.name, sync.committed, sync.written, len(t), wall, at_most_at_once(t),
                         sum(r.launch_to_end for r in t) / len(t), sum(r.process_start for r in t) / len(t),
                         max(r.launch_to_end for r in t), count / wall, sync.load])
        else:
            runs = len(syncs[0].times)
            rows.append([sync.name, sync.committed, sync.written, runs, serial, "-", serial / runs, "-", "-",
                         count / serial, sync.load])
    table(
        f"A whole health sync of {count:,} tables: the real schedule's tick, the queue (observation runs "
        f"two at once, the repository's dagster.yaml), Dagster's default run launcher, {storage} storage "
        "(Dagster's and icepack's state)",
        ["sync", "tables committed to before", "written", "runs", "wall s (first queued to last end)",
         "at most at once", "per run s (launch to end)", "of which process start s", "slowest run s",
         "tables/s", "load at start"],
        rows,
    )
    print(f"\nsteady sync (1% changed) as real runs vs the same sync's runs one after the other in this "
          f"process: {ratio(sync_wall(syncs[1].times), serial)} of the wall time")
    print("commits (PyIceberg appends, this process): "
          + "; ".join(f"{s.committed:,} in {s.commit_seconds:.0f} s" for s in [in_process, *syncs[1:]]))
    events = []
    for sync in [syncs[0], in_process, *syncs[1:]]:
        total = sum(sync.events.values())
        kinds = ", ".join(f"{kind} {n:,}" for kind, n in sync.events.most_common())
        events.append([sync.name, sync.written, total, total / max(1, sync.written), kinds])
    table("Events the sync's runs stored in Dagster's event log", ["sync", "written", "events",
          "per table written", "by type"], events)
    for sync in syncs:
        if sync.rows:
            writes = [[name, ins, upd, dele, (ins + upd) / max(1, sync.written)]
                      for name, (ins, upd, dele) in sync.rows.items()]
            table(f"Rows written in PostgreSQL during '{sync.name}' ({sync.written:,} tables written; "
                  "pg_stat_user_tables, the daemon's own writes included)",
                  ["database.table", "inserted", "updated", "deleted",
                   "(inserted + updated) per table written"], writes)
