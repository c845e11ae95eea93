"""Contract: the Dagster instance our deployments configure is one Dagster itself accepts and builds.

dagster.yaml as the official chart renders it from our Helm values (its instance ConfigMap) and
deploy/dagster/dagster.prod.yaml both load through `DagsterInstance.from_config` against a real
PostgreSQL: PostgreSQL storage, the queued run coordinator with icepack's limits, run monitoring,
run retries, and for Helm the K8sRunLauncher built by dagster-k8s. The limits behave as intended under
Dagster's own tag-limit counter: one run per table (the `dagster/partition` tag every one-partition run
carries), observation runs never blocked by maintenance; the global maintenance cap is the
`icepack_maintenance` pool at run granularity, equal to the sensor's in-flight cap.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster._core.instance.config import PoolGranularity  # what the instance read from `pools`
from dagster._utils.tags import TagConcurrencyLimitsCounter  # Dagster's own dequeue-time counter
from dagster_k8s import K8sRunLauncher

from icepack_dagster.defs.run_tags import PARTITION_TAG, maintenance_tags, observation_tags
from tests.conftest import PG_HOST, PG_PORT, PG_USER
from tests.deploy import helm_chart
from tests.deploy.testkit import point_at_test_database, write_kubeconfig

PROD_YAML = helm_chart.REPO / "deploy" / "dagster" / "dagster.prod.yaml"


def _instance_from(config: dict[str, Any], directory: Path) -> dg.DagsterInstance:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "dagster.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return dg.DagsterInstance.from_config(str(directory))


@pytest.mark.postgres
@pytest.mark.parametrize("overlay", ["values-dev.yaml", "values-prod.yaml"])
def test_helm_instance_builds_with_dagster(
    overlay: str, dagster_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", "")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig")
    values = point_at_test_database(helm_chart.load_values("values.yaml", overlay), dagster_database,
                                     kubeconfig)
    rendered = helm_chart.render_values(values)
    instance = _instance_from(rendered.instance_config(), tmp_path / "home")
    try:
        launcher = instance.run_launcher
        assert isinstance(launcher, K8sRunLauncher)
        assert launcher.job_namespace == helm_chart.NAMESPACE
        assert launcher.service_account_name == "icepack-dagster"
        assert launcher.fail_pod_on_run_failure is True
        assert launcher.security_context["runAsNonRoot"] is True
        assert instance.run_monitoring_enabled and instance.run_retries_enabled
        assert instance.get_runs() == [], "run storage must be the test's PostgreSQL database"
        queue = instance.get_concurrency_config().run_queue_config
        assert queue is not None
        limits = {(lim["key"], str(lim.get("value"))): lim["limit"] for lim in queue.tag_concurrency_limits}
        assert limits[(PARTITION_TAG, "{'applyLimitPerUniqueValue': True}")] == 1
        pools = instance.get_concurrency_config().pool_config
        assert pools.pool_granularity is PoolGranularity.RUN
        cap = pools.default_pool_limit
        env = {e["name"]: e.get("value") for e in rendered.container_context()["k8s"]["env"]}
        assert cap == int(env["ICEPACK_PLATFORM_MAX_MAINTENANCE_IN_FLIGHT"]), (
            f"{overlay}: the coordinator's maintenance limit and the sensor's in-flight cap must agree"
        )
    finally:
        instance.dispose()


def _run(tags: dict[str, str]) -> dg.DagsterRun:
    return dg.DagsterRun(job_name="maintenance", tags=tags)


def _manual(table: str) -> dg.DagsterRun:
    """A run as Materialize, the launchpad or a backfill creates it: only Dagster's own tags."""
    return dg.DagsterRun(job_name="__ASSET_JOB", tags={PARTITION_TAG: table})


@pytest.mark.parametrize("overlay", ["values-dev.yaml", "values-prod.yaml"])
def test_tag_limits_serialize_runs_of_one_table_whoever_launched_them(overlay: str) -> None:
    config = helm_chart.render("values.yaml", overlay).instance_config()
    limits = config["concurrency"]["runs"]["tag_concurrency_limits"]
    sensor_run = _run({**maintenance_tags("lake.sales.t0"), PARTITION_TAG: "lake.sales.t0"})
    counter = TagConcurrencyLimitsCounter(limits, [sensor_run])
    assert counter.is_blocked(_manual("lake.sales.t0")), "a second run for one table must wait"
    assert not counter.is_blocked(_manual("lake.sales.other"))
    counter = TagConcurrencyLimitsCounter(limits, [_manual("lake.sales.t1")])
    assert counter.is_blocked(_run({**maintenance_tags("lake.sales.t1"), PARTITION_TAG: "lake.sales.t1"}))
    assert not counter.is_blocked(_run(observation_tags())), "observation must not wait behind maintenance"


@pytest.mark.postgres
def test_production_dagster_yaml_builds_with_dagster(
    dagster_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"DAGSTER_PG_HOST": PG_HOST, "DAGSTER_PG_PORT": str(PG_PORT), "DAGSTER_PG_USER": PG_USER,
           "DAGSTER_PG_PASSWORD": "", "DAGSTER_PG_DB": dagster_database}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(PROD_YAML, home / "dagster.yaml")
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.run_monitoring_enabled and instance.run_retries_enabled
        queue = instance.get_concurrency_config().run_queue_config
        assert queue is not None
        per_table = [limit for limit in queue.tag_concurrency_limits if limit["key"] == PARTITION_TAG]
        per_unique = {"applyLimitPerUniqueValue": True}
        assert per_table == [{"key": PARTITION_TAG, "value": per_unique, "limit": 1}]
        pools = instance.get_concurrency_config().pool_config
        assert pools.pool_granularity is PoolGranularity.RUN and pools.default_pool_limit == 8
        instance.add_run(_run(maintenance_tags("lake.sales.orders")))
        assert len(instance.get_runs()) == 1, "run storage must be the PostgreSQL database"
    finally:
        instance.dispose()
