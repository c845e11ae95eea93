"""A real Dagster deployment of icepack on this machine, for the benchmarks that time runs as runs.

A DAGSTER_HOME holding the repository's own `dagster.yaml` (SQLite storage, or with
`postgres_database` the production instance's PostgreSQL storage in that database; the queued run
coordinator and its limits, Dagster's default run launcher: one `dagster api execute_run` process per
run, started by the daemon's code server), a workspace loading `icepack_dagster.definitions`, the
settings the code location reads (a YAML file named by ICEPACK_CONFIG), and a real `dagster-daemon`.
Runs are submitted to the queue with `dagster job launch`, as an operator would, or by the
daemon's own sensors and schedules; the daemon dequeues and launches them. Times are read back from
the instance: a run's *launch* is its `RUN_STARTING` event (the daemon handing it to the launcher),
its *start* the worker's `RUN_START` (code location loaded), its *end* the run record's end time.

Its processes load Python modules from bytecode, as the image's processes do (its `pip install`
compiles every module): an editable install has no bytecode beside icepack's sources, and with
PYTHONDONTWRITEBYTECODE set every run process would compile them again, so it is unset here and the
first process writes them (`__pycache__`, ignored by git; the installed packages have theirs).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import psutil
import yaml

from bench._fixtures import REPO
from bench._postgres import PORT as POSTGRES_PORT
from bench._postgres import production_instance

DAGSTER = str(Path(sys.executable).with_name("dagster"))
DAEMON = str(Path(sys.executable).with_name("dagster-daemon"))
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


@dataclass(frozen=True)
class RunTimes:
    """One run as its records tell it (seconds since the epoch)."""

    run_id: str
    status: dg.DagsterRunStatus
    created: float
    launched: float
    started: float
    ended: float

    @property
    def launch_to_end(self) -> float:
        """The run as a run: process start, imports, definitions, execution (not the queue wait)."""
        return self.ended - self.launched

    @property
    def process_start(self) -> float:
        """From the launcher's hand-over to the worker's first event: Python, imports, definitions."""
        return self.started - self.launched


class Platform:
    """DAGSTER_HOME, workspace and settings under `root`; the daemon once `start()` is called."""

    def __init__(
        self,
        root: Path,
        settings: dict[str, Any],
        queue_interval_seconds: int | None = None,
        more_locations: tuple[str, ...] = (),
        icepack_module: str | None = None,
        env: dict[str, str] | None = None,
        postgres_database: str | None = None,
        postgres_port: int = POSTGRES_PORT,
    ) -> None:
        """`more_locations`: Python modules loaded as code locations beside icepack's, each named as its
        module (a baseline job for comparison, for instance); `icepack_module`: a module loaded as
        icepack's location instead of `icepack_dagster.definitions` (a variant of its definitions);
        `env`: more environment variables for every process of the deployment; `postgres_database`: a
        database (bench/_postgres.py) for Dagster's run, event and schedule storage, with the production
        instance's storage settings, instead of SQLite under DAGSTER_HOME, reached at `postgres_port` (the
        server's, or a PgBouncer's in front of it: bench/_pgbouncer.py). The run queue's limits stay the
        repository's `dagster.yaml` (two observation runs at once), so only the storage differs."""
        shutil.rmtree(root, ignore_errors=True)
        self.root = root
        self.home = root / "dagster_home"
        self.home.mkdir(parents=True)
        instance_config = yaml.safe_load((REPO / "dagster.yaml").read_text())
        if queue_interval_seconds is not None:
            instance_config["run_coordinator"]["config"]["dequeue_interval_seconds"] = queue_interval_seconds
        if postgres_database is not None:
            instance_config["storage"] = production_instance(postgres_database, postgres_port)["storage"]
        (self.home / "dagster.yaml").write_text(yaml.safe_dump(instance_config))
        self.workspace = root / "workspace.yaml"
        workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
        if icepack_module is not None:
            workspace["load_from"][0]["python_module"]["module_name"] = icepack_module
        for module in more_locations:
            workspace["load_from"].append({"python_module": {"module_name": module, "location_name": module}})
        self.workspace.write_text(yaml.safe_dump(workspace))
        config = root / "icepack.yaml"
        config.write_text(yaml.safe_dump(settings))
        unset = ("ICEPACK_", "PYTHONDONTWRITEBYTECODE")
        clean = {k: v for k, v in os.environ.items() if not k.startswith(unset)}
        self.env = clean | {
            "DAGSTER_HOME": str(self.home),
            "ICEPACK_CONFIG": str(config),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        } | (env or {})
        self.log = root / "daemon.log"
        self._daemon: subprocess.Popen[bytes] | None = None
        self._instance: dg.DagsterInstance | None = None

    @property
    def instance(self) -> dg.DagsterInstance:
        if self._instance is None:
            self._instance = dg.DagsterInstance.from_config(str(self.home))
        return self._instance

    def start(self) -> None:
        with self.log.open("a") as out:
            self._daemon = subprocess.Popen(
                [DAEMON, "run", "-w", str(self.workspace)], cwd=self.root, env=self.env,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def stop(self) -> None:
        """SIGTERM to the daemon's process group (its code server and run workers), SIGKILL after 30 s."""
        if self._daemon is None:
            return
        try:
            os.killpg(self._daemon.pid, signal.SIGTERM)
            self._daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self._daemon.pid, signal.SIGKILL)
            self._daemon.wait(timeout=30)
        except ProcessLookupError:
            pass
        self._daemon = None
        # Code servers were seen outliving the daemon's SIGTERM: end whatever runs with this DAGSTER_HOME.
        leftover = [p for p in psutil.process_iter() if _home_of(p) == str(self.home)]
        for process in leftover:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.terminate()
        for process in psutil.wait_procs(leftover, timeout=30)[1]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        if self._instance is not None:
            self._instance.dispose()
            self._instance = None

    def cpu_seconds(self) -> float:
        """CPU seconds (user and system) so far of the daemon, the processes it started that still live
        (its code servers) and every process those reaped (ended run processes and their steps)."""
        assert self._daemon is not None, "start() the daemon first"
        daemon = psutil.Process(self._daemon.pid)
        total = 0.0
        for process in [daemon, *daemon.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = process.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
        return total

    def launch(
        self,
        job: str,
        run_config: dict[str, Any],
        tags: dict[str, str] | None = None,
        location: str | None = None,
    ) -> str:
        """Submit one run to the queue with `dagster job launch`; returns its run id. `location` names the
        code location when the workspace has more than one."""
        before = {r.dagster_run.run_id for r in self.instance.get_run_records()}
        args = [DAGSTER, "job", "launch", "-w", str(self.workspace), "-j", job,
                "--config-json", json.dumps(run_config)]
        if location:
            args += ["-l", location]
        if tags:
            args += ["--tags", json.dumps(tags)]
        done = subprocess.run(args, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            output = done.stdout[-2000:] + done.stderr[-2000:]
            raise RuntimeError(f"dagster job launch -j {job} failed:\n{output}")
        runs = [r.dagster_run.run_id for r in self.instance.get_run_records()]
        new = [run_id for run_id in runs if run_id not in before]
        if len(new) != 1:
            raise RuntimeError(f"expected one new run after dagster job launch, found {len(new)}")
        return new[0]

    def schedule(self, action: str, name: str, location: str | None = None, kind: str = "schedule") -> None:
        """`dagster schedule start|stop <name>`: the daemon ticks a running schedule on its cron (with
        `kind="sensor"`, `dagster sensor start|stop <name>`)."""
        args = [DAGSTER, kind, action, name, "-w", str(self.workspace)]
        if location:
            args += ["-l", location]
        done = subprocess.run(args, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            output = done.stdout[-2000:] + done.stderr[-2000:]
            raise RuntimeError(f"dagster {kind} {action} {name} failed:\n{output}")

    def wait(self, run_ids: list[str], timeout: float) -> list[RunTimes]:
        """Poll until every run finished (or fail naming the ones that did not)."""
        deadline = time.monotonic() + timeout
        while True:
            records = {r: self.instance.get_run_record_by_id(r) for r in run_ids}
            if all(rec is not None and rec.dagster_run.status in FINISHED for rec in records.values()):
                return [self.times(r) for r in run_ids]
            if time.monotonic() > deadline:
                open_runs = [r for r, rec in records.items()
                             if rec is None or rec.dagster_run.status not in FINISHED]
                raise TimeoutError(f"runs not finished after {timeout:.0f} s: {open_runs}; see {self.log}")
            time.sleep(0.5)

    def run_measuring_cpu(
        self, job: str, run_config: dict[str, Any], location: str | None = None, timeout: float = 600
    ) -> tuple[RunTimes, float]:
        """Launch one run, wait for it, and return its times and the CPU seconds (user and system) of
        its run process and of the processes that one started, exactly: the code server that started
        the run process adds them to its ended children's CPU once it has reaped it (it looks every half
        second). Only for runs measured one at a time: any other run process ending meanwhile would be
        counted too."""
        before = {server.pid: _ended_children_cpu(server) for server in self._code_servers()}
        assert before, "the daemon has no code server yet: launch a run first, unmeasured"
        run_id = self.launch(job, run_config, location=location)
        times = self.wait([run_id], timeout)[0]
        worker = self._worker_pid(run_id)
        deadline = time.monotonic() + 30
        while psutil.pid_exists(worker):  # a zombie still exists: not yet reaped, its CPU not yet counted
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id}: its process {worker} was not reaped within 30 s")
            time.sleep(0.05)
        # A code server the daemon started meanwhile (it replaces them now and then) counts from zero.
        cpu = sum(_ended_children_cpu(s) - before.get(s.pid, 0.0) for s in self._code_servers())
        if cpu <= 0:
            raise RuntimeError(f"run {run_id}: no code server of the daemon counts its process {worker}")
        return times, cpu

    def _code_servers(self) -> list[psutil.Process]:
        """The daemon's code servers (`dagster api grpc`, one per code location): they start the runs."""
        assert self._daemon is not None, "start() the daemon first"
        children = psutil.Process(self._daemon.pid).children(recursive=True)
        return [child for child in children if "grpc" in child.cmdline()]

    def _worker_pid(self, run_id: str) -> int:
        """The run process's pid, from the first engine event that names it."""
        engine_events = dg.DagsterEventType.ENGINE_EVENT
        for record in self.instance.get_records_for_run(run_id, of_type=engine_events).records:
            event = record.event_log_entry.dagster_event
            pid = event.engine_event_data.metadata.get("pid") if event is not None else None
            if pid is not None:
                return int(pid.value)
        raise RuntimeError(f"run {run_id}: no engine event names its process")

    def times(self, run_id: str) -> RunTimes:
        record = self.instance.get_run_record_by_id(run_id)
        assert record is not None
        starting = self.instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_STARTING).records
        start = self.instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_START).records
        created = record.create_timestamp.timestamp()
        launched = starting[0].event_log_entry.timestamp if starting else created
        started = start[0].event_log_entry.timestamp if start else launched
        ended = record.end_time or record.update_timestamp.timestamp()
        return RunTimes(run_id, record.dagster_run.status, created, launched, started, ended)


def _ended_children_cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.children_user + times.children_system


def _home_of(process: psutil.Process) -> str | None:
    try:
        return process.environ().get("DAGSTER_HOME")
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None
