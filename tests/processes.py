"""A real `dagster-daemon` a test can kill -9 and restart, stopping any process a test started
(`stop`: SIGTERM, then SIGKILL past a timeout), and the processes a test run started.

Those are found by a marker in their environment: every child inherits the pytest process's
environment, so a process that outlived its test is found even after its parent died and it was
re-parented (a `dagster api grpc` server whose daemon was killed). The session-end check in
`tests/conftest.py` fails the run when any survives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from tests import tiers
from tests.polling import poll

RUN_MARKER = "PYTEST_ICEPACK_RUN"  # not ICEPACK_*: tests strip those from their children's environment
_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess)
DAEMON = str(Path(sys.executable).with_name("dagster-daemon"))
DAGSTER = str(Path(sys.executable).with_name("dagster"))


def with_environment(key: str, value: str) -> list[psutil.Process]:
    """Live processes other than this one whose environment has `key=value` (this run's marker, or
    the DAGSTER_HOME a daemon was started with)."""
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            if process.environ().get(key) == value and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (*_GONE, psutil.AccessDenied):
            continue
    return found


def describe(process: psutil.Process) -> str:
    try:
        return f"pid {process.pid}: {' '.join(process.cmdline())[:300]}"
    except (*_GONE, psutil.AccessDenied):
        return f"pid {process.pid}: (gone)"


def end(processes: list[psutil.Process], timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL whatever has not exited within `timeout`."""
    for process in processes:
        try:
            process.terminate()
        except _GONE:
            continue
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    for process in alive:
        try:
            process.kill()
        except _GONE:
            continue
    psutil.wait_procs(alive, timeout=timeout)


def survivors(run_id: str, grace_seconds: float) -> list[psutil.Process]:
    """This run's processes still alive after `grace_seconds` (polled, not slept through)."""
    if poll(lambda: not with_environment(RUN_MARKER, run_id), grace_seconds, 0.2):
        return []
    return with_environment(RUN_MARKER, run_id)


def stop(process: subprocess.Popen[Any], timeout: float = 30.0, group: bool = False) -> None:
    """SIGTERM a process a test started, then SIGKILL it if it has not exited within `timeout`
    seconds. With `group`, the signals go to its whole process group (a process started with
    `start_new_session=True`, and the JVMs and workers it started)."""

    def send(signal_number: int) -> None:
        if group:
            os.killpg(process.pid, signal_number)
        else:
            process.send_signal(signal_number)

    send(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        process.wait(timeout=timeout)


class DagsterDaemon:
    """A real `dagster-daemon run` in its own process group: started, killed with SIGKILL (no
    clean-up of any kind, as a node failure would), restarted, and stopped at the end."""

    def __init__(self, home: Path, workspace: Path, env: dict[str, str], log: Path) -> None:
        self.home, self.workspace, self.log = home, workspace, log
        self.env = {**os.environ, **env, "DAGSTER_HOME": str(home)}
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        tiers.require("daemon", "a dagster-daemon")
        assert self.process is None, "daemon already running"
        with self.log.open("a") as out:
            out.write(f"\n{self._start_marker(self.starts + 1)}\n")
            out.flush()
            self.process = subprocess.Popen(
                [DAEMON, "run", "-w", str(self.workspace)],
                cwd=self.workspace.parent,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1

    def kill(self) -> None:
        """SIGKILL the daemon and everything it started (its code server, run workers)."""
        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None
        end(with_environment("DAGSTER_HOME", str(self.home)), timeout=0)

    def stop(self) -> None:
        if self.process is None:
            return
        stop(self.process, group=True)
        self.process = None
        # A code server (`dagster api grpc`) was seen outliving the daemon's SIGTERM: end whatever still
        # runs with this instance's DAGSTER_HOME.
        end(with_environment("DAGSTER_HOME", str(self.home)))

    @staticmethod
    def _start_marker(start: int) -> str:
        return f"===== start {start} ====="

    def output_of_last_start(self) -> str:
        """What the daemon printed since it was last started: a log line an earlier start printed (a
        resumed tick's, say) is not evidence of what the running daemon did."""
        if not self.log.exists():
            return ""
        return self.log.read_text().rpartition(self._start_marker(self.starts))[2]

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text()[-chars:] if self.log.exists() else "(no daemon log)"

    def dagster_cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The `dagster` CLI against the same instance and workspace, as an operator would run it."""
        done = subprocess.run(
            [DAGSTER, *args, "-w", str(self.workspace)],
            cwd=self.workspace.parent,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"dagster {' '.join(args)}: {done.stdout}\n{done.stderr}"
        return done


def set_maintenance_pool(home: Path, limit: int) -> None:
    """The install step docs/DAGSTER.md asks for: the `icepack_maintenance` pool's limit set in the
    instance before any run is queued. (Dagster creates a pool from `default_limit` only when its
    queue first sees a run of it, and every run dequeued in that same pass escapes the limit.)"""
    subprocess.run(
        [DAGSTER, "instance", "concurrency", "set", "icepack_maintenance", str(limit)],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        check=True,
        capture_output=True,
    )
