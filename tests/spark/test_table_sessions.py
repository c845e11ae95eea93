"""Contract: the sessions tables are maintained in (`spark/table_sessions.py`), on a real local Spark.

Outside `shared()` every table gets a fresh session. Inside it, a thread keeps one session for table
after table and each table's overridden settings are back to the session's own values after it;
another thread gets a session of its own; a table whose block raised, or that was discarded after a
failure, does not hand its session on. When `shared()` ends, the sessions' catalog clients are closed:
no JDBC connection to a PostgreSQL catalog stays open. Real tables keep their contents.

Threads asking for their first session at once look the process's Spark session up one at a time
(the first starts it: never two applications), and Spark is started only for a table that needs it:
tables with nothing to do, maintained by two threads inside `shared()` as a batch run does, never ask.
A shared session asks its Spark's Iceberg runtime once for all its tables; a fresh session asks.
Settings given to `shared()` (a batch's) are in every session it shares, on every thread and after a
failure, and in no session outside it; a `shared()` nested in it cannot change them, and a setting
Spark refuses is named."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import ConfigurationError, InternalError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.spark.iceberg_runtime import RUNTIME_PROBE
from icepack_dagster.spark.jvm_artifacts import ICEBERG_SPARK_RUNTIME
from icepack_dagster.spark.runner import MaintenanceRunner
from icepack_dagster.spark.table_sessions import TableSessions
from tests.defs.dagster_testkit import NO_ACTIONS, small_file_table
from tests.engine.safety_testkit import RecordingSpark
from tests.factories import make_action
from tests.postgres_testkit import jdbc_connections
from tests.tables_testkit import arrow_fingerprint, table_fingerprint

pytestmark = pytest.mark.spark

SHUFFLE = "spark.sql.shuffle.partitions"


def test_a_thread_keeps_its_session_and_each_table_leaves_it_as_found(spark: SparkSession) -> None:
    sessions = TableSessions(lambda: spark)
    with sessions.session_for("lake", ()) as alone, sessions.session_for("lake", ()) as other:
        assert alone is not other  # outside shared(): a fresh session each

    with sessions.shared():
        with sessions.session_for("lake", [SHUFFLE]) as first:
            baseline = first.conf.get(SHUFFLE)
            first.sql(f"SET {SHUFFLE}=3")
        with sessions.session_for("lake", ()) as second:
            assert second is first
            assert second.conf.get(SHUFFLE) == baseline != "3"

        seen: list[SparkSession] = []
        thread = threading.Thread(target=lambda: seen.append(_session_of(sessions)))
        thread.start()
        thread.join()
        assert seen and seen[0] is not first  # another thread, another session

        with pytest.raises(RuntimeError), sessions.session_for("lake", ()):
            raise RuntimeError("a table's maintenance broke")
        with sessions.session_for("lake", ()) as after_error:
            assert after_error is not first
            sessions.discard()  # a failed action: not handed on either
        with sessions.session_for("lake", ()) as after_discard:
            assert after_discard is not after_error

    with sessions.shared(), sessions.session_for("lake", ()) as next_run:
        assert next_run is not after_discard  # closed when the last shared() ended: never handed out again
        assert next_run.sql("SELECT 1").collect()[0][0] == 1


def test_settings_given_to_shared_reach_every_session_it_shares_and_no_other(spark: SparkSession) -> None:
    sessions = TableSessions(lambda: spark)
    wholestage = "spark.sql.codegen.wholeStage"
    with sessions.shared({wholestage: "false"}):
        with sessions.session_for("lake", [SHUFFLE]) as first:
            assert first.conf.get(wholestage) == "false"
        seen: list[str] = []
        thread = threading.Thread(target=lambda: seen.append(_session_of(sessions).conf.get(wholestage)))
        thread.start()
        thread.join()
        assert seen == ["false"]  # another thread's session too
        with sessions.session_for("lake", ()) as failed:
            sessions.discard()
        with sessions.session_for("lake", ()) as reopened:
            assert reopened is not failed and reopened.conf.get(wholestage) == "false"
        with pytest.raises(InternalError, match="nested shared"), sessions.shared({wholestage: "true"}):
            pass
        with sessions.shared(), sessions.session_for("lake", ()) as nested:
            assert nested is reopened  # a nested shared() without settings shares the outer's
    with sessions.session_for("lake", ()) as alone:
        assert alone.conf.get(wholestage) == "true"  # Spark's default: outside shared(), no batch setting
    with sessions.shared(), sessions.session_for("lake", ()) as next_run:
        assert next_run.conf.get(wholestage) == "true"
    with pytest.raises(ConfigurationError, match=r"batch session setting spark\.sql\.catalogImplementation"):
        with sessions.shared({"spark.sql.catalogImplementation": "hive"}), sessions.session_for("lake", ()):
            pass  # a static setting: Spark refuses it in a running session


class VersionRecordingSpark(RecordingSpark):
    """A `RecordingSpark` that also records each question for the Spark's version (on Spark Connect, a
    round trip to the server)."""

    def newSession(self) -> VersionRecordingSpark:  # noqa: N802 - SparkSession's own name
        return VersionRecordingSpark(self._session.newSession(), self.log)

    @property
    def version(self) -> str:
        self.log.append("VERSION")
        return str(self._session.version)


def test_a_shared_session_asks_its_iceberg_runtime_and_spark_version_once(spark: SparkSession) -> None:
    asked: list[str] = []
    sessions = TableSessions(lambda: VersionRecordingSpark(spark, asked))
    runtimes = []
    with sessions.session_for("lake", ()) as alone:
        runtimes.append((sessions.iceberg_runtime(alone), sessions.spark_version(alone)))
    with sessions.shared():
        for _ in range(3):
            with sessions.session_for("lake", ()) as shared:
                runtimes.append((sessions.iceberg_runtime(shared), sessions.spark_version(shared)))
    assert runtimes == [(ICEBERG_SPARK_RUNTIME.version, spark.version)] * 4
    # the fresh session's, and the shared one's for its 3 tables
    assert asked.count(RUNTIME_PROBE) == 2 and asked.count("VERSION") == 2


def _session_of(sessions: TableSessions) -> SparkSession:
    with sessions.session_for("lake", ()) as session:
        return session


def test_threads_starting_at_once_look_up_the_base_session_one_at_a_time(spark: SparkSession) -> None:
    lock = threading.Lock()
    calls, inside, most = 0, 0, 0

    def slow_base() -> SparkSession:  # as long as starting a Spark application, for the threads to meet
        nonlocal calls, inside, most
        with lock:
            calls, inside = calls + 1, inside + 1
            most = max(most, inside)
        time.sleep(0.3)
        with lock:
            inside -= 1
        return spark

    sessions = TableSessions(slow_base)
    both = threading.Barrier(2)

    def first_session(_: int) -> SparkSession:
        both.wait()
        return _session_of(sessions)

    with sessions.shared(), ThreadPoolExecutor(2) as pool:
        first, second = pool.map(first_session, range(2))
    assert calls == 2 and most == 1, "one thread at a time"
    assert first is not second


def test_tables_with_nothing_to_do_never_start_spark(
    settings: IcepackSettings, catalogs: CatalogSet, namespace: str
) -> None:
    lake = catalogs.get("lake")
    names = [f"{namespace}.idle_{n}" for n in range(2)]
    tables = [small_file_table(lake, name, appends=10, properties=NO_ACTIONS) for name in names]
    before = [arrow_fingerprint(table) for table in tables]
    asked: list[str] = []

    def no_spark() -> SparkSession:
        asked.append(threading.current_thread().name)
        raise AssertionError("Spark asked for by a table with nothing to do")

    engine = Engine(settings, spark_provider=no_spark)
    keys = [TableKey(catalog="lake", namespace=(namespace,), name=name.rsplit(".", 1)[1]) for name in names]
    with engine.table_sessions.shared(), ThreadPoolExecutor(2) as pool:
        outcomes = [report.outcome for report in pool.map(engine.maintain, keys)]
    assert outcomes == ["nothing_to_do", "nothing_to_do"] and asked == []
    assert [arrow_fingerprint(lake.load_table(name)) for name in names] == before


def test_shared_tables_close_their_catalog_client_at_the_end(
    spark: SparkSession, postgres_database: str, namespace: str
) -> None:
    keys = [TableKey(catalog="pg", namespace=(namespace,), name=f"t{i}") for i in range(3)]
    for key in keys:
        qualified = qualified_table("pg", key)
        spark.sql(f"CREATE TABLE {qualified} (id bigint) USING iceberg")
        for start in (0, 10):
            spark.sql(f"INSERT INTO {qualified} SELECT id FROM range({start}, {start + 10}, 1, 1)")
    before = {key: table_fingerprint(spark, qualified_table("pg", key)) for key in keys}
    sessions = TableSessions(lambda: spark)
    runner = MaintenanceRunner(None, "pg", sessions=sessions)
    idle = jdbc_connections(postgres_database)
    rewrite = make_action(MaintenanceAction.REWRITE_DATA_FILES, **{"min-input-files": "2"})

    with sessions.shared():
        for index, key in enumerate(keys):
            overrides = {"icepack.spark.sql.shuffle.partitions": "3"} if index == 0 else {}
            [result] = runner.run(key, [rewrite], overrides, now=datetime.now(UTC))
            assert (result.status, result.error) == ("succeeded", None)
            assert ("SET spark.sql.shuffle.partitions=3" in result.statements) == (index == 0)
        during = jdbc_connections(postgres_database)

    assert during > idle  # the shared session's catalog client was connected...
    assert jdbc_connections(postgres_database) == idle  # ...and is closed with it
    for key in keys:
        qualified = qualified_table("pg", key)
        assert table_fingerprint(spark, qualified) == before[key]
        files = spark.sql(f"SELECT count(*) FROM {qualified}.files").collect()[0][0]
        assert files == 1
