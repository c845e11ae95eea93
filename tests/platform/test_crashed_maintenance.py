"""Scenario 19, a maintenance run whose worker dies: the run records a failure, so a table whose
maintenance keeps crashing is quarantined like one whose maintenance keeps failing.

Real maintenance runs of the real job (`dagster job execute`, the multiprocess executor, an instance
configured by the production YAML on PostgreSQL; the second as `__ASSET_JOB`, as Materialize launches
it, through `dagster asset materialize`) are killed with SIGKILL inside `maintained_table`:
once only the step process (as the kernel's OOM killer does: the executor reports the crash and the
run fails), once the whole run worker (as a pod eviction does: the run is then marked failed, as run
monitoring does). `maintenance_failure_sensor`, evaluated on each failure as the daemon would, records
one failure per run and never the same run twice; after `quarantine_after_failures` crashes the table
is quarantined. A run that failed in its own code (an invalid policy) records nothing. The table's
contents (row count and checksum) are unchanged.

A `maintenance_batch` run killed midway through its tables (its one process: the batch runs in
process, two tables at once by default) gets one failure record for each table it had not finished:
the ones being maintained and the ones after them; the tables it finished keep their own outcome, a
compaction's and a nothing-to-do's alike; on the next tick the sensor skips the run. Every table's
contents are unchanged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import dagster as dg
import pytest
import yaml

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.maintenance.batch_job import BATCH_JOB, BATCH_TABLES_TAG, batch_run_config
from icepack_dagster.defs.maintenance.failure_sensor import WORKER_DIED
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.defs.run_tags import KIND_TAG, MAINTENANCE, maintenance_tags
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.table.key import parse_table_key
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests import tiers
from tests.defs.dagster_testkit import NO_ACTIONS, small_file_table
from tests.platform.platform_testkit import (
    ONLY_COMPACTION,
    code_location_settings,
    evaluate_failure_sensor,
    write_code_location,
    write_dagster_home,
)
from tests.polling import wait_until
from tests.processes import DAGSTER
from tests.tables_testkit import arrow_fingerprint

pytestmark = [pytest.mark.postgres, pytest.mark.daemon]

LOCATION = """
from icepack_dagster.definitions import build_definitions

