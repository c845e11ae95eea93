"""Contract: the Kubernetes Job of a maintenance run, built by dagster-k8s exactly as its K8sRunLauncher
builds it, from the production release as the official chart renders it (the run launcher section of
the instance ConfigMap's dagster.yaml, and the container context the code server Deployment hands its
runs) and the run's tags (`maintenance_tags` + `sizing_tags`), is a valid batch/v1 Job whose pod follows
the sizing policy for small, medium and large tables. Only the large tier's driver mounts a service
account token; runs without a sizing tag inherit the chart's token of the API-less code account.

Validated three ways: dagster-k8s's own model building, Kubernetes' strict JSON schema (1.30, through
kubernetes-validate), and a round trip through the Kubernetes client's deserializer into `V1Job`.
Secrets reach the pod only by reference (secretKeyRef, envFrom secretRef), never as literal values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import kubernetes
import kubernetes_validate
import pytest
import yaml
from dagster_k8s import K8sRunLauncher

from icepack_dagster.defs.run_tags import observation_tags
from icepack_dagster.domain.sizing.run_sizing import read_spark_conf_tag
from tests.deploy import helm_chart
from tests.deploy.run_job import IMAGE, RELEASE, rendered_launcher, run_job, sized
from tests.deploy.testkit import GIB, selects

K8S_VERSION = "1.30"
SECRET_NAME = re.compile(r"(SECRET|PASSWORD|TOKEN|CREDENTIAL|STATE_URL)$")


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[K8sRunLauncher]:
    with rendered_launcher(tmp_path_factory.mktemp("kube")) as run_launcher:
        yield run_launcher


def _network_policy(name: str) -> dict[str, Any]:
    path = helm_chart.REPO / "deploy" / "k8s" / "networkpolicies.yaml"
    return next(doc for doc in yaml.safe_load_all(path.read_text()) if doc["metadata"]["name"] == name)


class _Response:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body)


@pytest.mark.parametrize("live_bytes", [GIB, 50 * GIB, 4096 * GIB], ids=["small", "medium", "large"])
def test_maintenance_job_is_valid_andsized(launcher: K8sRunLauncher, live_bytes: int) -> None:
    size, tags = sized(live_bytes)
    body = run_job(launcher, tags)

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
    # The NetworkPolicies that admit Dagster's pods to the code server (and, in dev, PostgreSQL) admit it.
    for policy in ("icepack-code-server-grpc", "icepack-dev-postgresql"):
        source = _network_policy(policy)["spec"]["ingress"][0]["from"][0]["podSelector"]
        assert selects(source, pod["metadata"]["labels"]), policy

    if size.kubernetes_driver:
        assert pod["spec"]["serviceAccountName"] == "icepack-spark-driver"
        assert pod["spec"]["automountServiceAccountToken"] is True
        assert env["SPARK_LOCAL_HOSTNAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    else:
        assert pod["spec"]["serviceAccountName"] == "icepack-user-code"
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert "SPARK_LOCAL_HOSTNAME" not in env


def test_an_unsized_run_gets_the_defaults_and_observation_runs_no_token(launcher: K8sRunLauncher) -> None:
    body = run_job(launcher, {"icepack/kind": "observation"})
    kubernetes_validate.validate(body, K8S_VERSION, strict=True)
    pod = body["spec"]["template"]["spec"]
    container = pod["containers"][0]
    defaults = RELEASE.instance_config()["run_launcher"]["config"]["resources"]
    code_location = RELEASE.container_context()["k8s"]["resources"]
    # dagster-k8s deep-merges the code location's container context over the launcher's defaults.
    assert container["resources"]["requests"] == code_location["requests"]
    assert container["resources"]["limits"] == defaults["limits"] | code_location["limits"]
    # The chart's container context turns the token on for every run of the code location; the account
    # is bound to no Role (test_k8s_manifests), so the token grants no API rights (docs/SECURITY.md).
    assert pod["serviceAccountName"] == "icepack-user-code"
    assert pod["automountServiceAccountToken"] is True
    # Status, health and fleet runs carry icepack's observation tags, which turn the token off.
    observation_job = run_job(launcher, observation_tags())
    kubernetes_validate.validate(observation_job, K8S_VERSION, strict=True)
    observation = observation_job["spec"]["template"]["spec"]
    assert observation["serviceAccountName"] == "icepack-user-code"
    assert observation["automountServiceAccountToken"] is False


def test_a_typo_in_the_sizing_tag_is_refused_by_dagster_k8s(launcher: K8sRunLauncher) -> None:
    _, tags = sized(GIB)
    tags["dagster-k8s/config"] = json.dumps({"container_config": {"resourcez": {}}})
    with pytest.raises(Exception, match="resourcez"):
        run_job(launcher, tags)


def test_schema_rejects_an_invalidrun_job(launcher: K8sRunLauncher) -> None:
    body = run_job(launcher, sized(GIB)[1])
    body["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = ["6Gi"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(body, K8S_VERSION, strict=True)
