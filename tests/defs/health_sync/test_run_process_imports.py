"""Contract (issue 16): a steady health-sync run's process loads only what the run uses. Every run is a
fresh interpreter that imports the definitions before its first event, and on a fleet of small tables
that import is as much of the run's CPU as the work itself, so a library a steady sync never uses must
not be loaded by it: not requests (HTTP errors are classified as passing once something else loaded
requests: a REST catalog, an object store), not prometheus_client (only a fleet refresh writes
metrics), not pyarrow or pandas (PyIceberg's FileIO loads them to read a table whose metadata changed;
a steady sync reads none), and not PyIceberg's catalogs and tables: a SQL catalog's table list comes
from the catalog's own table, and no table is loaded (only `pyiceberg.exceptions`, a few exception
classes, is imported with the adapters).

Checked in a fresh interpreter, as a run process is: after a first sync in this process, it imports
the definitions and runs the steady sync of a real table on the same Dagster instance (nothing changed,
nothing written), then reports the modules it loaded. Nothing is timed: which modules a run loads does
not drift with the machine's load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import run_health_sync, small_file_table

NOT_FOR_A_STEADY_SYNC = {"requests", "prometheus_client", "pyarrow", "pandas"}
PYICEBERG_BEYOND_ITS_EXCEPTIONS = {"pyiceberg.catalog", "pyiceberg.table", "pyiceberg.io", "pyiceberg.schema"}
STEADY_SYNC_PROCESS = textwrap.dedent(
    """
    import json
    import sys

    import dagster as dg

    from icepack_dagster.definitions import build_definitions
    from icepack_dagster.defs.health_sync.job import health_sync_run_config
    from icepack_dagster.config.settings import load_settings

    dagster_home, home, include, partition = sys.argv[1:]
    settings = load_settings(home=home, catalogs={"lake": {"kind": "embedded"}}, include=[include])
    job = build_definitions(settings).resolve_job_def("health_sync")
    steady = health_sync_run_config([partition], "changes")
    with dg.DagsterInstance.from_config(dagster_home) as instance:
        run = job.execute_in_process(instance=instance, run_config=steady)
    modules = sorted(sys.modules)
    print(json.dumps({"success": run.success, "modules": modules}))
    """
)


def _health_materializations(instance: dg.DagsterInstance, partition: str) -> int:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=DEFAULT_NAMES.table_health, asset_partitions=[partition]), limit=10
    ).records
    return len(records)


def test_a_steady_health_sync_run_process_loads_no_library_it_does_not_use(
    tmp_path: Path, defs: dg.Definitions, settings: IcepackSettings, catalogs: CatalogSet, namespace: str
) -> None:
    small_file_table(catalogs.get("lake"), f"{namespace}.measured", appends=1)
    partition = f"lake.{namespace}.measured"
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        instance.add_dynamic_partitions(PARTITIONS_NAME, [partition])
        assert run_health_sync(defs, instance, [partition]).success  # the first sync, in this process
    env = {key: value for key, value in os.environ.items() if not key.startswith("ICEPACK_")}

    done = subprocess.run(
        [sys.executable, "-c", STEADY_SYNC_PROCESS, str(dagster_home), str(settings.home),
         f"lake.{namespace}.*", partition],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["success"]
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        assert _health_materializations(instance, partition) == 1, "the steady sync wrote nothing"
    modules = set(report["modules"])
    packages = {name.split(".")[0] for name in modules}
    assert {"dagster", "sqlalchemy"} <= packages  # it loaded what a sync uses ...
    assert not packages & NOT_FOR_A_STEADY_SYNC, sorted(packages & NOT_FOR_A_STEADY_SYNC)  # ... and no more
    assert not modules & PYICEBERG_BEYOND_ITS_EXCEPTIONS, sorted(modules & PYICEBERG_BEYOND_ITS_EXCEPTIONS)
