"""Contract: with an `sc://` master, icepack builds a Spark Connect client session with pyspark's real
Connect client (gRPC) and no local Java or jar. A server that does not answer fails within the
configured timeout (one that answers is not waited for longer than it takes), and an endpoint that
answers but is not a Spark Connect server fails at once; both with an error naming the endpoint and
what to check. Each table gets its own server-side session (`newSession()`), and a Connect session
never turns the process's classic pyspark into Connect mode.

A real compaction through a real Spark Connect server is test_spark_connect_server.py's."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from pyspark.errors.exceptions.connect import AnalysisException as ConnectAnalysisException
from pyspark.errors.exceptions.connect import SparkConnectGrpcException

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.exceptions import SparkConnectUnavailableError
from icepack_dagster.spark.connect import ConnectMaintenanceSession, connect_session, wait_for_server
from icepack_dagster.spark.failures import CONNECT_LOST, error_class, failure_hint
from icepack_dagster.spark.session import build_spark_session, is_connect_session
from tests.network import free_port


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on."""
    return free_port()


@pytest.fixture
def grpc_server_that_is_not_spark_connect() -> Iterator[int]:
    """A real gRPC server with no services: the port answers, but not as Spark Connect."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(grace=None)


def connect_settings(tmp_path: Path, master: str, **spark: object) -> IcepackSettings:
    return load_settings(home=tmp_path / "home", spark={"master": master, **spark})


def test_an_unreachable_server_fails_in_time_naming_the_endpoint(tmp_path: Path, closed_port: int) -> None:
    settings = connect_settings(tmp_path, f"sc://127.0.0.1:{closed_port}", connect_timeout_seconds=1)
    started = time.monotonic()
    with pytest.raises(SparkConnectUnavailableError) as raised:
        build_spark_session(settings)
    assert time.monotonic() - started < 30  # not pyspark's ten minutes of retries
    message = str(raised.value)
    assert f"sc://127.0.0.1:{closed_port} did not answer within 1 s" in message
    assert "start-connect-server.sh" in message and "ICEPACK_SPARK__CONNECT_TIMEOUT_SECONDS" in message
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ  # classic pyspark stays classic


def test_the_connect_path_needs_no_java_and_no_jar(
    tmp_path: Path, closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    missing_jar = str(tmp_path / "no-such-iceberg-runtime.jar")
    settings = connect_settings(
        tmp_path, f"sc://127.0.0.1:{closed_port}", connect_timeout_seconds=0.5, jars=[missing_jar]
    )
    with pytest.raises(SparkConnectUnavailableError, match=f"127.0.0.1:{closed_port}"):
        build_spark_session(settings)


def test_an_endpoint_that_is_not_spark_connect_fails_at_once(
    grpc_server_that_is_not_spark_connect: int,
) -> None:
    port = grpc_server_that_is_not_spark_connect
    started = time.monotonic()
    with pytest.raises(SparkConnectUnavailableError) as raised:
        connect_session(f"sc://127.0.0.1:{port}", {"spark.sql.session.timeZone": "UTC"}, timeout_seconds=5)
    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert f"sc://127.0.0.1:{port} failed while a session was set up" in message
    assert "UNIMPLEMENTED" in message and "Spark Connect server of Spark 3.5" in message


def test_each_table_gets_its_own_server_session(closed_port: int) -> None:
    """No RPC is made until a session is used: no server is needed to open the sessions."""
    first = ConnectMaintenanceSession(f"sc://127.0.0.1:{closed_port}", {})
    second = first.newSession()
    try:
        assert is_connect_session(first) and is_connect_session(second)
        assert isinstance(second, ConnectMaintenanceSession)
        assert second.client._session_id != first.client._session_id
    finally:
        second.stop()
        first.stop()
    assert second.is_stopped and first.is_stopped


def test_errors_from_a_connect_server_are_read_like_classic_ones() -> None:
    """pyspark 3.5's Connect client keeps no error class: it is read from the server's message."""
    missing = ConnectAnalysisException(
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `lake`.`a`.`b` cannot be found."
    )
    assert error_class(missing) == "TABLE_OR_VIEW_NOT_FOUND"
    lost = SparkConnectGrpcException("failed to connect to all addresses; last error: Connection refused")
    assert failure_hint(lost) == CONNECT_LOST


def test_a_server_that_answers_is_waited_for_without_delay(
    grpc_server_that_is_not_spark_connect: int,
) -> None:
    """gRPC's `close()` of the probe's channel waits about 0.2 s for its connectivity watcher; the probe
    returns as soon as the server answers (every run on a Connect server starts with it)."""
    started = time.monotonic()
    wait_for_server(f"sc://127.0.0.1:{grpc_server_that_is_not_spark_connect}", timeout_seconds=5)
    assert time.monotonic() - started < 0.15
