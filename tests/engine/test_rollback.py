"""Contract: the guarded rollback undoes a table's last maintenance only when nothing else committed on
main since. With nothing since, `icepack rollback TABLE --dry-run` says exactly what it would restore and
changes nothing, and the `rollback_job` (run config: table) restores the snapshot the maintenance was
planned on, every snapshot and ref reading as before, recorded in the history (a second rollback finds
nothing to undo). With a writer's commit after the maintenance, `icepack rollback` refuses (exit 1),
lists what was committed since, and changes nothing. After a maintenance whose commit broke an invariant
it restores the table's contents and the table stays paused until released."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.run_tags import DEPLOYMENT_TAG
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.factories import make_action, make_recommendation
from tests.tables_testkit import (
    append_rows,
    contents_by_version,
    make_table,
    table_key,
)

pytestmark = pytest.mark.spark

ICEPACK = str(Path(sys.executable).parent / "icepack")
MAIN = "'main'"  # how `contents_by_version` names the main branch


def icepack(settings: IcepackSettings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    env |= {"ICEPACK_HOME": str(settings.home)}
    return subprocess.run([ICEPACK, *args], env=env, capture_output=True, text=True, timeout=300)


def maintained(engine: Engine, catalogs: CatalogSet, key: TableKey) -> int:
    """A real compaction of `key` through the engine; returns the snapshot it was planned on."""
    compaction = make_action(MaintenanceAction.REWRITE_DATA_FILES, **{"min-input-files": "2"})
    report = engine.maintain(key, recommendation=make_recommendation(compaction, table=key.text))
    assert report.outcome == "succeeded", report.first_error
    assert report.snapshot_id is not None
    return report.snapshot_id


def current(catalogs: CatalogSet, key: TableKey) -> int:
    return int(catalogs.get("lake").load_table(key.identifier).metadata.current_snapshot_id)


def test_a_maintenance_with_nothing_since_is_rolled_back_by_the_job_after_a_dry_run(
    spark: SparkSession, settings: IcepackSettings, catalogs: CatalogSet, namespace: str
) -> None:
    engine = Engine(settings, catalogs, spark_provider=lambda: spark)
    key = make_table(catalogs, table_key(namespace, "undone"), commits=4)
    planned_on = maintained(engine, catalogs, key)
    compacted = current(catalogs, key)
    versions = contents_by_version(spark, key)

    dry = icepack(settings, "rollback", key.text, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    plan = json.loads(dry.stdout)
    assert (plan["restore_to"], plan["from_snapshot"], plan["done"]) == (planned_on, compacted, False)
    assert len(plan["undone"]) == 1 and f"snapshot {compacted} (replace" in plan["undone"][0]
    assert current(catalogs, key) == compacted

    job = build_definitions(settings).resolve_job_def("rollback_job")
    with dg.instance_for_test() as instance:
        run = job.execute_in_process(
            instance=instance, run_config={"ops": {"rollback_table": {"config": {"table": key.text}}}}
        )
        tags = instance.get_run_by_id(run.run_id).tags  # housekeeping and run queries find it
    assert run.success and tags[DEPLOYMENT_TAG] == settings.platform.deployment_name
    assert current(catalogs, key) == planned_on
    after = contents_by_version(spark, key)
    assert after[MAIN] == versions[MAIN] and {v: versions[v] for v in after} == after

    again = engine.rollback(key)
    assert again.refused == "no maintenance that committed snapshots is recorded"
    assert current(catalogs, key) == planned_on


def test_a_commit_after_the_maintenance_refuses_the_rollback_and_changes_nothing(
    spark: SparkSession, settings: IcepackSettings, catalogs: CatalogSet, namespace: str
) -> None:
    engine = Engine(settings, catalogs, spark_provider=lambda: spark)
    key = make_table(catalogs, table_key(namespace, "written_since"), commits=4)
    maintained(engine, catalogs, key)
    append_rows(catalogs, key, 1000, 1010)  # a writer commits after the maintenance
    appended = current(catalogs, key)
    versions = contents_by_version(spark, key)

    refused = icepack(settings, "rollback", key.text)

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"table {key.text}: rollback refused: 1 snapshot(s) were committed on main since" in refused.stdout
    assert f"snapshot {appended} (append" in refused.stdout
    assert current(catalogs, key) == appended
    assert contents_by_version(spark, key) == versions
