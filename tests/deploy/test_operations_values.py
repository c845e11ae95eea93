"""Contract: the production release keeps what operations need, as the official chart renders it from
deploy/helm/values.yaml + values-prod.yaml: tick retention the daemon applies, run logs kept in S3 after
the run pod is gone (Dagster's S3ComputeLogManager, its bucket an environment reference every pod that
reads the instance receives from a Secret), and the migration of Dagster's storage as a Helm hook Job
that runs after the install and before every upgrade, as the chart's own Job would but ahead of the new
pods and with nothing to delete by hand (then, in the same Job, the maintenance pool's limit). The
rendered dagster.yaml builds in Dagster, and its compute log manager, pointed at moto's S3, reads back a
captured log from a fresh manager with an empty local directory (the pod that wrote it is gone)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import boto3
import dagster as dg
import pytest
import yaml
from dagster_aws.s3.compute_log_manager import S3ComputeLogManager

from tests.config.catalogs.servers import moto_server
from tests.deploy import helm_chart

PROD = ("values.yaml", "values-prod.yaml")
LOG_SECRET = "icepack-compute-logs"


@pytest.fixture(scope="module")
def rendered() -> helm_chart.Rendered:
    return helm_chart.render(*PROD)


def test_the_daemon_purges_old_ticks(rendered: helm_chart.Rendered) -> None:
    retention = rendered.instance_config()["retention"]
    assert retention["schedule"] == {"purge_after_days": 30}
    by_status = {"failure": 30, "skipped": 7, "started": 30, "success": 30}
    for kind in ("sensor", "auto_materialize"):
        assert retention[kind] == {"purge_after_days": by_status}


def test_run_logs_go_to_s3_named_by_an_environment_reference(rendered: helm_chart.Rendered) -> None:
    logs = rendered.instance_config()["compute_logs"]
    assert (logs["module"], logs["class"]) == ("dagster_aws.s3.compute_log_manager", "S3ComputeLogManager")
    assert logs["config"]["bucket"] == {"env": "DAGSTER_COMPUTE_LOG_BUCKET"}
    pods = rendered.pod_templates()
    for name in ("icepack-dagster-webserver", "icepack-dagster-daemon",
                 "icepack-dagster-user-deployments-icepack"):
        secrets = [e["secretRef"]["name"] for c in pods[name]["spec"]["containers"]
                   for e in c.get("envFrom", []) if "secretRef" in e]
        assert LOG_SECRET in secrets, f"{name} reads the instance but not {LOG_SECRET}"
    assert LOG_SECRET in rendered.container_context()["k8s"]["env_secrets"], "run pods upload the logs"


def _env_sources(container: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(container.get("envFrom", []), key=repr)


def test_upgrades_migrate_dagsters_storage_in_a_hook_before_the_new_pods(
    rendered: helm_chart.Rendered,
) -> None:
    assert not [job for job in rendered.of_kind("Job") if job["metadata"]["name"].endswith(
        "webserver-instance-migrate")], "the chart's own Job would need deleting before each upgrade"
    job = rendered.get("Job", "icepack-dagster-instance-migrate")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"].split(",") == ["post-install", "pre-upgrade"]
    assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation"
    pod = job["spec"]["template"]["spec"]
    (migrate,) = pod["initContainers"]
    (pool_limit,) = pod["containers"]  # runs once the migration exited 0 (test_maintenance_pool_hook.py)
    assert (migrate["command"], migrate["args"]) == (["dagster"], ["instance", "migrate"])
    webserver_pod = rendered.pod_templates()["icepack-dagster-webserver"]["spec"]
    webserver = webserver_pod["containers"][0]
    password = next(e for e in webserver["env"] if e["name"] == "DAGSTER_PG_PASSWORD")
    (volume,) = pod["volumes"]
    for container in (migrate, pool_limit):
        assert container["image"] == webserver["image"]
        assert container["image"] == rendered.image(), "migrate with the Dagster the icepack image pins"
        assert _env_sources(container) == _env_sources(webserver), "it reads the instance as the webserver"
        assert container["env"] == [password]
        assert container["securityContext"] == webserver["securityContext"]
        (mount,) = container["volumeMounts"]
        assert mount["mountPath"] == "/opt/dagster/dagster_home/dagster.yaml"
        assert mount["name"] == volume["name"]
        for source in container["envFrom"]:
            if "configMapRef" in source:
                rendered.get("ConfigMap", source["configMapRef"]["name"])
    assert pod["securityContext"] == webserver_pod["securityContext"]
    assert pod["serviceAccountName"] == webserver_pod["serviceAccountName"]
    assert pod["automountServiceAccountToken"] is False, "the hook's commands call no Kubernetes API"
    assert rendered.get("ConfigMap", volume["configMap"]["name"]) is rendered.get(
        "ConfigMap", "icepack-dagster-instance"), "it migrates the release's own instance"


def _point_at(config: dict[str, Any], endpoint: str, local_dir: Path) -> dict[str, Any]:
    """What a test changes: the S3 endpoint (moto's) and a local directory of the pod's own (the
    default, the system temp directory, would be shared by both "pods" of this one process)."""
    logs = config["compute_logs"]
    return {"compute_logs": {**logs, "config": {**logs["config"], "endpoint_url": endpoint,
                                                 "local_dir": str(local_dir)}}}


def test_a_run_log_is_read_back_after_the_pod_that_wrote_it_is_gone(
    rendered: helm_chart.Rendered, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "moto").mkdir()
    with moto_server(tmp_path / "moto", days_behind=0) as endpoint:
        environment = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                       "AWS_DEFAULT_REGION": "us-east-1", "DAGSTER_COMPUTE_LOG_BUCKET": "run-logs"}
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="run-logs")
        key = ["run-1", "compute_logs", "step"]

        def manager(pod: str) -> S3ComputeLogManager:
            home = tmp_path / pod
            home.mkdir()
            config = _point_at(copy.deepcopy(rendered.instance_config()), endpoint, home / "logs")
            (home / "dagster.yaml").write_text(yaml.safe_dump(config))
            instance = dg.DagsterInstance.from_config(str(home))
            built = instance.compute_log_manager
            assert isinstance(built, S3ComputeLogManager)
            return built

        with manager("run-pod").capture_logs(key):
            print("compacted 12 files into 1", flush=True)
        stored = boto3.client("s3", endpoint_url=endpoint).list_objects_v2(Bucket="run-logs")["Contents"]
        keys = {stored_object["Key"] for stored_object in stored}
        assert "dagster/compute-logs/storage/run-1/compute_logs/step.out" in keys, keys
        read = manager("webserver").get_log_data(key)
        assert read.stdout is not None and b"compacted 12 files into 1" in read.stdout
