"""A long-lived Spark Connect server for maintenance: Spark 3.5.7's own `SparkConnectServer`, started
with the Iceberg runtime so that `sc://` maintenance pays no JVM start and no cold JIT per run.

pyspark's wheel ships `spark-submit` but not the Connect server; the server jar
(`org.apache.spark:spark-connect_2.12:3.5.7`), the Iceberg runtime and the catalogs' JDBC drivers come
from the jar cache (`spark/jvm_artifacts.py`, `icepack jars fetch`), as a classic session's do. The
server gets what a Connect client cannot set: the jars, Iceberg's SQL extensions, the master (its
cores) and the driver memory. The catalogs stay the client's: every maintenance session sets them at
run time (`spark/connect.py`), so one server serves any icepack deployment that can reach it.

Spark 3.5's Connect server has no authentication and listens on every interface: run it where only
icepack reaches it (a loopback port, a Kubernetes NetworkPolicy). `icepack spark connect-server` runs
one in the foreground; tests and benchmarks start theirs with `running_connect_server`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from icepack_dagster.config.settings import IcepackSettings, child_environment, java_home
from icepack_dagster.exceptions import SparkConnectUnavailableError
from icepack_dagster.spark.jvm_artifacts import SPARK_CONNECT_SERVER, cached_jar
from icepack_dagster.spark.session import (
    ICEBERG_EXTENSIONS,
    SPARK_REDACTION_REGEX,
    local_master_conf,
    require_java,
    resolve_jars,
)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002
_STOP_SECONDS = 30


@dataclass(frozen=True)
class ConnectServerSize:
    """What the server's JVM gets: Spark's master (`local[N]`: N cores for every table's work), the
    driver's heap, the port its gRPC service listens on, and the port of its Spark UI, whose REST API
    shows icepack each action's progress (`spark.connect_ui_url`); a local master has no UI without it."""

    master: str = "local[*]"
    driver_memory: str = "2g"
    port: int = DEFAULT_PORT
    ui_port: int | None = None


def spark_home() -> Path:
    """pyspark's installation, which holds `bin/spark-submit` and Spark's own jars."""
    import pyspark

    return Path(pyspark.__file__).parent


def server_command(settings: IcepackSettings, size: ConnectServerSize) -> list[str]:
    """The `spark-submit` command line of a Connect server with the Iceberg runtime and the JDBC drivers
    of the configured catalogs (or `spark.jars`), the same jars a classic session would load."""
    jars = [str(cached_jar(SPARK_CONNECT_SERVER, settings.spark.jar_cache)), *resolve_jars(settings)]
    log_config = Path(__file__).with_name("log4j2.properties").as_uri()
    conf = {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        "spark.connect.grpc.binding.port": str(size.port),
        "spark.redaction.regex": SPARK_REDACTION_REGEX,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log_config}",
        "spark.ui.showConsoleProgress": "false",
    }
    conf |= local_master_conf(size.master)
    if size.ui_port is not None:
        conf |= {"spark.ui.enabled": "true", "spark.ui.port": str(size.ui_port)}
    command = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS,
               "--name", f"{settings.spark.app_name}-connect", "--master", size.master,
               "--driver-memory", size.driver_memory, "--jars", ",".join(jars)]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, "spark-internal"]


def server_environment() -> dict[str, str]:
    """The environment `spark-submit` runs in: pyspark's Spark, no inherited PySpark/Spark overrides
    (a driver Python or a SPARK_CONF_DIR of the caller's own would change the server)."""
    env = child_environment(without_prefixes=("PYSPARK_", "SPARK_"))
    env["SPARK_HOME"] = str(spark_home())
    home = java_home()
    if home:
        env["JAVA_HOME"] = home
    return env


def start_connect_server(
    settings: IcepackSettings, size: ConnectServerSize, log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Start the server in its own process group (so `stop_connect_server` ends its JVM too), writing
    its output to `log`; returns once it started, not once it answers (`wait_until_serving`)."""
    require_java()
    command = server_command(settings, size)
    return subprocess.Popen(command, env=server_environment(), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def wait_until_serving(server: subprocess.Popen[bytes], url: str, timeout_seconds: float) -> None:
    """Return once the server at `url` answers; fail at once if it exits, or after `timeout_seconds`."""
    from icepack_dagster.spark.connect import wait_for_server

    deadline = time.monotonic() + timeout_seconds
    while True:
        if server.poll() is not None:
            raise SparkConnectUnavailableError(
                f"the Spark Connect server for {url} exited with {server.returncode} while starting: see its "
                "output (a missing jar, a port in use, too little memory for --driver-memory)"
            )
        try:
            wait_for_server(url, min(2.0, max(0.1, deadline - time.monotonic())))
            return
        except SparkConnectUnavailableError:
            if time.monotonic() > deadline:
                raise SparkConnectUnavailableError(
                    f"the Spark Connect server for {url} did not answer within {timeout_seconds:g} s "
                    "of its start"
                ) from None


def stop_connect_server(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (spark-submit and its JVM), SIGKILL after 30 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=_STOP_SECONDS)


@contextlib.contextmanager
def running_connect_server(
    settings: IcepackSettings, size: ConnectServerSize, log_path: Path, timeout_seconds: float = 180.0
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A serving Connect server on 127.0.0.1 as `(sc:// URL, process)`; stopped on exit."""
    url = f"sc://127.0.0.1:{size.port}"
    with log_path.open("ab") as log:
        server = start_connect_server(settings, size, log)
    try:
        wait_until_serving(server, url, timeout_seconds)
        yield url, server
    finally:
        stop_connect_server(server)
