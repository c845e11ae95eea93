"""Contract (issue 15): the `spark` resource is dagster-pyspark's lazy Spark resource, sized by the run's
`icepack/spark-conf` tag when the run's resources are set up (a bad tag fails the run naming the table
and the tag); a real maintenance run's event log shows Spark's progress (jobs, stages, tasks done of
total) and the Spark application id; and no secret of the settings (a REST catalog's client secret, the
state database's password) appears in the resources' config as the code location's snapshot and the
GraphQL API, and so the UI, show it. A run sized onto a Spark Connect tier runs its batches without
generated code unless the tier's settings say otherwise. Spark's own warnings and errors reach the
step's compute log (stderr) when the step starts the JVM, as every maintenance step does. Table
contents never change."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql
from dagster_pyspark import LazyPySparkResource
from dagster_shared.serdes import serialize_value

import icepack_dagster.definitions
from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.defs.resources import SparkResource, sized_settings
from icepack_dagster.defs.run_tags import maintenance_tags
from icepack_dagster.domain.sizing.run_sizing import SPARK_CONF_TAG
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.spark.session import INTERPRETED_CONF, connect_batch_conf
from tests import tiers
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    run_health_sync,
    small_file_table,
)
from tests.tables_testkit import table_fingerprint

PROGRESS = re.compile(
    r"Spark application (?P<app>\S+): jobs \d+/\d+ done, stages \d+/\d+( \(\d+ skipped\))?, "
    r"tasks (?P<done>\d+)/(?P<total>\d+)"
)
REST_SECRET = "rest-client-secret-4711"
STATE_PASSWORD = "state-db-password-0815"
RESOURCES_QUERY = """
query Resources($selector: RepositorySelector!) {
  allTopLevelResourceDetailsOrError(repositorySelector: $selector) {
    ... on ResourceDetailsList { results { name configuredValues { key value } configFields { name } } }
  }
}
"""


@dg.op
def sized_master(spark: SparkResource) -> str:
    """What the run's resource would start Spark with; touches no JVM."""
    sized = spark.run_settings.spark
    return f"{sized.master} {sized.driver_memory} {sized.conf.get('spark.sql.shuffle.partitions')}"


def _sizing_job(spark: SparkResource) -> dg.JobDefinition:
    @dg.job(resource_defs={"spark": spark})
    def sizing() -> None:
        sized_master()

    return sizing


def test_the_spark_resource_is_dagster_pysparks_and_sized_by_the_run(
    defs: dg.Definitions, instance: dg.DagsterInstance
) -> None:
    spark = defs.resources["spark"]
    assert isinstance(spark, LazyPySparkResource) and isinstance(spark, SparkResource)
    sized = {"spark.master": "local[1]", "spark.driver.memory": "768m", "spark.sql.shuffle.partitions": "3"}
    tags = {SPARK_CONF_TAG: json.dumps(sized), "icepack/table": "lake.a.sized"}

    result = _sizing_job(spark).execute_in_process(instance=instance, tags=tags)

    assert result.output_for_node("sized_master") == "local[1] 768m 3"
    unsized = _sizing_job(spark).execute_in_process(instance=instance)
    assert unsized.output_for_node("sized_master").startswith("local[2] 1g ")
    configured = SparkResource(settings=spark.settings, spark_config={"spark.sql.shuffle.partitions": 5})
    assert _sizing_job(configured).execute_in_process(instance=instance).output_for_node(
        "sized_master"
    ) == "local[2] 1g 5"
    tag_wins = _sizing_job(configured).execute_in_process(instance=instance, tags=tags)
    assert tag_wins.output_for_node("sized_master") == "local[1] 768m 3"
    broken = _sizing_job(spark).execute_in_process(
        instance=instance, tags={SPARK_CONF_TAG: "{not json", "icepack/table": "lake.a.broken"},
        raise_on_error=False,
    )
    assert not broken.success
    failures = [str(event.event_specific_data) for event in broken.all_events if event.is_failure]
    assert any(f"table lake.a.broken: run tag {SPARK_CONF_TAG} is not JSON" in text for text in failures)


