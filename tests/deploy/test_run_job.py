"""Contract: the Kubernetes Job of a maintenance run, built by dagster-k8s exactly as its K8sRunLauncher
builds it, from our production Helm values (launcher config and the code location's container
context) and the run's tags (`maintenance_tags` + `sizing_tags`), is a valid batch/v1 Job whose pod
follows the sizing policy for small, medium and large tables.

Validated three ways: dagster-k8s's own model building, Kubernetes' strict JSON schema (1.30, through
kubernetes-validate), and a round trip through the Kubernetes client's deserializer into `V1Job`.
Secrets reach the pod only by reference (secretKeyRef, envFrom secretRef), never as literal values.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

import dagster as dg
import kubernetes
import kubernetes_validate
import pytest
from dagster._core.code_pointer import ModuleCodePointer
from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
from dagster._grpc.types import ExecuteRunArgs
from dagster_k8s import K8sRunLauncher
from dagster_k8s.job import construct_dagster_k8s_job, get_job_name_from_run_id

from icepack_dagster.defs.run_tags import maintenance_tags
from icepack_dagster.domain.run_sizing import (
    RunSize,
    SizingPolicy,
    read_spark_conf_tag,
    size_run,
    sizing_tags,
)
from tests.deploy import chart
from tests.deploy.testkit import GIB, status_of, write_kubeconfig

K8S_VERSION = "1.30"
SECRET_NAME = re.compile(r"(SECRET|PASSWORD|TOKEN|CREDENTIAL|STATE_URL)$")
VALUES = chart.load_values("values.yaml", "values-prod.yaml")
IMAGE = chart.image_name(chart.user_deployment(VALUES))


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[K8sRunLauncher]:
    """The K8sRunLauncher Dagster builds from the chart's run_launcher section (kubeconfig swapped in)."""
    kubeconfig = write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    run_launcher = chart.instance_config(VALUES)["run_launcher"]
    run_launcher["config"] |= {"load_incluster_config": False, "kubeconfig_file": str(kubeconfig)}
    with dg.instance_for_test(overrides={"run_launcher": run_launcher}) as instance:
        assert isinstance(instance.run_launcher, K8sRunLauncher)
        yield instance.run_launcher


def _job(launcher: K8sRunLauncher, tags: dict[str, str]) -> dict[str, Any]:
    """Mirrors K8sRunLauncher.launch_run up to the API call, and returns the Job as the API receives it."""
    origin = JobPythonOrigin("maintenance", RepositoryPythonOrigin(
        executable_path=sys.executable,
        code_pointer=ModuleCodePointer("icepack_dagster.definitions", "defs", None),
        container_image=IMAGE,
        container_context=chart.container_context(VALUES),
    ))
    run = dg.DagsterRun(job_name="maintenance", tags=tags, job_code_origin=origin)
    context = launcher.get_container_context_for_run(run)
    args = ExecuteRunArgs(job_origin=origin, run_id=run.run_id, instance_ref=None,
                          set_exit_code_on_failure=launcher.fail_pod_on_run_failure).get_command_args()
    name = get_job_name_from_run_id(run.run_id)
    job = construct_dagster_k8s_job(
        job_config=context.get_k8s_job_config(job_image=IMAGE, run_launcher=launcher),
        args=args, job_name=name, pod_name=name, component="run_worker",
        user_defined_k8s_config=context.run_k8s_config,
        labels={"dagster/job": "maintenance", "dagster/run-id": run.run_id},
        env_vars=[{"name": "DAGSTER_RUN_JOB_NAME", "value": "maintenance"}],
    )
    return kubernetes.client.ApiClient().sanitize_for_serialization(job)


class _Response:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body)


def _sized(live_bytes: int) -> tuple[RunSize, dict[str, str]]:
    size = size_run(status_of("lake.sales.orders", live_bytes), SizingPolicy(spark_image=IMAGE))
    return size, maintenance_tags("lake.sales.orders", 42) | sizing_tags(size)


@pytest.mark.parametrize("live_bytes", [GIB, 50 * GIB, 4096 * GIB], ids=["small", "medium", "large"])
def test_maintenance_job_is_valid_and_sized(launcher: K8sRunLauncher, live_bytes: int) -> None:
    size, tags = _sized(live_bytes)
    body = _job(launcher, tags)

    kubernetes_validate.validate(body, K8S_VERSION, strict=True)
    api = kubernetes.client.ApiClient()
    job = api.deserialize(_Response(body), "V1Job")
    assert isinstance(job, kubernetes.client.V1Job)
    assert api.sanitize_for_serialization(job) == body

    pod = body["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["image"] == IMAGE
    assert container["resources"] == {"requests": size.resources.requests, "limits": size.resources.limits}
    assert pod["metadata"]["labels"]["icepack/size"] == size.tier
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/tmp", "/var/lib/icepack"}
    env = {e["name"]: e for e in container["env"]}
    assert env["ICEPACK_HOME"]["value"] == "/var/lib/icepack"
    assert env["ICEPACK_STATE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "icepack-state", "key": "url"}
    assert env["DAGSTER_PG_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "icepack-dagster-postgresql"
    assert {"secretRef": {"name": "icepack-catalog-credentials"}} in container["envFrom"]
    literal = [name for name, e in env.items() if SECRET_NAME.search(name) and "value" in e]
    assert literal == [], f"secret-looking env vars with literal values: {literal}"
    assert read_spark_conf_tag(tags, size.table) == size.spark_conf

    if size.kubernetes_driver:
        assert pod["spec"]["serviceAccountName"] == "icepack-spark-driver"
        assert pod["spec"]["automountServiceAccountToken"] is True
        assert env["SPARK_LOCAL_HOSTNAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    else:
        assert pod["spec"]["serviceAccountName"] == "icepack-user-code"
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert "SPARK_LOCAL_HOSTNAME" not in env


def test_unsized_run_gets_the_defaults(launcher: K8sRunLauncher) -> None:
    body = _job(launcher, {"icepack/kind": "observation"})
    kubernetes_validate.validate(body, K8S_VERSION, strict=True)
    container = body["spec"]["template"]["spec"]["containers"][0]
    defaults = VALUES["runLauncher"]["config"]["k8sRunLauncher"]["resources"]
    code_location = chart.user_deployment(VALUES)["resources"]
    # dagster-k8s deep-merges the code location's container context over the launcher's defaults.
    assert container["resources"] == chart.helm_merge(defaults, code_location)
    assert container["resources"]["limits"]["cpu"] == defaults["limits"]["cpu"]


def test_a_typo_in_the_sizing_tag_is_refused_by_dagster_k8s(launcher: K8sRunLauncher) -> None:
    _, tags = _sized(GIB)
    tags["dagster-k8s/config"] = json.dumps({"container_config": {"resourcez": {}}})
    with pytest.raises(Exception, match="resourcez"):
        _job(launcher, tags)


def test_schema_rejects_an_invalid_job(launcher: K8sRunLauncher) -> None:
    body = _job(launcher, _sized(GIB)[1])
    body["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = ["6Gi"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(body, K8S_VERSION, strict=True)
