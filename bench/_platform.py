"""A real Dagster deployment of icepack on this machine, for the benchmarks that time runs as runs.

A DAGSTER_HOME holding the repository's own `dagster.yaml` (SQLite storage, the queued run
coordinator and its limits, Dagster's default run launcher: one `dagster api execute_run` process per
run, started by the daemon's code server), a workspace loading `icepack_dagster.definitions`, the
settings the code location reads (a YAML file named by ICEPACK_CONFIG), and a real `dagster-daemon`.
Runs are submitted to the queue with `dagster job launch`, as an operator would, or by the
daemon's own sensors; the daemon dequeues and launches them. Times are read back from the instance:
a run's *launch* is its `RUN_STARTING` event (the daemon handing it to the launcher), its *start*
the worker's `RUN_START` (code location loaded), its *end* the run record's end time.
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
        self, root: Path, settings: dict[str, Any], queue_interval_seconds: int | None = None
    ) -> None:
        shutil.rmtree(root, ignore_errors=True)
        self.root = root
        self.home = root / "dagster_home"
        self.home.mkdir(parents=True)
        instance_config = yaml.safe_load((REPO / "dagster.yaml").read_text())
        if queue_interval_seconds is not None:
            instance_config["run_coordinator"]["config"]["dequeue_interval_seconds"] = queue_interval_seconds
        (self.home / "dagster.yaml").write_text(yaml.safe_dump(instance_config))
        self.workspace = root / "workspace.yaml"
        self.workspace.write_text((REPO / "workspace.yaml").read_text())
        config = root / "icepack.yaml"
        config.write_text(yaml.safe_dump(settings))
        clean = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
        self.env = clean | {
            "DAGSTER_HOME": str(self.home),
            "ICEPACK_CONFIG": str(config),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
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

    def launch(self, job: str, run_config: dict[str, Any], tags: dict[str, str] | None = None) -> str:
        """Submit one run to the queue with `dagster job launch`; returns its run id."""
        before = {r.dagster_run.run_id for r in self.instance.get_run_records()}
        args = [DAGSTER, "job", "launch", "-w", str(self.workspace), "-j", job,
                "--config-json", json.dumps(run_config)]
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

    def wait_measuring_cpu(self, run_id: str, timeout: float) -> tuple[RunTimes, float]:
        """Like `wait` for one run, also polling its worker process's CPU seconds (user + system, its
        children included) until it exits: a lower bound by at most one polling interval."""
        deadline = time.monotonic() + timeout
        cpu, worker = 0.0, None
        while True:
            record = self.instance.get_run_record_by_id(run_id)
            if record is not None and record.dagster_run.status in FINISHED:
                return self.times(run_id), cpu
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} not finished after {timeout:.0f} s; see {self.log}")
            worker = worker or self._worker(run_id)
            if worker is not None:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
                    times = worker.cpu_times()
                    cpu = max(cpu, times.user + times.system + times.children_user + times.children_system)
            time.sleep(0.1)

    def _worker(self, run_id: str) -> psutil.Process | None:
        """The run's worker process, from the launcher's "Started process for run (pid: N)" event."""
        engine_events = dg.DagsterEventType.ENGINE_EVENT
        for record in self.instance.get_records_for_run(run_id, of_type=engine_events).records:
            event = record.event_log_entry.dagster_event
            pid = event.engine_event_data.metadata.get("pid") if event is not None else None
            if pid is not None:
                with contextlib.suppress(psutil.NoSuchProcess):
                    return psutil.Process(int(pid.value))
        return None

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


def _home_of(process: psutil.Process) -> str | None:
    try:
        return process.environ().get("DAGSTER_HOME")
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None
