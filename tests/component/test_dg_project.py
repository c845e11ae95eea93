"""icepack added to a Dagster project the way a team adds an integration. In a freshly made `dg`
project (a pyproject with `[tool.dg]`, the template's `definitions.py`, an empty defs folder):
`dg list components` lists `icepack_dagster.IcepackComponent` (found through the package's
`dagster_dg_cli.registry_modules` entry point); `dg scaffold defs icepack_dagster.IcepackComponent
lake_health` writes a `defs.yaml` that `dg check defs` accepts as it is and `dg list defs` shows
(icepack's assets in the component's group, its sensors, schedules and resources); and the scaffolded
component, loaded as Dagster loads the project's defs folder, discovers the tables of the embedded demo
catalog as its own partitions and materializes their status and health on a real instance, leaving the
tables' contents unchanged."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from icepack_dagster.config.settings import load_settings
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import apply_partition_requests, evaluate_sensor, run_health_sync
from tests.tables_testkit import arrow_fingerprint, make_table, table_key

REPO = Path(__file__).resolve().parents[2]
PROJECT = "lakeside"  # the host project's package
COMPONENT = "icepack_dagster.IcepackComponent"
PYPROJECT = f"""\
[project]
name = "{PROJECT}"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["icepack_dagster"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "{PROJECT}"
"""
# The code location module of a dg project, as dg's project template writes it.
DEFINITIONS = """\
from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
"""


def _dg() -> str:
    dg_cli = Path(sys.executable).with_name("dg")
    if not dg_cli.exists():
        pytest.fail(f"`dg` is not installed beside {sys.executable}: install dagster-dg-cli "
                    "(pip install -e '.[dev]')")
    return str(dg_cli)


def _environment(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    path = [str(REPO), str(project / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return env | {"PYTHONPATH": os.pathsep.join(path), "DAGSTER_HOME": str(project / "dagster_home")}


def dg_command(project: Path, *args: str) -> str:
    done = subprocess.run(
        [_dg(), *args], cwd=project, env=_environment(project), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"dg {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh dg project with the component scaffolded into `defs/lake_health`."""
    registered = importlib.metadata.entry_points(group="dagster_dg_cli.registry_modules")
    if "icepack_dagster" not in {entry.value for entry in registered}:
        pytest.fail(
            "the installed icepack_dagster has no dagster_dg_cli.registry_modules entry point, so dg cannot "
            "find IcepackComponent: reinstall the package (scripts/setup, or pip install -e '.[dev]')"
        )
    root = tmp_path_factory.mktemp("host") / PROJECT
    defs_folder = root / "src" / PROJECT / "defs"
    defs_folder.mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "src" / PROJECT / "__init__.py").write_text("")
    (root / "src" / PROJECT / "definitions.py").write_text(DEFINITIONS)
    (defs_folder / "__init__.py").write_text("")
    (root / "dagster_home").mkdir()
    (root / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    dg_command(root, "scaffold", "defs", COMPONENT, "lake_health")
    return root


def test_dg_lists_the_component(project: Path) -> None:
    listed = json.loads(dg_command(project, "list", "components", "--json"))["items"]
    summaries = {entry["key"]: entry["summary"] for entry in listed}
    assert summaries[COMPONENT].startswith("Keeps the Apache Iceberg tables")


def test_the_scaffolded_defs_yaml_checks_and_lists(project: Path) -> None:
    defs_yaml = project / "src" / PROJECT / "defs" / "lake_health" / "defs.yaml"
    assert defs_yaml.read_text().startswith(f"type: {COMPONENT}\n")
    dg_command(project, "check", "defs")
    listed = json.loads(dg_command(project, "list", "defs", "--json"))
    assets = {asset["asset_key"]: asset for asset in listed["assets"]}
    assert set(assets) == {
        "table_status", "table_health", "maintenance_recommendation", "maintained_table", "fleet_summary"
    }
    assert {asset["group_name"] for asset in assets.values()} == {"lake_health"}
    assert {s["name"] for s in listed["sensors"]} >= {"iceberg_table_discovery", "maintenance_sensor"}
    assert {s["name"] for s in listed["schedules"]} == {"health_sync_schedule", "housekeeping_schedule"}
    assert {resource["name"] for resource in listed["resources"]} == {"icepack", "spark"}


@pytest.fixture
def project_definitions(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dg.Definitions]:
    """The project's definitions, loaded in this process as `dagster dev` loads its defs folder."""
    for key in [k for k in os.environ if k.startswith("ICEPACK_")]:
        monkeypatch.delenv(key)
    monkeypatch.syspath_prepend(str(project / "src"))
    yield dg.load_from_defs_folder(path_within_project=project)
    for name in [m for m in sys.modules if m == PROJECT or m.startswith(f"{PROJECT}.")]:
        del sys.modules[name]


def test_the_scaffolded_component_materializes_demo_tables(
    project: Path, project_definitions: dg.Definitions
) -> None:
    catalogs = CatalogSet(load_settings(home=project / ".icepack"))  # the scaffolded yaml's home
    keys = [make_table(catalogs, table_key("demo", name), commits=3) for name in ("orders", "events")]
    before = {key.text: arrow_fingerprint(catalogs.get("lake").load_table(key.identifier)) for key in keys}

    with dg.instance_for_test() as instance:
        discovered = evaluate_sensor(project_definitions, "iceberg_table_discovery", instance)
        apply_partition_requests(instance, discovered)
        partitions = sorted(instance.get_dynamic_partitions("iceberg_tables_lake_health"))
        assert partitions == sorted(before)
        assert list(instance.get_dynamic_partitions("iceberg_tables")) == []

        sync = run_health_sync(project_definitions, instance, partitions)
        assert sync.success
        events = sync.get_asset_materialization_events()
        written = {(event.asset_key.to_user_string(), event.partition) for event in events}
        assert written == {(asset, p) for asset in ("table_status", "table_health") for p in partitions}

        clicked = project_definitions.resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance,
            partition_key=partitions[0],
            asset_selection=[dg.AssetKey("table_status"), dg.AssetKey("table_health")],
        )
        assert clicked.success
        run = instance.get_run_by_id(clicked.run_id)
        assert run is not None and run.tags["icepack/deployment"] == "lake_health"

    after = {key.text: arrow_fingerprint(catalogs.get("lake").load_table(key.identifier)) for key in keys}
    assert after == before
