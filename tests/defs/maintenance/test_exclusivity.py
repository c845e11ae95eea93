"""The maintenance cap, held by the real queued run coordinator configured by the repository's own
dagster.yaml and the `icepack_maintenance` pool's stored limit (two slots): a real `dagster-daemon`
dequeues runs submitted by a sensor with the platform's run tags and the `dagster/partition` tag every
one-partition run carries. Never more than two maintenance runs start, whatever their tables, while an
observation run starts beside them; and nothing holds a run icepack did not start: another team's run
of the same partition key starts at once (one maintenance per table is the table lease's job, not the
queue's: tests/platform/test_exclusivity.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from tests.polling import wait_until
from tests.processes import DagsterDaemon, set_maintenance_pool

pytestmark = pytest.mark.daemon

REPO = Path(__file__).resolve().parents[3]
DEADLINE_SECONDS = 240

CODE = '''
import time
from pathlib import Path

import dagster as dg

from icepack_dagster.defs.run_tags import MAINTENANCE_POOL, PARTITION_TAG, maintenance_tags, observation_tags

RELEASE = Path({release!r})


def _hold(context: dg.OpExecutionContext) -> None:
    """Runs until the test releases this run (bounded, so nothing outlives the test)."""
    deadline = time.monotonic() + {deadline}
    while not (RELEASE / context.run.run_id).exists():
        if time.monotonic() > deadline:
            raise dg.Failure("never released")
        time.sleep(0.2)


@dg.op(pool=MAINTENANCE_POOL)
def maintain(context: dg.OpExecutionContext) -> None:
    """Stands for maintained_table: the same pool."""
    _hold(context)


@dg.op
def observe(context: dg.OpExecutionContext) -> None:
    _hold(context)


@dg.job
def held_maintenance() -> None:
    maintain()


@dg.job
def held_observation() -> None:
    observe()


def _maintenance(table: str) -> tuple[str, dict[str, str]]:
    """A one-partition maintenance run's tags: Dagster adds dagster/partition to every such run."""
    return "held_maintenance", {{**maintenance_tags(table), PARTITION_TAG: table}}


RUNS = {{
    "f": ("held_observation", {{PARTITION_TAG: "lake.sales.orders"}}),  # another team's, same key
    "a": _maintenance("lake.sales.orders"),
    "b": _maintenance("lake.sales.orders"),
    "c": ("held_observation", observation_tags()),
    "d": _maintenance("lake.sales.customers"),
    "e": _maintenance("lake.sales.items"),
}}


@dg.sensor(jobs=[held_maintenance, held_observation], minimum_interval_seconds=2,
           default_status=dg.DefaultSensorStatus.RUNNING)
def submit_runs(context: dg.SensorEvaluationContext) -> list[dg.RunRequest]:
    return [dg.RunRequest(run_key=name, job_name=job, tags={{**tags, "test/name": name}})
            for name, (job, tags) in RUNS.items()]


defs = dg.Definitions(jobs=[held_maintenance, held_observation], sensors=[submit_runs])
'''


@pytest.fixture
def daemon_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[dg.DagsterInstance, Path]]:
    """DAGSTER_HOME with the repository's dagster.yaml (dequeue interval shortened) and a running daemon."""
    home = tmp_path / "dagster_home"
    release = tmp_path / "release"
    home.mkdir()
    release.mkdir()
    config = yaml.safe_load((REPO / "dagster.yaml").read_text())
    config["run_coordinator"]["config"]["dequeue_interval_seconds"] = 1
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "held_runs.py").write_text(CODE.format(release=str(release), deadline=DEADLINE_SECONDS))
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        yaml.safe_dump(
            {
                "load_from": [
                    {"python_file": {"relative_path": "held_runs.py", "working_directory": str(REPO)}}
                ]
            }
        )
    )
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    # Create the storage here, before the daemon starts, so two processes never migrate it at once.
    instance = dg.DagsterInstance.get()
    set_maintenance_pool(home, 2)
    daemon = DagsterDaemon(home, workspace, {}, tmp_path / "daemon.log")
    daemon.start()
    try:
        yield instance, release
    finally:
        daemon.stop()


def _runs(instance: dg.DagsterInstance) -> dict[str, dg.RunRecord]:
    records = instance.get_run_records()
    return {r.dagster_run.tags["test/name"]: r for r in records if "test/name" in r.dagster_run.tags}


def _wait_for(
    instance: dg.DagsterInstance, condition: Callable[[dict[str, dg.RunRecord]], bool], what: str
) -> dict[str, dg.RunRecord]:

    def met() -> dict[str, dg.RunRecord] | None:
        runs = _runs(instance)
        return runs if runs and condition(runs) else None

    def seen() -> str:
        states = {name: r.dagster_run.status.value for name, r in _runs(instance).items()}
        daemon_log = Path(os.environ["DAGSTER_HOME"]).parent / "daemon.log"
        tail = daemon_log.read_text()[-3000:] if daemon_log.exists() else "(no daemon log)"
        return f"runs: {states}\ndaemon log tail:\n{tail}"

    return wait_until(met, what, DEADLINE_SECONDS, detail=seen)


def _status(runs: dict[str, dg.RunRecord], name: str) -> dg.DagsterRunStatus:
    return runs[name].dagster_run.status


STARTED = dg.DagsterRunStatus.STARTED
QUEUED = dg.DagsterRunStatus.QUEUED


def test_the_cap_holds_maintenance_and_nothing_else_under_the_real_queue(
    daemon_home: tuple[dg.DagsterInstance, Path],
) -> None:
    instance, release = daemon_home
    maintenance = {"a", "b", "d", "e"}

    def settled(runs: dict[str, dg.RunRecord]) -> bool:
        started = {n for n in runs if _status(runs, n) == STARTED}
        assert len(started & maintenance) <= 2, f"maintenance limit exceeded: {sorted(started)}"
        return len(runs) == 6 and {"c", "f"} <= started and len(started & maintenance) == 2

    runs = _wait_for(instance, settled, "two maintenances, the observation run and the other team's run")
    first = sorted(n for n in maintenance if _status(runs, n) == STARTED)
    waiting = sorted(maintenance - set(first))
    for _ in range(6):  # the coordinator holds them for several dequeue cycles while two run
        runs = _runs(instance)
        assert all(_status(runs, n) == QUEUED for n in waiting), "the maintenance limit (2) was exceeded"
        time.sleep(0.5)

    for name in (*first, "c", "f"):
        (release / runs[name].dagster_run.run_id).touch()
    runs = _wait_for(instance, lambda r: all(_status(r, n) == STARTED for n in waiting), "the last two")
    for name in waiting:
        (release / runs[name].dagster_run.run_id).touch()
    done = dg.DagsterRunStatus.SUCCESS
    runs = _wait_for(instance, lambda r: all(_status(r, n) == done for n in r), "every run to succeed")
    first_end = min(runs[n].end_time or 0 for n in first)
    assert all((runs[n].start_time or 0) >= first_end for n in waiting), "a third maintenance overlapped"
