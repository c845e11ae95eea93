"""Issue 26: the maintenance pool's limit is in the instance as soon as a code location loads icepack's
component, before any sensor ticks, on a fresh instance (PostgreSQL storage, the production YAML, a
real `dagster-daemon` whose code server loads the component with its sensors and schedules stopped,
so none ever ticks); a limit an operator stored is kept at the next load, which says it differs from
the cap; and where the process cannot
reach the instance that runs it (DAGSTER_HOME unset, no dagster.yaml there, the database down), the
definitions still load, nothing is written (no local SQLite instance made) and a log line says what
to do."""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg
import pytest
import yaml

from icepack_dagster import IcepackComponent
from icepack_dagster.defs.maintenance_pool import stored_pool_limit
from tests.platform.platform_testkit import pg_env, prod_instance_config, write_dagster_home, write_workspace
from tests.polling import wait_until
from tests.processes import DagsterDaemon

POOL, CAP = "lake_a_maintenance", 3


def component_yaml(home: Path) -> str:
    return yaml.safe_dump({
        "name": "lake_a",
        "home": str(home),
        "catalogs": {"lake": {"kind": "embedded"}},
        "automation": "stopped",
        "platform": {"max_maintenance_in_flight": CAP},
    })


LOCATION = """
import dagster as dg

from icepack_dagster import IcepackComponent

defs = dg.build_defs_for_component(IcepackComponent.resolve_from_yaml({text!r}))
"""


def _ticks(instance: dg.DagsterInstance) -> int:
    return sum(
        len(instance.get_ticks(state.instigator_origin_id, state.selector_id))
        for state in instance.all_instigator_state()
    )


@pytest.mark.postgres
@pytest.mark.daemon
def test_loading_the_component_stores_the_pool_limit_before_any_tick_and_keeps_an_operators(
    dagster_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    home = write_dagster_home(tmp_path)
    env = pg_env(dagster_database)
    for name, value in {**env, "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(name, value)
    instance = dg.DagsterInstance.get()
    assert stored_pool_limit(instance, POOL) is None
    source = LOCATION.format(text=component_yaml(tmp_path / "icepack_home"))
    workspace = write_workspace(tmp_path, {"lake_a_location": (source, None)})
    daemon = DagsterDaemon(home, workspace, env, tmp_path / "daemon.log")
    try:
        daemon.start()
        wait_until(lambda: stored_pool_limit(instance, POOL) == CAP, "the pool limit stored at load",
                   timeout=180, detail=daemon.tail)
        assert _ticks(instance) == 0, "a sensor ticked: the limit must come from the load itself"
    finally:
        daemon.stop()

    instance.event_log_storage.set_concurrency_slots(POOL, 1)  # an operator's own limit, as the CLI stores it
    loaded = _load_logging(caplog, tmp_path / "icepack_home")  # the same instance (DAGSTER_HOME)
    assert stored_pool_limit(instance, POOL) == 1, "an operator's limit was changed"
    assert f"{POOL!r} allows 1 run(s) at once but max_maintenance_in_flight is {CAP}" in loaded
    assert {pool.name for pool in instance.event_log_storage.get_pool_limits()} == {POOL}


def _load_logging(caplog: pytest.LogCaptureFixture, home: Path) -> str:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="icepack_dagster.defs.maintenance_pool"):
        built = dg.build_defs_for_component(IcepackComponent.resolve_from_yaml(component_yaml(home)))
    dg.Definitions.validate_loadable(built)
    return caplog.text


def test_without_a_reachable_instance_the_definitions_load_and_a_line_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    icepack_home = tmp_path / "icepack_home"
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    unset = _load_logging(caplog, icepack_home)
    assert "DAGSTER_HOME unset" in unset and "python -m icepack_dagster.defs.maintenance_pool" in unset

    bare = tmp_path / "bare_home"
    bare.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(bare))
    assert f"no Dagster instance config at {bare / 'dagster.yaml'}" in _load_logging(caplog, icepack_home)
    assert list(bare.iterdir()) == [], "a local instance was made where none is configured"

    down = tmp_path / "down_home"
    down.mkdir()
    (down / "dagster.yaml").write_text(yaml.safe_dump(prod_instance_config()))
    for name, value in pg_env("icepack_nowhere", port=1).items():  # nothing listens on port 1
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(down))
    failed = _load_logging(caplog, icepack_home)
    assert f"the Dagster instance of DAGSTER_HOME={down} failed" in failed, failed
