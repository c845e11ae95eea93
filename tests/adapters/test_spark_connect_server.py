"""Contract: maintenance through an `sc://` master works against a real Spark Connect server.

The server is Spark 3.5.7's own (`SparkConnectServer` from `org.apache.spark:spark-connect_2.12:3.5.7`,
pinned in jvm_artifacts and fetched by setup), started by pyspark's `spark-submit` with the Iceberg
runtime, the SQLite JDBC driver and Iceberg's SQL extensions, as docs/KUBERNETES.md tells operators to
start theirs. icepack's client sends only runtime `spark.sql.*` settings (the catalog among them); a
compaction through it must rewrite the files and keep the contents identical.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyspark
import pytest

from icepack_dagster.domain.actions import MaintenanceAction
from icepack_dagster.domain.recommendation_model import RecommendedAction
from icepack_dagster.domain.table_key import TableKey
from icepack_dagster.iceberg.catalogs import open_catalog
from icepack_dagster.settings import IcepackSettings, load_settings
from icepack_dagster.spark.jvm_artifacts import ICEBERG_SPARK_RUNTIME, SPARK_CONNECT_SERVER, cached_jar
from icepack_dagster.spark.runner import MaintenanceRunner
from icepack_dagster.spark.session import ICEBERG_EXTENSIONS, build_spark_session, is_connect_session
from tests.network import free_port
from tests.tables_testkit import arrow_fingerprint, table_fingerprint

pytestmark = pytest.mark.spark

SPARK_HOME = Path(pyspark.__file__).parent
START_DEADLINE_SECONDS = 180




@pytest.fixture(scope="module")
def connect_server(settings: IcepackSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`sc://127.0.0.1:PORT` of a running Spark Connect server; stopped (its process group) after."""
    cache = settings.spark.jar_cache
    jars = [cached_jar(SPARK_CONNECT_SERVER, cache), cached_jar(ICEBERG_SPARK_RUNTIME, cache),
            Path("/usr/share/java/sqlite-jdbc.jar")]
    port = free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env |= {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    with log.open("wb") as out:
        server = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-submit"),
             "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
             "--master", "local[1]", "--driver-memory", "1g",
             "--jars", ",".join(str(jar) for jar in jars),
             "--conf", f"spark.sql.extensions={ICEBERG_EXTENSIONS}",
             "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", "spark.ui.enabled=false",
             "spark-internal"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_DEADLINE_SECONDS
        while "Spark Connect server started" not in log.read_text(errors="replace"):
            if server.poll() is not None:
                pytest.fail(f"the Spark Connect server exited with {server.returncode}:\n"
                            f"{log.read_text(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"the Spark Connect server did not start within {START_DEADLINE_SECONDS} s")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def test_compaction_through_a_real_connect_server(connect_server: str, tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path / "home", catalogs={"lake": {"kind": "embedded"}},
                             spark={"master": connect_server, "connect_timeout_seconds": 120})
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
        action = RecommendedAction(action=MaintenanceAction.REWRITE_DATA_FILES, reason="many small files",
                                   priority=1.0, options={"min-input-files": "2"})
        lines: list[str] = []
        [result] = MaintenanceRunner(spark, "lake").run(key, [action], now=datetime.now(UTC),
                                                         on_progress=lines.append)
        files_after = spark.sql("SELECT count(*) AS n FROM lake.connect.events.files").collect()[0]["n"]
        assert (result.status, result.error) == ("succeeded", None)
        assert files_before == 6 and files_after == 1
        assert table_fingerprint(spark, "lake.connect.events") == before == (120, before[1])
        # no task progress through Connect: the server's application and the jobs' tag instead
        told = [line for line in lines if line.startswith("Spark Connect application ")]
        assert len(told) == 1, lines
        assert re.search(r"application local-\d+: .* tag icepack-rewrite_data_files-", told[0]), told
    finally:
        spark.stop()
    table = catalog.load_table(("connect", "events"))
    assert arrow_fingerprint(table)[0] == 120
    assert table.current_snapshot().summary.operation.value == "replace"
