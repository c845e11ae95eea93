"""Contract: a production Helm install sets the `icepack_maintenance` pool's limit itself, so no
operator step stands between the install and the first maintenance held by the cap.

icepack asks for no instance-wide `pools.default_limit` (it would cap every other team's pools), and a
pool without a stored limit is not limited, so the limit has to be in storage, for that pool alone,
before any run is queued. The storage migration hook Job (`values-prod.yaml`,
`post-install,pre-upgrade`) therefore runs, after `dagster instance migrate` (an init container: the
limit step starts only once the migration exited 0), `dagster instance concurrency set
icepack_maintenance N`, where N is the one value (a YAML anchor) the code location's
`ICEPACK_PLATFORM_MAX_MAINTENANCE_IN_FLIGHT` also takes. The steps the chart renders run, as rendered,
against a real PostgreSQL-backed instance built from the rendered dagster.yaml: at install, again
unchanged at an upgrade (idempotent), and with a changed limit at a later upgrade; Dagster's storage
reads back the limit each time, and no other pool gets one.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from icepack_dagster.defs.run_tags import MAINTENANCE_POOL
from tests.deploy import helm_chart
from tests.deploy.testkit import point_at_test_database, write_kubeconfig

PROD = ("values.yaml", "values-prod.yaml")
HOOK_JOB = "icepack-dagster-instance-migrate"
CAP_VARIABLE = "ICEPACK_PLATFORM_MAX_MAINTENANCE_IN_FLIGHT"


def _with_cap(values: dict[str, Any], cap: int) -> dict[str, Any]:
    """`values` (copied) with the maintenance cap changed where the anchor put it: the hook's last
    argument and the code location's ICEPACK_PLATFORM_MAX_MAINTENANCE_IN_FLIGHT."""
    values = copy.deepcopy(values)
    (hook,) = values["extraManifests"]
    hook["spec"]["template"]["spec"]["containers"][0]["args"][-1] = str(cap)
    for deployment in values["dagster-user-deployments"]["deployments"]:
        for variable in deployment["env"]:
            if variable["name"] == CAP_VARIABLE:
                variable["value"] = str(cap)
    return values


def _hook_steps(rendered: helm_chart.Rendered) -> list[dict[str, Any]]:
    """The hook Job's containers in the order Kubernetes runs them: init containers, then the main one."""
    pod = rendered.get("Job", HOOK_JOB)["spec"]["template"]["spec"]
    return [*pod.get("initContainers", []), *pod["containers"]]


def _commands(rendered: helm_chart.Rendered) -> list[list[str]]:
    return [[*step["command"], *step["args"]] for step in _hook_steps(rendered)]


def _pool_limit_command(limit: int) -> list[str]:
    return ["dagster", "instance", "concurrency", "set", MAINTENANCE_POOL, str(limit)]


def test_the_hook_migrates_then_sets_the_pool_limit_the_sensor_uses() -> None:
    rendered = helm_chart.render(*PROD)
    env = {e["name"]: e.get("value") for e in rendered.container_context()["k8s"]["env"]}
    cap = int(env[CAP_VARIABLE])
    assert _commands(rendered) == [["dagster", "instance", "migrate"], _pool_limit_command(cap)], (
        "the pool's limit and the sensor's in-flight cap must agree"
    )
    (migrate,) = rendered.get("Job", HOOK_JOB)["spec"]["template"]["spec"]["initContainers"]
    assert migrate["name"] == "dagster-instance-migrate", "the migration runs first, as an init container"
    assert "default_limit" not in rendered.instance_config()["concurrency"]["pools"]


def _pod_environment(rendered: helm_chart.Rendered, step: dict[str, Any], home: Path) -> dict[str, str]:
    """What Kubernetes gives the step's container, here: its ConfigMap environment with DAGSTER_HOME at
    the test's instance directory, stand-ins for the Secrets (the test database has no password), and
    this virtualenv's `dagster` first on PATH."""
    env = {**os.environ}
    for source in step["envFrom"]:
        if "configMapRef" in source:
            env |= rendered.get("ConfigMap", source["configMapRef"]["name"])["data"]
    secrets = {"DAGSTER_PG_PASSWORD": "", "DAGSTER_COMPUTE_LOG_BUCKET": "run-logs",
               "AWS_DEFAULT_REGION": "eu-west-1"}
    assert {e["name"] for e in step["env"]} <= secrets.keys()
    return env | secrets | {"DAGSTER_HOME": str(home),
                            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}


def _run_hook(values: dict[str, Any], home: Path) -> None:
    """One install or upgrade: the instance ConfigMap mounted at DAGSTER_HOME, then the hook's steps as
    rendered, each only after the one before succeeded."""
    rendered = helm_chart.render_values(values)
    (home / "dagster.yaml").write_text(yaml.safe_dump(rendered.instance_config(), sort_keys=False))
    for step in _hook_steps(rendered):
        command = [*step["command"], *step["args"]]
        done = subprocess.run(command, env=_pod_environment(rendered, step, home), capture_output=True,
                              text=True, timeout=180, check=False)
        assert done.returncode == 0, f"{step['name']}: {command} failed\n{done.stdout}\n{done.stderr}"


def _stored_pool_limit(home: Path) -> tuple[int | None, list[tuple[str, int, bool]]]:
    """The pool's slot count and every pool limit, as Dagster's storage reports them."""
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        storage = instance.event_log_storage
        info = storage.get_concurrency_info(MAINTENANCE_POOL)
        limits = [(pool.name, pool.limit, pool.from_default) for pool in storage.get_pool_limits()]
        return info.slot_count, limits
    finally:
        instance.dispose()


@pytest.mark.postgres
def test_the_rendered_hook_sets_the_limit_on_a_real_instance_at_install_and_every_upgrade(
    dagster_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", "")  # for reading the limit back in this process
    home = tmp_path / "dagster_home"
    home.mkdir()
    values = point_at_test_database(helm_chart.load_values(*PROD), dagster_database,
                                    write_kubeconfig(tmp_path / "kubeconfig"))
    install = int(next(e["value"] for e in values["dagster-user-deployments"]["deployments"][0]["env"]
                       if e["name"] == CAP_VARIABLE))
    _run_hook(values, home)
    assert _stored_pool_limit(home) == (install, [(MAINTENANCE_POOL, install, False)])
    _run_hook(values, home)  # an upgrade that changes nothing: migrate and set again
    assert _stored_pool_limit(home) == (install, [(MAINTENANCE_POOL, install, False)])
    _run_hook(_with_cap(values, 4), home)  # an upgrade that lowers the cap
    assert _stored_pool_limit(home) == (4, [(MAINTENANCE_POOL, 4, False)])