def test_a_run_sized_onto_a_connect_tier_gets_the_batch_settings_unless_its_tier_sets_them() -> None:
    """What a batch run's sessions set over the run's settings (`connect_batch_conf`) follows the run's
    sizing tag: a tier on a Spark Connect server runs its batches interpreted, and a key the tier's
    `spark_conf` sets keeps the tier's value; a local tier keeps code generation under any master."""
    tag = {"spark.master": "sc://spark-connect:15002", "spark.driver.memory": "1g"}
    local_settings = load_settings(spark={"master": "local[2]"})

    def sized(settings: IcepackSettings, conf: dict[str, str]) -> IcepackSettings:
        return sized_settings(settings, {SPARK_CONF_TAG: json.dumps(conf)}, "lake.a.sized")

    assert connect_batch_conf(sized(local_settings, tag)) == INTERPRETED_CONF
    own = tag | {"spark.sql.codegen.wholeStage": "true"}
    assert connect_batch_conf(sized(local_settings, own)) == {"spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    under_connect = load_settings(spark={"master": "sc://spark-connect:15002"})
    assert connect_batch_conf(sized(under_connect, tag | {"spark.master": "local[2]"})) == {}


@pytest.mark.spark
def test_a_maintenance_run_logs_sparks_progress_and_application(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    small_file_table(catalogs.get("lake"), f"{namespace}.busy", appends=12)
    apply_partition_requests(instance, evaluate_sensor(defs, "iceberg_table_discovery", instance))
    table = f"lake.{namespace}.busy"
    assert run_health_sync(defs, instance, [table]).success
    before = table_fingerprint(spark, table)

    result = defs.resolve_job_def("maintenance").execute_in_process(
        instance=instance, partition_key=table, tags=maintenance_tags(table)
    )

    assert result.success
    messages = [record.user_message for record in instance.all_logs(result.run_id)]
    progress = [match for message in messages if (match := PROGRESS.search(message))]
    assert progress, messages
    assert {match["app"] for match in progress} == {spark.sparkContext.applicationId}
    done, total = int(progress[-1]["done"]), int(progress[-1]["total"])
    assert total > 0 and done == total
    assert table_fingerprint(spark, table) == before


def test_no_secret_reaches_the_code_location_snapshot_or_the_ui(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real code location (`definitions.py` in a code server, settings from the environment as in a
    deployment), read as the webserver reads it."""
    monkeypatch.setenv("ICEPACK_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ICEPACK_STATE_URL", f"postgresql://icepack:{STATE_PASSWORD}@127.0.0.1:5432/icepack")
    rest = {"kind": "rest", "uri": "http://127.0.0.1:8181/api/catalog", "warehouse": "lake",
            "client_id": "icepack", "client_secret": REST_SECRET}
    monkeypatch.setenv("ICEPACK_CATALOGS", json.dumps({"lake": rest}))
    with dg.instance_for_test() as instance, define_out_of_process_context(
        icepack_dagster.definitions.__file__, "defs", instance
    ) as context:
        (location,) = context.code_location_names
        snapshots = [
            serialize_value(repository.repository_snap)
            for repository in context.get_code_location(location).get_repositories().values()
        ]
        selector = {"repositoryLocationName": location, "repositoryName": "__repository__"}
        shown = execute_dagster_graphql(context, RESOURCES_QUERY, {"selector": selector}).data

    resources = {r["name"]: r for r in shown["allTopLevelResourceDetailsOrError"]["results"]}
    assert [field["name"] for field in resources["spark"]["configFields"]] == ["spark_config"]
    assert "table_workers" in {value["key"] for value in resources["icepack"]["configuredValues"]}
    for text in [*snapshots, json.dumps(shown)]:
        assert "spark_config" in text  # the resources' config is there to be read ...
        assert REST_SECRET not in text and STATE_PASSWORD not in text  # ... and no secret with it


PROBE_JOB = textwrap.dedent(
    """
    import dagster as dg
    from py4j.protocol import Py4JJavaError

    from icepack_dagster.defs.resources import SparkResource, build_resources
    from icepack_dagster.config.settings import load_settings


    @dg.op
    def failing_spark_task(spark: SparkResource) -> str:
        try:
            spark.spark_session.sql("SELECT raise_error('icepack compute-log probe')").collect()
        except Py4JJavaError as error:  # the job Spark aborted
            return type(error).__name__
        raise AssertionError("raise_error did not fail")


    @dg.job
    def probe():
        failing_spark_task()


    defs = dg.Definitions(jobs=[probe], resources={"spark": build_resources(load_settings())["spark"]})
    """
)


@pytest.mark.spark
@pytest.mark.daemon
def test_sparks_warnings_and_errors_reach_the_steps_compute_log(
    tmp_path: Path, settings: IcepackSettings
) -> None:
    """A real run (`dagster job execute`, a step process of its own) whose step starts Spark through the
    resource and runs a task that fails: Spark's WARN and ERROR lines are in the step's stderr log."""
    tiers.require("daemon", "a Dagster run worker (`dagster job execute`)")
    (tmp_path / "probe.py").write_text(PROBE_JOB)
    env = {key: value for key, value in os.environ.items() if not key.startswith("ICEPACK_")} | {
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "ICEPACK_HOME": str(tmp_path / "home"),
        "ICEPACK_SPARK__MASTER": "local[1]",
        "ICEPACK_SPARK__DRIVER_MEMORY": "512m",
        "ICEPACK_SPARK__JAR_CACHE": str(settings.spark.jar_cache),
    }
    (tmp_path / "dagster_home").mkdir()
    dagster = Path(sys.executable).with_name("dagster")
    done = subprocess.run(
        [str(dagster), "job", "execute", "-f", str(tmp_path / "probe.py"), "-j", "probe"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (stderr_log,) = (tmp_path / "dagster_home").rglob("*.err")
    logged = stderr_log.read_text()
    assert re.search(r" WARN TaskSetManager: Lost task .*icepack compute-log probe", logged), logged[-3000:]
    assert re.search(r" ERROR Executor: Exception in task .*", logged), logged[-3000:]
