"""A maintenance run as a separate driver process on a Spark standalone cluster (run by
test_spark_standalone.py): its own SparkSession on `spark://`, executors in the worker's JVMs.

Creates a table of many small files in an embedded catalog under the given home, compacts it through
`MaintenanceRunner`, and prints one JSON line: the master, the executors seen, the file counts and the
contents fingerprints before and after.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from icepack_dagster.config.settings import load_settings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.iceberg.catalogs import open_catalog
from icepack_dagster.spark.runner import MaintenanceRunner
from icepack_dagster.spark.session import build_spark_session
from tests.factories import make_action
from tests.tables_testkit import table_fingerprint

ROWS_PER_INSERT = 40
INSERTS = 6


def main(home: Path, master: str) -> None:
    settings = load_settings(
        home=home,
        catalogs={"lake": {"kind": "embedded"}},
        spark={
            "master": master,
            "app_name": "icepack-standalone-test",
            "driver_memory": "512m",
            "conf": {
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": "512m",
                "spark.executor.cores": "1",
                "spark.cores.max": "1",
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
            },
        },
    )
    catalog = open_catalog("lake", settings)
    catalog.create_namespace_if_not_exists("standalone")
    spark = build_spark_session(settings)
    try:
        spark.sql("CREATE TABLE lake.standalone.events (id BIGINT, name STRING) USING iceberg")
        for batch in range(INSERTS):
            first = batch * ROWS_PER_INSERT
            spark.sql(
                f"INSERT INTO lake.standalone.events SELECT id, concat('event-', id) "
                f"FROM range({first}, {first + ROWS_PER_INSERT}, 1, 2)"
            )
        files_before = spark.sql("SELECT count(*) AS n FROM lake.standalone.events.files").collect()[0]["n"]
        before = table_fingerprint(spark, "lake.standalone.events")
        key = TableKey(catalog="lake", namespace=("standalone",), name="events")
        action = make_action(MaintenanceAction.REWRITE_DATA_FILES, **{"min-input-files": "2"})
        runner = MaintenanceRunner(spark, "lake")
        results = runner.run(key, [action], now=datetime.now(UTC))
        files_after = spark.sql("SELECT count(*) AS n FROM lake.standalone.events.files").collect()[0]["n"]
        after = table_fingerprint(spark, "lake.standalone.events")
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
        print(json.dumps({
            "master": spark.sparkContext.master,
            "block_managers": executors,
            "files_before": files_before,
            "files_after": files_after,
            "before": list(before),
            "after": list(after),
            "results": [[result.status, result.error] for result in results],
        }))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
