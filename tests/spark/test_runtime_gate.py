"""Contract: before any action the runner asks the session which Iceberg runtime it runs, and refuses
what that runtime cannot do safely; the refusal is its own outcome (`refused`), names the table, the
runtime and the minimum, and leaves the table untouched.

A real Spark Connect server runs Iceberg 1.8.1 (from Maven Central, pinned in jvm_artifacts and fetched
by `icepack jars fetch --test-server`), beside the suite's classic session on the pinned runtime: the
probe tells them apart (each also says its Spark's version: over Connect, the server's), and neither it
nor the format version read starts a Spark job (a maintenance's first job is its first action's, and a
busy cluster's task slots never delay the gate); on the old server an action on a format v3 table is
refused and an option 1.8.1 lacks (`clean_expired_metadata`) is refused, while a compaction of a v2
table runs; an option that only changes how an action works (orphan removal's `stream_results`, 1.11.0)
is left out of the CALL on the old server, and the removal deletes exactly the planted orphans. Contents
are unchanged on main, branch and tag.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from icepack_dagster.cli.context import EXIT_CONFLICT, EXIT_REFUSED
from icepack_dagster.cli.maintain_command import _exit_code
from icepack_dagster.config.catalogs import jdbc_driver_jars
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.exceptions import SparkConnectUnavailableError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.spark.connect_server import ConnectServerSize, running_connect_server
from icepack_dagster.spark.iceberg_runtime import iceberg_runtime, spark_version, table_format_version
from icepack_dagster.spark.jvm_artifacts import ICEBERG_SPARK_RUNTIME, OLD_ICEBERG_SPARK_RUNTIME, cached_jar
from icepack_dagster.spark.runner import MaintenanceRunner
from icepack_dagster.spark.session import build_spark_session
from tests import tiers
from tests.engine.safety_testkit import age_files, files_under, table_dir
from tests.factories import make_action
from tests.network import free_port
from tests.tables_testkit import contents_by_version, spark_table_with_refs

pytestmark = [pytest.mark.spark, pytest.mark.jvm_servers]

A = MaintenanceAction


@pytest.fixture(scope="module")
def old_spark(settings: IcepackSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A Spark Connect client session on a real server that runs Iceberg 1.8.1."""
    tiers.require("jvm_servers", "a Spark Connect server")
    jars = [str(cached_jar(OLD_ICEBERG_SPARK_RUNTIME, settings.spark.jar_cache)), *jdbc_driver_jars(settings)]
    server_settings = settings.model_copy(update={"spark": settings.spark.model_copy(update={"jars": jars})})
    size = ConnectServerSize(master="local[1]", driver_memory="1g", port=free_port(), ui_port=free_port())
    log = tmp_path_factory.mktemp("old_connect") / "server.log"
    try:
        with running_connect_server(server_settings, size, log, 180) as (url, _):
            client = settings.spark.model_copy(update={"master": url, "connect_timeout_seconds": 120})
            yield build_spark_session(settings.model_copy(update={"spark": client}))
    except SparkConnectUnavailableError as error:
        pytest.fail(f"{error}:\n{log.read_text(errors='replace')[-3000:]}")


def test_the_probe_tells_each_spark_its_iceberg_runtime(spark: SparkSession, old_spark: SparkSession) -> None:
    assert iceberg_runtime(spark) == ICEBERG_SPARK_RUNTIME.version
    assert iceberg_runtime(old_spark) == "1.8.1"
    assert spark_version(old_spark) == spark_version(spark) == pyspark.__version__


def test_asking_the_runtime_and_the_format_version_starts_no_spark_job(
    spark: SparkSession, namespace: str
) -> None:
    key = spark_table_with_refs(spark, namespace, "asked", 3)
    context, group = spark.sparkContext, "runtime-gate-questions"

    def ask() -> tuple[str | None, int | None]:  # in a thread of its own, whose job group dies with it
        context.setJobGroup(group, "the gate's questions")
        return iceberg_runtime(spark), table_format_version(spark, "lake", key)

    with ThreadPoolExecutor(1) as pool:
        answers = pool.submit(ask).result()
    assert answers == (ICEBERG_SPARK_RUNTIME.version, 3)
    assert context.statusTracker().getJobIdsForGroup(group) == []


def test_an_old_runtime_is_refused_on_a_v3_table_and_for_options_it_lacks(
    spark: SparkSession, old_spark: SparkSession, namespace: str, tmp_path: Path
) -> None:
    v3 = spark_table_with_refs(spark, namespace, "v3", 3)
    v2 = spark_table_with_refs(spark, namespace, "v2", 2)
    contents = {key: contents_by_version(spark, key) for key in (v3, v2)}
    runner = MaintenanceRunner(old_spark, "lake")
    compaction = make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2"})
    now = datetime.now(UTC)

    [on_v3] = runner.run(v3, [compaction], now=now)
    expire = make_action(A.EXPIRE_SNAPSHOTS, clean_expired_metadata="true")
    on_v2 = runner.run(v2, [expire, compaction], now=now)

    assert (on_v3.status, on_v3.statements, on_v3.error) == ("refused", (), None)
    assert on_v3.reason == (
        f"table {v3.text}: rewrite_data_files refused: this Spark runs Iceberg 1.8.1, and a format v3 table "
        "(row lineage, deletion vectors) needs Iceberg 1.10.0 or later; upgrade the Spark's Iceberg runtime "
        "(icepack pins iceberg-spark-runtime-3.5_2.12, `icepack jars fetch`) or run maintenance on "
        "icepack's own Spark"
    )
    expiry, compacted = on_v2
    assert expiry.status == "refused" and "option clean_expired_metadata needs Iceberg 1.10.0" in (
        expiry.reason or ""
    )
    assert compacted.status == "succeeded", compacted.error  # the old runtime may still compact a v2 table
    report = MaintenanceReport(table=v3.text, started_at=now, finished_at=now, results=(on_v3,))
    assert report.outcome == "refused" and _exit_code({report.outcome}, False) == EXIT_REFUSED == 9
    # a refusal needs a person, a conflict only a quieter moment: with both, `maintain --all` says refused
    assert _exit_code({"refused", "conflict"}, True) == EXIT_REFUSED != EXIT_CONFLICT
    for key, before in contents.items():
        after = contents_by_version(spark, key)
        assert {v: after[v] for v in before} == before
    [[files]] = spark.sql(f"SELECT count(*) FROM {qualified_table('lake', v3)}.files").collect()
    assert files == 3  # nothing ran on the v3 table


def test_stream_results_is_left_out_on_an_old_runtime_and_the_removal_stays_exact(
    spark: SparkSession, old_spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    key = spark_table_with_refs(spark, namespace, "orphans_on_old", 2)
    root = table_dir(catalogs, key)
    planted = {root / "data" / f"stray-{n}.parquet" for n in range(3)}
    for path in planted:
        path.write_bytes(b"PAR1")
    age_files(root)
    every_file, before = files_under(root), contents_by_version(spark, key)
    three_days_ago = (datetime.now(UTC) - timedelta(days=3)).isoformat()
    removal = make_action(A.REMOVE_ORPHAN_FILES, older_than=three_days_ago, stream_results="true")

    [result] = MaintenanceRunner(old_spark, "lake").run(key, [removal])

    assert result.status == "succeeded", result.error or result.reason
    call = result.statements[-1]
    assert "stream_results" not in call and "older_than => TIMESTAMP" in call
    assert result.impact.orphan_files_removed == len(planted)
    assert files_under(root) == every_file - planted
    assert contents_by_version(spark, key) == before
