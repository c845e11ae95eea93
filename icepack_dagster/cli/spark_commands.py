"""`icepack spark connect-server`: a long-lived Spark Connect server with the Iceberg runtime, which
maintenance reaches through an `sc://` master without starting a JVM per run (spark/connect_server.py).
`icepack spark runtime`: which Iceberg runtime the configured Spark runs, and what it may maintain
(domain/actions/runtime_requirements.py)."""

from __future__ import annotations

import signal
import sys
from types import FrameType

import click

from icepack_dagster.cli.context import CommandContext, emit, json_option, pass_ctx
from icepack_dagster.config.settings import load_settings
from icepack_dagster.domain.actions.runtime_requirements import V3_MINIMUM, parse_version, shown
from icepack_dagster.spark.connect_server import (
    DEFAULT_PORT,
    ConnectServerSize,
    start_connect_server,
    stop_connect_server,
    wait_until_serving,
)
from icepack_dagster.spark.iceberg_runtime import iceberg_runtime


@click.group()
def spark() -> None:
    """Spark for maintenance: a long-lived Spark Connect server, and the Iceberg runtime it runs."""


@spark.command("runtime")
@json_option
@pass_ctx
def runtime(ctx: CommandContext, as_json: bool) -> None:
    """The Iceberg runtime of the configured Spark (asked of the session, also over Spark Connect)."""
    engine = ctx.engine
    version = iceberg_runtime(engine.spark())
    parsed = parse_version(version)
    v3 = parsed is not None and parsed >= V3_MINIMUM
    data = {"master": engine.settings.spark.master, "iceberg_runtime": version, "format_v3_tables": v3}
    emit(data, as_json, lambda: (
        f"{data['master']}: Iceberg {version or 'unknown (no answer to IcebergBuild.version())'}; "
        f"format v3 tables {'maintained' if v3 else f'refused (needs {shown(V3_MINIMUM)} or later)'}"
    ))


@spark.command("connect-server")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True,
              help="Port of the server's gRPC service (point icepack at sc://HOST:PORT).")
@click.option("--master", default="local[*]", show_default=True,
              help="The server's Spark master: local[N] gives every maintenance N cores.")
@click.option("--driver-memory", default=None,
              help="The server JVM's heap, e.g. 4g  [default: the settings' spark.driver_memory]")
@click.option("--ui-port", type=click.IntRange(1, 65535), default=None,
              help="Port of the server's Spark UI (a local master has none without it); point "
              "ICEPACK_SPARK__CONNECT_UI_URL at http://HOST:PORT for Spark's progress in the run log.")
@click.option("--start-timeout", type=click.FloatRange(1, 3600), default=300, show_default=True,
              help="Seconds the server may take to answer after its start.")
def connect_server(
    port: int, master: str, driver_memory: str | None, ui_port: int | None, start_timeout: float
) -> None:
    """Run a Spark Connect server (Spark 3.5.7, the pinned Iceberg runtime and the configured catalogs'
    JDBC drivers from the jar cache) in the foreground until interrupted. It has no authentication and
    listens on every interface: keep the port reachable by icepack only."""
    settings = load_settings()
    size = ConnectServerSize(master=master, driver_memory=driver_memory or settings.spark.driver_memory,
                             port=port, ui_port=ui_port)
    server = start_connect_server(settings, size, sys.stderr.buffer)

    def _terminate(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # SIGTERM is how a service manager stops it: a clean stop, like Ctrl-C

    signal.signal(signal.SIGTERM, _terminate)
    try:
        wait_until_serving(server, f"sc://127.0.0.1:{port}", start_timeout)
        click.echo(f"Spark Connect server serving on port {port} (master {master}, driver memory "
                   f"{size.driver_memory}, pid {server.pid}): set ICEPACK_SPARK__MASTER=sc://HOST:{port}")
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop_connect_server(server)
    if server.returncode not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
        raise SystemExit(server.returncode)


SPARK_COMMANDS = (spark,)
