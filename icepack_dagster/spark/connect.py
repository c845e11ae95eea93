"""Spark Connect (`sc://`) client sessions for maintenance.

The JVM, the Iceberg runtime jar and Iceberg's SQL extensions live on the Connect server; this side
sends SQL plus the runtime SQL settings of its session (the catalogs, the time zone) and needs neither
Java nor jars. Imported only for an `sc://` master: it loads the Connect client (grpc, pandas, pyarrow).

pyspark 3.5's Connect client has no `newSession()`, and maintenance needs sessions of its own (a
table's `SET`s must never reach another table: `spark/table_sessions.py`), so
`ConnectMaintenanceSession.newSession()` opens a fresh server-side session on the same endpoint with
the same settings.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping
from typing import Any

import grpc
import pyarrow as pa
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql.connect import proto
from pyspark.sql.connect.client import ChannelBuilder
from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
from pyspark.sql.connect.plan import CachedRelation
from pyspark.sql.connect.session import SparkSession as ConnectSession

from icepack_dagster.exceptions import ConfigurationError, SparkConnectUnavailableError
from icepack_dagster.spark.failures import spark_error_message

_CHECK = (
    "check that a Spark Connect server of Spark 3.5 runs there (sbin/start-connect-server.sh, default port "
    "15002), that this host can reach it (DNS, firewall, Kubernetes NetworkPolicy), and that use_ssl and "
    "token in the sc:// URL match the server"
)


def _channel(url: str) -> ChannelBuilder:
    try:
        return ChannelBuilder(url)
    except (PySparkException, ValueError) as error:
        message = f"spark.master is not a Spark Connect URL (sc://host:port): {spark_error_message(error)}"
        raise ConfigurationError(message) from None


def wait_for_server(url: str, timeout_seconds: float) -> None:
    """Fail within `timeout_seconds` when the server does not answer: pyspark's client retries an
    unreachable server for about ten minutes before it reports anything.

    The probe's channel is closed on a thread of its own: gRPC's `close()` waits for the channel's
    connectivity watcher, which wakes every 0.2 s, and every run on a Connect server (and every CLI
    command) would otherwise wait that long before its first table."""
    endpoint = _channel(url)
    channel = endpoint.toChannel()
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_seconds)
    except grpc.FutureTimeoutError:
        raise SparkConnectUnavailableError(
            f"Spark Connect server sc://{endpoint.endpoint} did not answer within {timeout_seconds:g} s: "
            f"{_CHECK}; ICEPACK_SPARK__CONNECT_TIMEOUT_SECONDS sets how long to wait"
        ) from None
    finally:
        threading.Thread(target=channel.close, name="icepack-connect-probe-close", daemon=True).start()


class ConnectMaintenanceSession(ConnectSession):
    """A Connect client session with icepack's runtime settings applied; a refused setting is an
    error naming its key (pyspark's builder would only warn and run on without it)."""

    def __init__(self, url: str, conf: Mapping[str, str], ui_url: str | None = None) -> None:
        endpoint = _channel(url)
        super().__init__(connection=endpoint)
        self._maintenance_url = url
        self._maintenance_conf = dict(conf)
        self.ui_url = ui_url  # the server's Spark UI, where `spark/progress.py` reads task progress
        self.application_id: str | None = None  # the server's, once `spark/progress.py` asked for it
        try:
            try:
                self._set_all(conf)
            except AnalysisException:  # a static or server-only setting among them: find it, to name it
                self._set_each(endpoint.endpoint, conf)
        except PySparkException as error:
            self.stop()
            raise SparkConnectUnavailableError(
                f"Spark Connect server sc://{endpoint.endpoint} failed while a session was set up: "
                f"{spark_error_message(error)}; {_CHECK}"
            ) from None

    def _set_all(self, conf: Mapping[str, str]) -> None:
        """Every setting in one request (sessions are opened per table or per batch thread: one round
        trip, not one per catalog key)."""
        if not conf:
            return  # no request at all: a session makes no RPC until it is used
        pairs = [proto.KeyValue(key=key, value=value) for key, value in conf.items()]
        result = self.client.config(proto.ConfigRequest.Operation(set=proto.ConfigRequest.Set(pairs=pairs)))
        for message in result.warnings:
            warnings.warn(message, stacklevel=2)

    def _set_each(self, endpoint: str, conf: Mapping[str, str]) -> None:
        for key, value in conf.items():
            try:
                self.conf.set(key, value)
            except AnalysisException as error:
                self.stop()
                raise ConfigurationError(
                    f"Spark Connect server sc://{endpoint} refused the setting {key}: "
                    f"{spark_error_message(error)}; set it where the server starts"
                ) from None

    def newSession(self) -> ConnectMaintenanceSession:
        """A fresh server-side session (its own SQL settings) on the same server, with the same settings."""
        return ConnectMaintenanceSession(self._maintenance_url, self._maintenance_conf, self.ui_url)


def connect_session(
    url: str, conf: Mapping[str, str], timeout_seconds: float, ui_url: str | None = None
) -> ConnectMaintenanceSession:
    """A session on the Connect server at `url`, once the server answers; `ui_url` is the server's Spark
    UI, if icepack may read progress there."""
    wait_for_server(url, timeout_seconds)
    return ConnectMaintenanceSession(url, conf, ui_url)


def command_rows(result: ConnectDataFrame) -> list[dict[str, Any]]:
    """The rows of a command that `sql()` ran (a `CALL`), without asking the server for them again.

    Spark 3.5's Connect server runs a command when `sql()` sends it and answers with the command's rows
    inline, as Arrow data in a local relation; `collect()` would send that relation back to the server
    to be executed once more: one more round trip per action (about 40 ms on a warm server,
    bench/HISTORY.md). The inline rows are read here; a result of any other shape (a query, a
    client whose answer looks different) is collected."""
    plan = result._plan  # pyspark 3.5's Connect DataFrame keeps the plan `sql()` returned here
    if isinstance(plan, CachedRelation):
        relation: proto.Relation = plan._plan
        if relation.HasField("local_relation") and relation.local_relation.HasField("data"):
            return pa.ipc.open_stream(relation.local_relation.data).read_all().to_pylist()
    return [row.asDict() for row in result.collect()]
