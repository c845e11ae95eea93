"""Contract: maintenance through an `sc://` master works against a real Spark Connect server.

The server is Spark 3.5.7's own (`SparkConnectServer` from `org.apache.spark:spark-connect_2.12:3.5.7`,
pinned in jvm_artifacts and fetched by setup), started by pyspark's `spark-submit` with the Iceberg
runtime, the catalogs' JDBC drivers and Iceberg's SQL extensions by the code behind
`icepack spark connect-server` (`spark/connect_server.py`), as operators start theirs. icepack's
client sends only runtime `spark.sql.*` settings (the catalog among them), in one request per
session, and a refused one is named; a compaction through it must rewrite the files and keep the
contents identical. A batch's sessions on it plan without generated code (the server would compile it
again for every statement), while a table's own session keeps it: seen in each session's plans, and in
the SQL the server's own Spark UI lists for a real `maintenance_batch` run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import dagster as dg
import psutil
import pytest
from pyspark.errors import AnalysisException

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.maintenance.batch_job import (
    BATCH_JOB,
    BATCH_TABLES_TAG,
    MAINTAIN_TABLES_OP,
    batch_run_config,
)
from icepack_dagster.defs.materialization_codec import OUTCOME
from icepack_dagster.defs.partitions import PARTITIONS_NAME, partition_key
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import ConfigurationError, SparkConnectUnavailableError
from icepack_dagster.iceberg.catalogs import open_catalog
from icepack_dagster.spark.connect import ConnectMaintenanceSession, command_rows
from icepack_dagster.spark.connect_server import ConnectServerSize, running_connect_server
from icepack_dagster.spark.progress import reported_progress
from icepack_dagster.spark.runner import MaintenanceRunner
from icepack_dagster.spark.session import (
    build_spark_session,
    connect_batch_conf,
    is_connect_session,
    statement_rows,
)
from icepack_dagster.spark.table_sessions import TableSessions
from tests import tiers
from tests.factories import make_action
from tests.network import free_port
from tests.polling import wait_until
from tests.postgres_testkit import jdbc_connections
from tests.tables_testkit import (
    arrow_fingerprint,
    contents_by_version,
    kept_versions,
    table_fingerprint,
)

pytestmark = [pytest.mark.spark, pytest.mark.jvm_servers]

START_DEADLINE_SECONDS = 180
ICEPACK = str(Path(sys.executable).parent / "icepack")


@pytest.fixture(scope="module")
def server_size() -> ConnectServerSize:
    """The test server: one core, a small heap, and its Spark UI on a port of its own."""
    return ConnectServerSize(master="local[1]", driver_memory="1g", port=free_port(), ui_port=free_port())


@pytest.fixture(scope="module")
def connect_server(
    settings: IcepackSettings, server_size: ConnectServerSize, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`sc://127.0.0.1:PORT` of a running Spark Connect server, started as `icepack spark connect-server`
    starts one (`spark/connect_server.py`); stopped (its process group) after."""
    tiers.require("jvm_servers", "a Spark Connect server")
    size = server_size
    log = tmp_path_factory.mktemp("connect") / "server.log"
    try:
        with running_connect_server(settings, size, log, START_DEADLINE_SECONDS) as (url, _):
            yield url
    except SparkConnectUnavailableError as error:
        pytest.fail(f"{error}:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.mark.parametrize("with_ui", [False, True], ids=["no-ui-url", "ui-url"])
def test_compaction_through_a_real_connect_server(
    connect_server: str, server_size: ConnectServerSize, tmp_path: Path, with_ui: bool
) -> None:
    ui_url = f"http://127.0.0.1:{server_size.ui_port}" if with_ui else None
    settings = load_settings(home=tmp_path / "home", catalogs={"lake": {"kind": "embedded"}},
                             spark={"master": connect_server, "connect_timeout_seconds": 120,
                                    "connect_ui_url": ui_url})
    catalog = open_catalog("lake", settings)
    catalog.create_namespace_if_not_exists("connect")
    spark = build_spark_session(settings)
    assert is_connect_session(spark)
    try:
        spark.sql("CREATE TABLE lake.connect.events (id BIGINT, name STRING) USING iceberg")
        for batch in range(6):
            spark.sql(f"INSERT INTO lake.connect.events SELECT id, concat('e-', id) "
                      f"FROM range({batch * 20}, {batch * 20 + 20}, 1, 1)")
        files_before = spark.sql("SELECT count(*) AS n FROM lake.connect.events.files").collect()[0]["n"]
        before = table_fingerprint(spark, "lake.connect.events")
        key = TableKey(catalog="lake", namespace=("connect",), name="events")
        action = make_action(MaintenanceAction.REWRITE_DATA_FILES, **{"min-input-files": "2"})
        lines: list[str] = []
        [result] = MaintenanceRunner(spark, "lake").run(key, [action], now=datetime.now(UTC),
                                                         on_progress=lines.append)
        files_after = spark.sql("SELECT count(*) AS n FROM lake.connect.events.files").collect()[0]["n"]
        assert (result.status, result.error) == ("succeeded", None)
        assert files_before == 6 and files_after == 1
        output = result.impact.procedure_output  # the CALL's row, read from the server's answer to sql()
        assert (output["rewritten_data_files_count"], output["added_data_files_count"]) == (6, 1)
        assert table_fingerprint(spark, "lake.connect.events") == before == (120, before[1])
        # the Connect client gets no task progress: with the server's UI known, its REST API gives it,
        # and the result line ends with it, all done; without, no line has any
        result_line = lines[-1]
        assert result_line.startswith("table lake.connect.events: rewrite_data_files succeeded in "), lines
        if not with_ui:
            assert not any("Spark application " in line for line in lines), lines
        else:
            done = re.search(r"Spark application (local-\d+): jobs (\d+)/\2 done, stages (\d+)/\3.*, "
                             r"tasks (\d+)/\4\)$", result_line)
            assert done and int(done[2]) >= 1, lines
        # an action that outlives the first poll is said to run, naming the server's application and
        # the tag its jobs carry there
        told: list[str] = []
        running = "table t: running probe on Spark Connect application "
        with reported_progress(spark, "probe", "table t: running probe", told.append, interval=0.1):
            spark.sql("SELECT count(*) FROM lake.connect.events").collect()
            wait_until(lambda: any(line.startswith(running) for line in told), "the first poll", 60, 0.05)
        says = [line for line in told if line.startswith(running)]
        assert len(says) == 1 and re.search(r"application local-\d+: .* tag icepack-probe-", says[0]), told
        assert ("set spark.connect_ui_url" in says[0]) == (not with_ui), told
    finally:
        spark.stop()
    table = catalog.load_table(("connect", "events"))
    assert arrow_fingerprint(table)[0] == 120
    assert table.current_snapshot().summary.operation.value == "replace"


def test_a_batch_thread_holds_one_server_session_for_its_tables(
    connect_server: str, settings: IcepackSettings, postgres_database: str, namespace: str
) -> None:
    """A server session cannot be released from a Spark 3.5 client, and the server keeps its catalog
    client: a session per table would hold a PostgreSQL connection per table until the server stops.
    Shared (`spark/table_sessions.py`), the tables of a thread use one server session, each table's
    override is undone after it, and the compactions keep every table's contents."""
    remote = settings.spark.model_copy(update={"master": connect_server, "connect_timeout_seconds": 120})
    spark = build_spark_session(settings.model_copy(update={"spark": remote}))
    keys = [TableKey(catalog="pg", namespace=(namespace,), name=f"t{i}") for i in range(4)]
    try:
        for key in keys:
            table = f"pg.{namespace}.{key.name}"
            spark.sql(f"CREATE TABLE {table} (id BIGINT) USING iceberg")
            for start in (0, 10, 20):
                spark.sql(f"INSERT INTO {table} SELECT id FROM range({start}, {start + 10}, 1, 1)")
        before = {key: table_fingerprint(spark, f"pg.{namespace}.{key.name}") for key in keys}
        sessions = TableSessions(lambda: spark)
        runner = MaintenanceRunner(None, "pg", sessions=sessions)
        action = make_action(MaintenanceAction.REWRITE_DATA_FILES, **{"min-input-files": "2"})
        idle = jdbc_connections(postgres_database)
        used: set[int] = set()
        with sessions.shared():
            with sessions.session_for("pg", ()) as session:
                baseline = session.conf.get("spark.sql.shuffle.partitions")
            for index, key in enumerate(keys):
                overrides = {"icepack.spark.sql.shuffle.partitions": "3"} if index == 0 else {}
                [result] = runner.run(key, [action], overrides, now=datetime.now(UTC))
                assert (result.status, result.error) == ("succeeded", None)
                with sessions.session_for("pg", ()) as session:
                    used.add(id(session))
                    assert session.conf.get("spark.sql.shuffle.partitions") == baseline != "3"
        grown = jdbc_connections(postgres_database) - idle
        assert len(used) == 1
        assert 1 <= grown <= 2, grown  # one catalog client (Iceberg's JDBC pool holds up to 2), not 4
        for key in keys:
            assert table_fingerprint(spark, f"pg.{namespace}.{key.name}") == before[key]
            assert spark.sql(f"SELECT count(*) FROM pg.{namespace}.{key.name}.files").collect()[0][0] == 1
    finally:
        spark.stop()


def test_a_batchs_sessions_run_without_generated_code_and_keep_every_version(
    connect_server: str, tmp_path: Path
) -> None:
    """A Connect server runs each statement under a new class loader, so Spark compiles its generated
    code again every time: a batch's shared sessions (`connect_batch_conf`) plan no whole-stage code
    and build no generated expressions, while a table's session outside a batch keeps both. Every action runs
    interpreted in the batch, in the registry's order, and keeps main, the branch and the tag as they
    were. (Expressions built without generated code are not observable from here: their setting is
    read back.)"""
    settings = load_settings(home=tmp_path / "home", catalogs={"lake": {"kind": "embedded"}},
                             spark={"master": connect_server, "connect_timeout_seconds": 120})
    open_catalog("lake", settings).create_namespace_if_not_exists("interpreted")
    spark = build_spark_session(settings)
    try:
        key = TableKey(catalog="lake", namespace=("interpreted",), name="t")
        spark.sql("CREATE TABLE lake.interpreted.t (id BIGINT, part INT) USING iceberg PARTITIONED BY (part) "
                  "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
        for start in (0, 10, 20):
            spark.sql(f"INSERT INTO lake.interpreted.t SELECT id, CAST(id % 2 AS INT) FROM "
                      f"range({start}, {start + 10}, 1, 1)")
        spark.sql("ALTER TABLE lake.interpreted.t CREATE TAG before")
        spark.sql("ALTER TABLE lake.interpreted.t CREATE BRANCH audit")
        for doomed in (1, 11):
            spark.sql(f"DELETE FROM lake.interpreted.t WHERE id = {doomed}")
        before = contents_by_version(spark, key)
        sessions = TableSessions(lambda: spark)
        runner = MaintenanceRunner(None, "lake", sessions=sessions)
        now = datetime.now(UTC)
        soon, days_ago = (now + timedelta(minutes=5)).isoformat(), (now - timedelta(days=3)).isoformat()
        actions = [
            make_action(MaintenanceAction.REWRITE_DATA_FILES, **{"min-input-files": "2"}),
            make_action(MaintenanceAction.REWRITE_POSITION_DELETE_FILES, **{"rewrite-all": "true"}),
            make_action(MaintenanceAction.REWRITE_MANIFESTS),
            make_action(MaintenanceAction.COMPUTE_TABLE_STATS),
            make_action(MaintenanceAction.COMPUTE_PARTITION_STATS),
            make_action(MaintenanceAction.EXPIRE_SNAPSHOTS, older_than=soon, retain_last="2"),
            make_action(MaintenanceAction.REMOVE_ORPHAN_FILES, older_than=days_ago, dry_run="true"),
        ]

        def plan(session: object) -> str:
            rows = statement_rows(session, session.sql(  # type: ignore[attr-defined]
                "EXPLAIN SELECT id + 1 AS next FROM lake.interpreted.t WHERE id > 3"))
            return str(rows[0]["plan"])

        with sessions.session_for("lake", ()) as alone:
            assert "*(1) " in plan(alone)  # a whole-stage code generation stage
            assert alone.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
        with sessions.shared(connect_batch_conf(settings)):
            results = runner.run(key, actions, now=now)
            assert [(r.action, r.status, r.error) for r in results] == [
                (a.action, "succeeded", None) for a in actions]
            with sessions.session_for("lake", ()) as batch:
                assert "*(" not in plan(batch) and "Filter" in plan(batch)
                assert batch.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
        after = contents_by_version(spark, key)
        assert kept_versions(before, after) and after["'main'"][0] == 28 and after["'before'"][0] == 30
        assert spark.sql("SELECT count(*) FROM lake.interpreted.t.data_files").collect()[0][0] == 2  # 2 parts
    finally:
        spark.stop()


def _sql_until_marker(spark: Any, ui_url: str, after: int, phase: str) -> tuple[list[dict[str, Any]], int]:
    """The SQL executions the server's Spark UI lists (its REST API) with an id above `after` and below a
    marker statement this test's session sends now, and the marker's id. The UI's listener lists
    executions in the order they start, so once the marker is listed every execution before it is."""
    marker = f"icepack-marker-{phase}"
    spark.sql(f"SELECT '{marker}' AS marker FROM range(1)").collect()

    def listed() -> tuple[list[dict[str, Any]], int] | None:
        with urlopen(f"{ui_url}/api/v1/applications", timeout=10) as answer:
            application = json.load(answer)[0]["id"]
        address = (f"{ui_url}/api/v1/applications/{application}/sql"
                   "?details=true&planDescription=true&offset=0&length=100000")
        with urlopen(address, timeout=10) as answer:
            executions = json.load(answer)
        ends = [int(e["id"]) for e in executions if marker in e.get("planDescription", "")]
        if not ends:
            return None
        between = [e for e in executions if after < int(e["id"]) < ends[0]]
        return None if any(e["status"] == "RUNNING" for e in between) else (between, ends[0])

    return wait_until(listed, f"the server's Spark UI to list the SQL up to {marker}", timeout=60)


def _generated(execution: dict[str, Any]) -> bool:
    return any(node["nodeName"].startswith("WholeStageCodegen") for node in execution["nodes"])


def _rewrites_of(executions: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """The executions Iceberg's `rewrite_data_files` ran to rewrite `table`'s files (its job
    description: "Rewriting N files (BIN-PACK, ...) in <table>")."""
    return [e for e in executions if e["description"].startswith("Rewriting ") and
            e["description"].endswith(f" in {table}")]


def test_a_batch_run_on_a_connect_server_runs_its_tables_without_generated_code(
    connect_server: str, server_size: ConnectServerSize, tmp_path: Path
) -> None:
    """The real `maintenance_batch` job (in process, on a test instance) compacts a table on the server:
    none of the SQL the server ran for it has a whole-stage generated stage in the server's own Spark
    UI, while the same compaction of a twin table in a one-table session has one; both keep their
    contents."""
    ui_url = f"http://127.0.0.1:{server_size.ui_port}"
    settings = load_settings(home=tmp_path / "home", catalogs={"lake": {"kind": "embedded"}},
                             spark={"master": connect_server, "connect_timeout_seconds": 120},
                             platform={"maintenance_batch_size": 5})
    open_catalog("lake", settings).create_namespace_if_not_exists("batched")
    spark = build_spark_session(settings)
    keys = [TableKey(catalog="lake", namespace=("batched",), name=name) for name in ("alone", "in_batch")]
    try:
        for key in keys:
            spark.sql(f"CREATE TABLE lake.batched.{key.name} (id BIGINT, name STRING) USING iceberg")
            for start in range(0, 80, 10):
                spark.sql(f"INSERT INTO lake.batched.{key.name} SELECT id, concat('e-', id) "
                          f"FROM range({start}, {start + 10}, 1, 1)")
        before = {key: table_fingerprint(spark, f"lake.batched.{key.name}") for key in keys}
        _, started = _sql_until_marker(spark, ui_url, -1, "start")

        action = make_action(MaintenanceAction.REWRITE_DATA_FILES, **{"min-input-files": "2"})
        [alone] = MaintenanceRunner(spark, "lake").run(keys[0], [action], now=datetime.now(UTC))
        assert (alone.status, alone.error) == ("succeeded", None)
        one_table, ended = _sql_until_marker(spark, ui_url, started, "one-table")
        rewrites = _rewrites_of(one_table, "lake.batched.alone")
        assert rewrites and all(_generated(e) for e in rewrites), [e["description"] for e in one_table]

        partition = partition_key(keys[1])
        with dg.instance_for_test() as instance:
            instance.add_dynamic_partitions(PARTITIONS_NAME, [partition])
            result = build_definitions(settings).resolve_job_def(BATCH_JOB).execute_in_process(
                instance=instance, run_config=batch_run_config([partition]),
                tags={BATCH_TABLES_TAG: json.dumps([partition])}, raise_on_error=False)
        [maintained] = [e for e in result.asset_materializations_for_node(MAINTAIN_TABLES_OP)
                        if e.asset_key == DEFAULT_NAMES.maintained_table]
        assert maintained.metadata[OUTCOME].value == "succeeded"
        batch, _ = _sql_until_marker(spark, ui_url, ended, "batch")
        generated = [e["description"] for e in batch if _generated(e)]
        assert _rewrites_of(batch, "lake.batched.in_batch") and not generated, generated
        for key in keys:
            assert table_fingerprint(spark, f"lake.batched.{key.name}") == before[key]
            assert spark.sql(f"SELECT count(*) FROM lake.batched.{key.name}.files").collect()[0][0] == 1
    finally:
        spark.stop()


def test_a_calls_rows_are_read_from_the_answer_to_sql_without_asking_again(
    connect_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server runs a CALL when `sql()` sends it and answers with its rows; reading them must not
    send the rows back to be executed again (one round trip per action), and must give the rows a
    `collect()` would."""
    settings = load_settings(home=tmp_path / "home", catalogs={"lake": {"kind": "embedded"}},
                             spark={"master": connect_server, "connect_timeout_seconds": 120})
    open_catalog("lake", settings).create_namespace_if_not_exists("rows")
    spark = build_spark_session(settings)
    try:
        spark.sql("CREATE TABLE lake.rows.t (id BIGINT) USING iceberg")
        for start in (0, 10, 20):
            spark.sql(f"INSERT INTO lake.rows.t SELECT id FROM range({start}, {start + 10}, 1, 1)")
        before = table_fingerprint(spark, "lake.rows.t")
        call = spark.sql("CALL lake.system.rewrite_data_files(table => 'rows.t', "
                         "options => map('min-input-files', '2'))")
        query = spark.sql("SELECT id, 'x' AS name FROM lake.rows.t WHERE id < 2 ORDER BY id")

        def asked_again() -> None:
            raise AssertionError("collect() asked the server for a CALL's rows again")

        monkeypatch.setattr(call, "collect", asked_again)
        inline = command_rows(call)
        monkeypatch.undo()
        assert len(inline) == 1 and inline == [row.asDict() for row in call.collect()]
        assert (inline[0]["rewritten_data_files_count"], inline[0]["added_data_files_count"]) == (3, 1)
        assert command_rows(query) == [{"id": 0, "name": "x"}, {"id": 1, "name": "x"}]  # a query: collected
        assert table_fingerprint(spark, "lake.rows.t") == before
    finally:
        spark.stop()


def test_a_setting_the_server_refuses_is_named(connect_server: str) -> None:
    """A session's settings go to the server in one request; when the server refuses one (a static
    setting only the server's start can give), the error names that key, not the whole request."""
    conf = {"spark.sql.session.timeZone": "UTC", "spark.sql.extensions": "org.example.Other",
            "spark.sql.shuffle.partitions": "3"}
    with pytest.raises(ConfigurationError, match=r"refused the setting spark\.sql\.extensions: "):
        ConnectMaintenanceSession(connect_server, conf)
    session = ConnectMaintenanceSession(connect_server, {"spark.sql.shuffle.partitions": "3"})
    try:
        assert session.conf.get("spark.sql.shuffle.partitions") == "3"
        assert session.newSession().conf.get("spark.sql.shuffle.partitions") == "3"
    finally:
        session.stop()


def test_the_cli_serves_until_terminated(settings: IcepackSettings, tmp_path: Path) -> None:
    """`icepack spark connect-server` says where it serves once the server answers, serves SQL with the
    Iceberg extensions, and SIGTERM ends it together with its JVM."""
    tiers.require("jvm_servers", "a Spark Connect server")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    env |= {"ICEPACK_HOME": str(tmp_path / "home"), "ICEPACK_SPARK__JAR_CACHE": str(settings.spark.jar_cache)}
    command = [ICEPACK, "spark", "connect-server", "--port", str(port), "--master", "local[1]",
               "--driver-memory", "512m"]
    cli = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert cli.stdout is not None
        line = cli.stdout.readline()  # the first line comes once the server answers (or the CLI ended)
        served = re.search(rf"serving on port {port} \(master local\[1\], driver memory 512m, pid (\d+)",
                           line)
        assert served, line
        session = ConnectMaintenanceSession(f"sc://127.0.0.1:{port}", {})
        try:  # an Iceberg procedure parses only with the extensions the server was started with
            with pytest.raises(AnalysisException) as refused:
                session.sql("CALL lake.system.rewrite_data_files(table => 'ns.t')").collect()
            # Iceberg's parser read the CALL (Spark's own would fail to parse it) and looked for a
            # procedure catalog: `lake` is not configured in this session, so the session catalog
            assert "not a ProcedureCatalog" in str(refused.value), refused.value
        finally:
            session.stop()
        server = psutil.Process(int(served[1]))
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(timeout=60) == 0
        psutil.wait_procs([server], timeout=30)
        assert not server.is_running()
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait(timeout=60)
        if cli.stdout is not None:
            cli.stdout.close()
