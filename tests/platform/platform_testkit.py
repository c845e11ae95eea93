"""Helpers for the platform suite: the production instance configuration pointed at a test
database, and a code location file for it built from the real definitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from icepack_dagster.config.settings import IcepackSettings
from tests.conftest import PG_HOST, PG_PORT, PG_USER

REPO = Path(__file__).resolve().parents[2]
PROD_YAML = REPO / "deploy" / "dagster" / "dagster.prod.yaml"

def prod_instance_config() -> dict[str, Any]:
    return yaml.safe_load(PROD_YAML.read_text())


def pg_env(database: str, host: str = PG_HOST, port: int = PG_PORT, password: str = "") -> dict[str, str]:
    """The DAGSTER_PG_* variables the production YAML reads."""
    return {
        "DAGSTER_PG_HOST": host,
        "DAGSTER_PG_PORT": str(port),
        "DAGSTER_PG_USER": PG_USER,
        "DAGSTER_PG_PASSWORD": password,
        "DAGSTER_PG_DB": database,
    }


def code_location_settings(settings: IcepackSettings) -> dict[str, Any]:
    """`load_settings` arguments that rebuild the test's embedded-catalog settings in another process
    (no secrets: the daemon's code location only needs the embedded catalog)."""
    return {
        "home": str(settings.home),
        "catalogs": {"lake": {"kind": "embedded"}},
        "include": list(settings.include),
        "spark": {"master": "local[1]", "driver_memory": "1g"},
    }


def write_code_location(directory: Path, name: str, source: str, settings: dict[str, Any]) -> Path:
    """A python file defining `defs` (with `SETTINGS` available to it) and a workspace.yaml loading it."""
    return write_workspace(directory, {name: (source, settings)})


def write_workspace(directory: Path, locations: dict[str, tuple[str, dict[str, Any] | None]]) -> Path:
    """One python file per code location (named by it), each defining `defs` (with `SETTINGS` from the
    given `load_settings` arguments, when given), and a workspace.yaml loading them all."""
    entries = []
    for name, (source, settings) in locations.items():
        header = "" if settings is None else (
            "import json\n\nfrom icepack_dagster.config.settings import load_settings\n\n"
            f"SETTINGS = load_settings(**json.loads({json.dumps(settings)!r}))\n"
        )
        (directory / f"{name}.py").write_text(header + source)
        entries.append({"python_file": {"relative_path": f"{name}.py", "working_directory": str(REPO),
                                        "location_name": name}})
    workspace = directory / "workspace.yaml"
    workspace.write_text(yaml.safe_dump({"load_from": entries}))
    return workspace


def write_dagster_home(directory: Path, max_concurrent_runs: int | None = None) -> Path:
    """DAGSTER_HOME holding the production YAML with a one-second dequeue interval; with
    `max_concurrent_runs=0` the queue keeps every submitted run queued (nothing executes)."""
    config = prod_instance_config()
    config["run_coordinator"]["config"]["dequeue_interval_seconds"] = 1
    if max_concurrent_runs is not None:
        config["concurrency"]["runs"]["max_concurrent_runs"] = max_concurrent_runs
    home = directory / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    return home


def runs_of(instance: dg.DagsterInstance, job_name: str) -> list[dg.RunRecord]:
    return list(instance.get_run_records(filters=dg.RunsFilter(job_name=job_name)))


ONLY_COMPACTION = {
    f"icepack.action.{action}.enabled": "false"
    for action in (
        "rewrite_position_delete_files",
        "rewrite_manifests",
        "expire_snapshots",
        "remove_orphan_files",
    )
}
"""Table properties leaving compaction as the only action, so a maintenance run stays short."""


FAILURE_SENSOR = "maintenance_failure_sensor"


def evaluate_failure_sensor(
    defs: dg.Definitions, instance: dg.DagsterInstance, run_id: str
) -> dg.SkipReason | None:
    """The failure sensor on one failed run, as the daemon evaluates it."""
    run = instance.get_run_by_id(run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
    (failure,) = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records
    event = failure.event_log_entry.dagster_event
    assert event is not None
    with dg.build_run_status_sensor_context(
        sensor_name=FAILURE_SENSOR,
        dagster_event=event,
        dagster_instance=instance,
        dagster_run=run,
        resources=defs.resources,
    ) as context:
        return defs.resolve_sensor_def(FAILURE_SENSOR)(context)
