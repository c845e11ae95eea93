"""icepack added to a Dagster project the way a team adds an integration. In a freshly made `dg`
project (a pyproject with `[tool.dg]`, the template's `definitions.py`, an empty defs folder):
`dg list components` lists `icepack_dagster.IcepackComponent` (found through the package's
`dagster_dg_cli.registry_modules` entry point); `dg scaffold defs icepack_dagster.IcepackComponent
lake_health` writes a `defs.yaml` that `dg check defs` accepts as it is and `dg list defs` shows
(icepack's assets in the component's group, its sensors, schedules and resources); a second component
for a second lake (`lake_south`, its own embedded catalog) loads beside it, every name of each under its
own prefix; and the two components, loaded as Dagster loads the project's defs folder, each discover
the tables of their own lake as their own partitions and materialize their status and health on one
real instance, leaving the tables' contents unchanged."""

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
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import apply_partition_requests, evaluate_sensor, run_health_sync
from tests.tables_testkit import arrow_fingerprint, make_table, table_key

REPO = Path(__file__).resolve().parents[2]
PROJECT = "lakeside"  # the host project's package
LAKES = {"lake_health": ".icepack", "lake_south": ".icepack_south"}  # component -> its lake's home
ASSETS = ("table_status", "table_health", "maintenance_recommendation", "maintained_table", "fleet_summary")
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
    for component, home in LAKES.items():
        dg_command(root, "scaffold", "defs", COMPONENT, component)
        defs_yaml = defs_folder / component / "defs.yaml"
        defs_yaml.write_text(defs_yaml.read_text().replace('/.icepack"', f'/{home}"'))  # a lake of its own
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
    assert set(assets) == {f"{lake}/{asset}" for lake in LAKES for asset in ASSETS}
    for key, asset in assets.items():
        assert asset["group_name"] == key.split("/")[0]
    sensors = {s["name"] for s in listed["sensors"]}
    schedules = {s["name"] for s in listed["schedules"]}
    for lake in LAKES:
        assert {f"{lake}_iceberg_table_discovery", f"{lake}_maintenance_sensor"} <= sensors
        assert {f"{lake}_health_sync_schedule", f"{lake}_housekeeping_schedule"} <= schedules
    assert len(schedules) == 2 * len(LAKES)
    resources = {resource["name"] for resource in listed["resources"]}
    assert resources == {f"{lake}_{resource}" for lake in LAKES for resource in ("icepack", "spark")}


@pytest.fixture
def project_definitions(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dg.Definitions]:
    """The project's definitions, loaded in this process as `dagster dev` loads its defs folder."""
    for key in [k for k in os.environ if k.startswith("ICEPACK_")]:
        monkeypatch.delenv(key)
    monkeypatch.syspath_prepend(str(project / "src"))
    yield dg.load_from_defs_folder(path_within_project=project)
    for name in [m for m in sys.modules if m == PROJECT or m.startswith(f"{PROJECT}.")]:
        del sys.modules[name]


def test_each_component_materializes_its_own_lakes_tables(
    project: Path, project_definitions: dg.Definitions
) -> None:
    lakes = {lake: CatalogSet(load_settings(home=project / home)) for lake, home in LAKES.items()}
    tables = {"lake_health": ("orders", "events"), "lake_south": ("shipments",)}
    keys = {
        lake: [make_table(catalogs, table_key("demo", name), commits=3) for name in tables[lake]]
        for lake, catalogs in lakes.items()
    }

    def fingerprints() -> dict[str, object]:
        return {
            f"{lake}:{key.text}": arrow_fingerprint(lakes[lake].get("lake").load_table(key.identifier))
            for lake in LAKES
            for key in keys[lake]
        }

    before = fingerprints()
    with dg.instance_for_test() as instance:
        for lake in LAKES:
            names = DeploymentNames(lake)
            discovered = evaluate_sensor(project_definitions, names.name("iceberg_table_discovery"), instance)
            apply_partition_requests(instance, discovered)
            partitions = sorted(instance.get_dynamic_partitions(f"iceberg_tables_{lake}"))
            assert partitions == sorted(key.text for key in keys[lake]), lake

            sync = run_health_sync(project_definitions, instance, partitions, names=names)
            assert sync.success
            events = sync.get_asset_materialization_events()
            written = {(event.asset_key.to_user_string(), event.partition) for event in events}
            assert written == {(f"{lake}/{asset}", p) for asset in ASSETS[:2] for p in partitions}

            clicked = project_definitions.resolve_implicit_global_asset_job_def().execute_in_process(
                instance=instance,
                partition_key=partitions[0],
                asset_selection=[names.table_status, names.table_health],
            )
            assert clicked.success
            run = instance.get_run_by_id(clicked.run_id)
            assert run is not None and run.tags["icepack/deployment"] == lake
        assert list(instance.get_dynamic_partitions("iceberg_tables")) == []
        for lake in LAKES:  # each lake's partitions are still its own after the other's discovery
            assert sorted(instance.get_dynamic_partitions(f"iceberg_tables_{lake}")) == sorted(
                key.text for key in keys[lake]
            )

    assert fingerprints() == before
