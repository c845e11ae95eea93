"""Warm Spark for the fleet benchmark: a Spark Connect server started as `icepack spark connect-server`
starts one, and the untimed warm-up that the server and the floor's plain session both get, so that
neither is timed with a cold JIT."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from bench._fixtures import Bench
from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.defs.partitions import table_key
from icepack_dagster.engine import Engine
from icepack_dagster.spark.connect_server import ConnectServerSize, running_connect_server
from icepack_dagster.spark.session import build_spark_session


def warm_up(settings: IcepackSettings, spark: Any, tables: list[str]) -> None:
    """Maintain `tables` through icepack's engine on `spark` (a local session, or a Connect session on
    the server), untimed: the JIT of the Iceberg procedures is warm before the timed work starts. The
    Connect server and the floor's session are warmed alike, on their own warm-up tables."""
    engine = Engine(settings, spark_provider=lambda: spark)
    for name in tables:
        report = engine.maintain(table_key(name), force=True)
        assert report.outcome == "succeeded", (name, report.outcome, report.first_error)


def connect_settings(bench: Bench, url: str) -> IcepackSettings:
    """The bench's catalog, with sessions on the Connect server at `url`."""
    return load_settings(home=bench.workdir / "home", catalogs={"lake": {"kind": "embedded"}},
                         spark={"master": url, "connect_timeout_seconds": 120}, status_workers=1)


@contextlib.contextmanager
def warm_connect_server(bench: Bench, size: ConnectServerSize, log: Path, warm_tables: list[str]
                        ) -> Iterator[tuple[str, int]]:
    """A serving, warmed Connect server with the bench's catalog: `(sc:// URL, its process group)`."""
    with running_connect_server(bench.settings, size, log) as (url, server):
        settings = connect_settings(bench, url)
        session = build_spark_session(settings)
        warm_up(settings, session, warm_tables)
        session.stop()
        yield url, server.pid


def open_files(group: int) -> int:
    """Open file descriptors of a process group's processes (spark-submit's: the server's JVM)."""
    return sum(p.num_fds() for p in group_processes(group))


def group_processes(group: int) -> list[psutil.Process]:
    """The processes of a process group (the Connect server's: spark-submit and its JVM)."""
    return [p for p in psutil.process_iter() if _group_of(p) == group]


def _group_of(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except (ProcessLookupError, PermissionError):
        return None