defs = build_definitions(SETTINGS)
"""


def _maintained_step_start(
    instance: dg.DagsterInstance, partition: str, known: set[str], job: str
) -> dg.DagsterEvent | None:
    """The `maintained_table` step start of a `job` run of `partition` not in `known`."""
    filters = dg.RunsFilter(job_name=job, tags={"dagster/partition": partition})
    for record in instance.get_run_records(filters=filters):
        run_id = record.dagster_run.run_id
        if run_id in known:
            continue
        starts = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_START).records
        for start in starts:
            event = start.event_log_entry.dagster_event
            if event is not None and event.step_key == "maintained_table":
                return event
    return None


def _start(command: list[str], home: Path, location: Path, log: Path) -> subprocess.Popen[bytes]:
    """A `dagster` command on the code location, in a process group of its own (killed whole)."""
    tiers.require("daemon", "a Dagster run worker (`dagster job execute`)")
    with log.open("a") as out:
        return subprocess.Popen(
            [DAGSTER, *command, "-f", str(location)],
            cwd=location.parent,
            env={**os.environ, "DAGSTER_HOME": str(home)},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _crashed_run(
    instance: dg.DagsterInstance, home: Path, location: Path, partition: str, whole_worker: bool, log: Path
) -> str:
    """Start a real maintenance run of `partition` and SIGKILL it inside `maintained_table`: the step
    process only (a `maintenance` job run, as the sensor launches it), or the whole run worker (an
    `__ASSET_JOB` run, as Materialize launches it; then marked failed, as run monitoring does). Its id."""
    job = "__ASSET_JOB" if whole_worker else "maintenance"
    known = {r.dagster_run.run_id for r in instance.get_run_records(filters=dg.RunsFilter(job_name=job))}
    tags = maintenance_tags(partition) | {"dagster/partition": partition}
    command = (
        ["asset", "materialize", "--select", "maintained_table", "--partition", partition]
        if whole_worker
        else ["job", "execute", "-j", "maintenance", "--tags", json.dumps(tags)]
    )
    worker = _start(command, home, location, log)
    try:
        step = wait_until(
            lambda: _maintained_step_start(instance, partition, known, job),
            "maintained_table to start",
            timeout=300,
        )
        assert step.pid is not None
        if whole_worker:
            os.killpg(worker.pid, signal.SIGKILL)
        else:
            os.kill(step.pid, signal.SIGKILL)
        worker.wait(timeout=120)
    finally:
        try:
            os.killpg(worker.pid, signal.SIGKILL)  # whatever the worker left (a Spark JVM)
        except ProcessLookupError:
            pass
    (run,) = [
        r.dagster_run
        for r in instance.get_run_records(filters=dg.RunsFilter(job_name=job))
        if r.dagster_run.run_id not in known
    ]
    if whole_worker:
        assert run.status == dg.DagsterRunStatus.STARTED, log.read_text()[-3000:]
        instance.report_run_failed(run, "run worker died: its process is gone (SIGKILL in the test)")
    return run.run_id


def _maintained_in_new_batch(instance: dg.DagsterInstance, known: set[str]) -> tuple[str, set[str]] | None:
    """The id of the `maintenance_batch` run not in `known`, and the tables it has logged a
    `maintained_table` event for (those it finished); None before that run exists."""
    for record in instance.get_run_records(filters=dg.RunsFilter(job_name=BATCH_JOB)):
        run_id = record.dagster_run.run_id
        if run_id in known:
            continue
        finished = set()
        for kind in (dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION):
            for logged in instance.get_records_for_run(run_id, of_type=kind).records:
                event = logged.event_log_entry.dagster_event
                if event is not None and event.asset_key == DEFAULT_NAMES.maintained_table:
                    finished.add(event.partition)
        return run_id, finished
    return None


def _crashed_batch(
    instance: dg.DagsterInstance, home: Path, location: Path, tables: list[str], kill_after: str, log: Path
) -> tuple[str, set[str]]:
    """Start a real `maintenance_batch` run over `tables` and SIGKILL its process as soon as it has
    finished `kill_after` (the tables after it are being maintained, or waiting); then mark it failed, as
    run monitoring does. Its id, and the tables it had finished when killed."""
    batches = dg.RunsFilter(job_name=BATCH_JOB)
    known = {r.dagster_run.run_id for r in instance.get_run_records(filters=batches)}
    config = log.with_suffix(".yaml")
    config.write_text(yaml.safe_dump(batch_run_config(tables)))
    tags = {KIND_TAG: MAINTENANCE, BATCH_TABLES_TAG: json.dumps(tables)}
    worker = _start(["job", "execute", "-j", BATCH_JOB, "-c", str(config), "--tags", json.dumps(tags)],
                    home, location, log)
    try:
        wait_until(
            lambda: kill_after in (_maintained_in_new_batch(instance, known) or ("", set()))[1],
            f"the batch to finish {kill_after}",
            timeout=300,
            every=0.1,
        )
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=120)
        killed = _maintained_in_new_batch(instance, known)
        assert killed is not None
        run_id, finished = killed
    finally:
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    run = instance.get_run_by_id(run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.STARTED, log.read_text()[-3000:]
    instance.report_run_failed(run, "run worker died: its process is gone (SIGKILL in the test)")
    return run_id, finished


def test_crashed_maintenance_runs_count_towards_quarantine(
    pg_instance: dg.DagsterInstance,
    defs: dg.Definitions,
    scoped_settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    tmp_path: Path,
) -> None:
    lake = catalogs.get("lake")
    properties = ONLY_COMPACTION | {"icepack.cadence-hours": "0", "icepack.quarantine-after-failures": "2"}
    table = small_file_table(lake, f"{namespace}.crashy", appends=10, properties=properties)
    partition = f"lake.{namespace}.crashy"
    key = parse_table_key(partition)
    pg_instance.add_dynamic_partitions(PARTITIONS_NAME, [partition])
    before = arrow_fingerprint(table)
    home = write_dagster_home(tmp_path)
    write_code_location(tmp_path, "crash_location", LOCATION, code_location_settings(scoped_settings))
    location = tmp_path / "crash_location.py"
    engine = Engine(scoped_settings)

    def history() -> TableHistory:
        status = engine.status(key)
        return engine.history(key, engine.policy(key, status.properties).policy)

    oom = _crashed_run(pg_instance, home, location, partition, whole_worker=False, log=tmp_path / "run1.log")
    assert evaluate_failure_sensor(defs, pg_instance, oom) is None
    crashed = history()
    assert (crashed.consecutive_failures, crashed.quarantined) == (1, False)
    assert crashed.last_error is not None and crashed.last_error.startswith(WORKER_DIED)
    assert "maintained_table" in crashed.last_error
    again = evaluate_failure_sensor(defs, pg_instance, oom)  # the sensor re-evaluated on the same run
    assert isinstance(again, dg.SkipReason) and "recorded since" in (again.skip_message or "")
    assert history().consecutive_failures == 1

    evicted = _crashed_run(
        pg_instance, home, location, partition, whole_worker=True, log=tmp_path / "run2.log"
    )
    assert evaluate_failure_sensor(defs, pg_instance, evicted) is None
    quarantined = history()
    assert (quarantined.consecutive_failures, quarantined.quarantined) == (2, True)
    assert quarantined.last_error is not None and "run worker died" in quarantined.last_error

    with table.transaction() as transaction:  # a failure in the run's own code records nothing
        transaction.set_properties({"icepack.cadence-hours": "soon"})
    own = defs.resolve_job_def("maintenance").execute_in_process(
        instance=pg_instance, partition_key=partition, tags=maintenance_tags(partition), raise_on_error=False
    )
    assert not own.success
    skipped = evaluate_failure_sensor(defs, pg_instance, own.run_id)
    # it failed in maintenance_recommendation, before maintained_table started
    assert isinstance(skipped, dg.SkipReason) and "never maintained a table" in (skipped.skip_message or "")
    assert engine.history(key).consecutive_failures == 2

    assert arrow_fingerprint(lake.load_table((namespace, "crashy"))) == before


def test_a_crashed_batch_run_records_a_failure_for_each_table_it_had_not_finished(
    pg_instance: dg.DagsterInstance,
    defs: dg.Definitions,
    scoped_settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    tmp_path: Path,
) -> None:
    lake = catalogs.get("lake")
    properties = {"idle": NO_ACTIONS, "compacted": ONLY_COMPACTION, "midway": ONLY_COMPACTION,
                  "waiting": ONLY_COMPACTION}
    tables = {
        name: small_file_table(lake, f"{namespace}.{name}", appends=10, properties=props)
        for name, props in properties.items()
    }
    partitions = [f"lake.{namespace}.{name}" for name in tables]
    pg_instance.add_dynamic_partitions(PARTITIONS_NAME, partitions)
    before = {name: arrow_fingerprint(table) for name, table in tables.items()}
    home = write_dagster_home(tmp_path)
    write_code_location(tmp_path, "crash_location", LOCATION, code_location_settings(scoped_settings))
    idle, compacted, midway, waiting = partitions

    # Two workers (the default): `idle` and `compacted` start together, `midway` as soon as `idle` is
    # done, `waiting` once `compacted` or `midway` is; killed as `compacted` finishes, `waiting` (a
    # compaction started about then) cannot have finished, and `midway` may or may not have.
    run_id, finished = _crashed_batch(pg_instance, home, tmp_path / "crash_location.py", partitions,
                                      compacted, tmp_path / "batch.log")
    assert {idle, compacted} <= finished and waiting not in finished, finished
    assert evaluate_failure_sensor(defs, pg_instance, run_id) is None

    engine = Engine(scoped_settings)
    histories = {p: engine.history(parse_table_key(p)) for p in partitions}
    assert histories[idle].last_run_at is None, "nothing to do: nothing recorded, no crash either"
    # `midway` may have recorded its success just before the kill, ahead of the log line saying so
    midway_done = midway in finished or histories[midway].last_succeeded != {}
    unfinished = [p for p in (midway, waiting) if p not in finished and not (p == midway and midway_done)]
    for done in (compacted, *((midway,) if midway_done else ())):
        assert histories[done].last_run_at is not None and histories[done].consecutive_failures == 0, done
        assert histories[done].last_error is None, done
    for partition in unfinished:
        history = histories[partition]
        assert history.consecutive_failures == 1, partition
        assert history.last_error is not None and history.last_error.startswith(WORKER_DIED)
    again = evaluate_failure_sensor(defs, pg_instance, run_id)  # the next tick sees the same run
    assert isinstance(again, dg.SkipReason) and "recorded since" in (again.skip_message or "")
    expected = [1 if p in unfinished else 0 for p in partitions]
    assert [engine.history(parse_table_key(p)).consecutive_failures for p in partitions] == expected

    for name in tables:
        assert arrow_fingerprint(lake.load_table((namespace, name))) == before[name], name
