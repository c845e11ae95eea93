"""Contract: maintenance runs on a real multi-process Spark cluster, not only on local Spark.

A Spark standalone master and one worker (from the pyspark distribution) start as their own JVMs; a
separate Python process drives a `spark://` session with icepack's settings (jars shipped to the
executors by `spark.jars`), builds a table of many small files and compacts it with
`MaintenanceRunner`. The run must have used an executor on the worker, left fewer files, and kept the
contents identical: row count and checksum by Spark, and the rows themselves read back by PyIceberg.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from icepack_dagster.config.settings import load_settings
from icepack_dagster.iceberg.catalogs import open_catalog
from tests import tiers
from tests.deploy import spark_standalone_job
from tests.deploy.helm_chart import REPO
from tests.network import free_port
from tests.polling import wait_until
from tests.processes import stop

pytestmark = pytest.mark.jvm_servers

SPARK_HOME = Path(pyspark.__file__).parent
DEADLINE_SECONDS = 90


def _daemon(log: Path, *args: str) -> subprocess.Popen[bytes]:
    tiers.require("jvm_servers", "a standalone Spark master and worker")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(log.parent)}
    with log.open("wb") as out:
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as response:
            state = json.load(response)
    except OSError:
        return 0
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


@pytest.fixture
def standalone_master(tmp_path: Path) -> Iterator[str]:
    """`spark://` URL of a running master with one ALIVE worker (1 core, 1 GiB); both stopped after."""
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    master = _daemon(tmp_path / "master.log", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(ui_port))
    url = f"spark://127.0.0.1:{port}"
    worker = _daemon(tmp_path / "worker.log", "org.apache.spark.deploy.worker.Worker", url,
                     "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                     "--webui-port", str(worker_ui), "--work-dir", str(tmp_path / "work"))

    def worker_alive() -> bool:
        for name, process in (("master", master), ("worker", worker)):
            if process.poll() is not None:
                log = (tmp_path / f"{name}.log").read_text()[-2000:]
                pytest.fail(f"the Spark {name} exited with {process.returncode}:\n{log}")
        return _alive_workers(ui_port) >= 1

    try:
        wait_until(worker_alive, f"an ALIVE worker registered with {url}", DEADLINE_SECONDS)
        yield url
    finally:
        stop(worker, timeout=20)
        stop(master, timeout=20)


@pytest.mark.spark
def test_rewrite_data_files_on_a_standalone_cluster(standalone_master: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    job = subprocess.run(
        [sys.executable, "-m", "tests.deploy.spark_standalone_job", str(home), standalone_master],
        cwd=REPO, capture_output=True, text=True, timeout=240,
        env={k: v for k, v in os.environ.items() if not k.startswith(("ICEPACK_", "PYSPARK_", "SPARK_"))},
    )
    assert job.returncode == 0, f"the driver process failed:\n{job.stderr[-4000:]}"
    report = json.loads(job.stdout.strip().splitlines()[-1])

    assert report["master"] == standalone_master
    assert report["block_managers"] >= 2, "the driver alone ran it: no executor joined from the worker"
    assert report["results"] == [["succeeded", None]]
    assert report["files_after"] < report["files_before"], report
    assert report["after"] == report["before"], "compaction changed the table's contents"
    rows, _ = report["after"]
    total = spark_standalone_job.ROWS_PER_INSERT * spark_standalone_job.INSERTS
    assert rows == total

    settings = load_settings(home=home, catalogs={"lake": {"kind": "embedded"}})
    table = open_catalog("lake", settings).load_table(("standalone", "events"))
    read_back = sorted(table.scan().to_arrow().to_pylist(), key=lambda row: row["id"])
    assert read_back == [{"id": i, "name": f"event-{i}"} for i in range(total)]
    assert table.current_snapshot().summary.operation.value == "replace"
