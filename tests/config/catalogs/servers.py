"""The real servers the catalog tests talk to, run as child processes of the test session, and a
recording proxy that shows what crossed the wire.

- Iceberg's REST catalog test server (`RESTCatalogServer` from Iceberg's open-api test fixtures, the
  server of the `iceberg-rest-fixture` image), on its pinned classpath from the jar cache, backed by a
  JDBC catalog in a SQLite file: 1.10.1, the suite's, or 1.11.0, whose loadTable answers conditional
  requests (`spark/jvm_artifacts.py` says why the suite stays on 1.10.1);
- moto's server (S3 and Glue APIs).

Each runs on a free loopback port and is ended when the session ends; nothing outlives the test run.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from icepack_dagster.exceptions import MissingComponentError
from icepack_dagster.spark.jvm_artifacts import REST_TEST_SERVER_CLASSPATHS, cached_jar
from tests import tiers
from tests.network import answers, free_port
from tests.polling import wait_until
from tests.processes import stop

SQLITE_JDBC_JAR = "/usr/share/java/sqlite-jdbc.jar"
START_DEADLINE_SECONDS = 90
SUITE_REST_SERVER = "1.10.1"
ETAG_REST_SERVER = "1.11.0"


@contextlib.contextmanager
def running(command: list[str], env: dict[str, str], ready_url: str, log: Path) -> Iterator[None]:
    """A child process that answers at `ready_url` (the start fails at once, with its log, if it
    exits first), terminated (then killed) on exit."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        return answers(ready_url)

    try:
        wait_until(ready, f"the server at {ready_url}", START_DEADLINE_SECONDS, 0.2,
                   detail=lambda: log.read_text()[-3000:])
        yield
    finally:
        stop(process)


def rest_server_classpath(jar_cache: Path, version: str = SUITE_REST_SERVER) -> str:
    """The pinned classpath of server `version` from the jar cache; a missing jar raises
    `MissingComponentError` naming `icepack jars fetch --test-server`."""
    jars = []
    for artifact in REST_TEST_SERVER_CLASSPATHS[version]:
        try:
            jars.append(str(cached_jar(artifact, jar_cache)))
        except MissingComponentError as error:
            raise MissingComponentError(
                f"{error}. It belongs to Iceberg's REST test server: `icepack jars fetch --test-server`"
            ) from None
    return os.pathsep.join([*jars, SQLITE_JDBC_JAR])


@contextlib.contextmanager
def rest_catalog_server(
    jar_cache: Path, workdir: Path, version: str = SUITE_REST_SERVER
) -> Iterator[str]:
    """Iceberg's REST catalog server `version` over a SQLite JDBC catalog and a local warehouse; yields
    its URL."""
    tiers.require("jvm_servers", "Iceberg's REST catalog server")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CATALOG_", "ICEPACK_"))}
    env |= {
        "CATALOG_URI": f"jdbc:sqlite:{workdir / 'rest_catalog.db'}",
        "CATALOG_WAREHOUSE": (workdir / "rest_warehouse").as_uri(),
        "CATALOG_JDBC_SCHEMA__VERSION": "V1",
        "CATALOG_REST_PORT": str(port),
    }
    url = f"http://127.0.0.1:{port}"
    classpath = rest_server_classpath(jar_cache, version)
    command = ["java", "-Xmx256m", "-cp", classpath, "org.apache.iceberg.rest.RESTCatalogServer"]
    with running(command, env, f"{url}/v1/config", workdir / "rest_server.log"):
        yield url


# moto's server with its clock `days` behind: every object it stores is stamped that much in the past,
# as an object written days ago is. Iceberg's 24-hour orphan guard stays on (the JVM's clock is real);
# the store simply holds old files, the way the local tests age theirs with os.utime.
_MOTO_DAYS_BEHIND = """
import sys, datetime, time_machine
behind = datetime.timedelta(days=float(sys.argv[1]))
time_machine.travel(datetime.datetime.now(datetime.UTC) - behind, tick=True).start()
from moto.server import main
main(sys.argv[2:])
"""


@contextlib.contextmanager
def moto_server(workdir: Path, days_behind: float) -> Iterator[str]:
    """moto's S3 and Glue APIs on a free loopback port, clock `days_behind`; yields its URL."""
    port = free_port()
    command = [sys.executable, "-c", _MOTO_DAYS_BEHIND, str(days_behind), "-H", "127.0.0.1", "-p", str(port)]
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ICEPACK_"))}
    with running(command, env, f"{url}/moto-api/", workdir / "moto_server.log"):
        yield url


@dataclass
class Exchange:
    """One request that crossed the proxy, and the status the server answered."""

    method: str
    path: str
    user_agent: str
    authorization: str
    form: dict[str, str] = field(default_factory=dict)
    if_none_match: str | None = None
    status: int | None = None


class RecordingProxy:
    """A forwarding HTTP proxy in front of a server, recording each request (method, path, client,
    Authorization and If-None-Match headers, the form fields of token requests) and the status of its
    answer. It changes nothing it forwards."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.exchanges: list[Exchange] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                form = {}
                if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
                    form = dict(urllib.parse.parse_qsl(body.decode()))
                exchange = Exchange(
                    self.command,
                    self.path,
                    self.headers.get("User-Agent", ""),
                    self.headers.get("Authorization", ""),
                    form,
                    self.headers.get("If-None-Match"),
                )
                proxy.exchanges.append(exchange)
                upstream = proxy.upstream
                connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                connection.request(self.command, self.path, body=body or None, headers=headers)
                response = connection.getresponse()
                payload = response.read()
                exchange.status = response.status
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                connection.close()

            do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _forward  # noqa: N815

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
