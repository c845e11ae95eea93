"""Contract: the Dagster instance our deployments configure is one Dagster itself accepts and builds.

dagster.yaml as the official chart renders it from our Helm values (its instance ConfigMap) and
deploy/dagster/dagster.prod.yaml both load through `DagsterInstance.from_config` against a real
PostgreSQL: PostgreSQL storage, the queued run coordinator with icepack's limits, run monitoring,
run retries, and for Helm the K8sRunLauncher built by dagster-k8s. Nothing in them reaches another
team's runs: every tag limit is on a tag only icepack's runs carry (Dagster's own tag-limit counter
never holds a run without them: two one-partition runs for one key run together), and no pool has a
default limit (the maintenance pool's limit is stored for that pool alone, tests/deploy/
test_maintenance_pool_hook.py); observation runs are never blocked by maintenance.
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
        _only_icepacks_limits(instance)
    finally:
        instance.dispose()


def _only_icepacks_limits(instance: dg.DagsterInstance) -> None:
    """Tag limits only on icepack's own tags, and no default limit for every pool."""
    queue = instance.get_concurrency_config().run_queue_config
    assert queue is not None
    keys = {limit["key"] for limit in queue.tag_concurrency_limits}
    assert keys and all(key.startswith("icepack/") for key in keys), f"a limit on others' tags: {keys}"
    pools = instance.get_concurrency_config().pool_config
    assert pools.pool_granularity is PoolGranularity.RUN
    assert pools.default_pool_limit is None, "a default limit would cap every other team's pools"


def _run(tags: dict[str, str]) -> dg.DagsterRun:
    return dg.DagsterRun(job_name="maintenance", tags=tags)


def _manual(table: str) -> dg.DagsterRun:
    """A run as Materialize, the launchpad or a backfill creates it: only Dagster's own tags."""
    return dg.DagsterRun(job_name="__ASSET_JOB", tags={PARTITION_TAG: table})


@pytest.mark.parametrize("overlay", ["values-dev.yaml", "values-prod.yaml"])
def test_tag_limits_hold_no_run_without_icepacks_tags(overlay: str) -> None:
    config = helm_chart.render("values.yaml", overlay).instance_config()
    limits = config["concurrency"]["runs"]["tag_concurrency_limits"]
    counter = TagConcurrencyLimitsCounter(limits, [_manual("2026-11-25"), _manual("2026-11-25")])
    assert not counter.is_blocked(_manual("2026-11-25")), "another team's runs of one partition must not wait"
    busy = [_run(observation_tags()) for _ in range(10)]
    counter = TagConcurrencyLimitsCounter(limits, busy)
    assert not counter.is_blocked(_manual("2026-11-25")), "icepack's observation runs hold other runs"
    assert not counter.is_blocked(_run(maintenance_tags("lake.sales.t0"))), (
        "maintenance must not wait behind observation"
    )
    assert counter.is_blocked(_run(observation_tags())), "the observation limit holds icepack's runs"


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
        _only_icepacks_limits(instance)
        instance.add_run(_run(maintenance_tags("lake.sales.orders")))
        assert len(instance.get_runs()) == 1, "run storage must be the PostgreSQL database"
    finally:
        instance.dispose()
