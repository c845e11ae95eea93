"""Contract: the production release, installed as docs/KUBERNETES.md installs it, is accepted by a real
API server in a namespace enforcing the Pod Security level docs/SECURITY.md claims.

deploy/k8s/rbac.yaml and networkpolicies.yaml, the official chart 1.10.4 rendered by Helm's SDK with
values.yaml + values-prod.yaml (its post-install hook last) and deploy/k8s/metrics.yaml go through
server-side apply; every object is stored. The real controllers then create every workload's pods, so
Pod Security admission judges the pods themselves (not only their templates), and the ServiceAccount
admission decides which pods get a token. The storage-migration hook is the Job the docs describe: its
pod migrates, then sets the maintenance pool's limit, as `icepack-dagster` without a token. kwok stands
in for the kubelet: containers never run, their phases are kwok's.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from tests.kubernetes import cluster
from tests.kubernetes.cluster import RELEASE_NAMESPACE
from tests.kubernetes.control_plane import ControlPlane

pytestmark = pytest.mark.kubernetes_api

COMPLETE_LABEL = "pod-complete.stage.kwok.x-k8s.io"
# Which account each workload runs as, and whether its pods hold that account's token
# (docs/SECURITY.md, "Least privilege in the cluster").
ACCOUNTS = {
    "icepack-dagster-webserver": ("icepack-dagster", True),
    "icepack-dagster-webserver-read-only": ("icepack-dagster", True),
    "icepack-dagster-daemon": ("icepack-dagster", True),
    "icepack-dagster-user-deployments-icepack": ("icepack-user-code", True),
    "icepack-metrics": ("icepack-user-code", False),
    "icepack-dagster-instance-migrate": ("icepack-dagster", False),
}


def _owned_pods(admin: kubernetes.client.ApiClient,
                workload: dict[str, Any]) -> list[kubernetes.client.V1Pod]:
    """The pods the controllers made for `workload` (a Job's own, a Deployment's through its
    ReplicaSets), found by owner references rather than labels."""
    kind, name = workload["kind"], workload["metadata"]["name"]
    owners = {name}
    if kind == "Deployment":
        sets = kubernetes.client.AppsV1Api(admin).list_namespaced_replica_set(RELEASE_NAMESPACE).items
        owners = {rs.metadata.name for rs in sets
                  if any(o.kind == kind and o.name == name for o in rs.metadata.owner_references or [])}
        kind = "ReplicaSet"
    pods = kubernetes.client.CoreV1Api(admin).list_namespaced_pod(RELEASE_NAMESPACE).items
    return [pod for pod in pods
            if any(o.kind == kind and o.name in owners for o in pod.metadata.owner_references or [])]


def _running_pods(plane: ControlPlane, admin: kubernetes.client.ApiClient,
                  workload: dict[str, Any]) -> list[kubernetes.client.V1Pod]:
    """The workload's pods once the controllers created them and kwok runs them; on a timeout, the
    warnings of the namespace (a Pod Security refusal is a ReplicaSet's or Job's warning event)."""

    def running() -> list[kubernetes.client.V1Pod]:
        pods = _owned_pods(admin, workload)
        return pods if pods and all(p.status.phase == "Running" for p in pods) else []

    try:
        return list(plane.wait(f"pods of {workload['metadata']['name']} Running", running, timeout=90))
    except TimeoutError:
        events = kubernetes.client.CoreV1Api(admin).list_namespaced_event(RELEASE_NAMESPACE).items
        warnings = [f"{e.involved_object.name}: {e.message}" for e in events if e.type == "Warning"]
        pytest.fail(f"{workload['kind']} {workload['metadata']['name']} has no running pods; "
                    f"warnings in the namespace: {warnings}")


def test_every_object_of_the_release_is_stored(release: cluster.Release) -> None:
    assert release.refused == {}
    sent = {(doc["kind"], doc["metadata"]["name"]) for doc in release.sent}
    assert sent == set(release.stored)
    kinds = {kind for kind, _ in sent}
    assert {"Deployment", "Job", "Role", "RoleBinding", "ServiceAccount", "NetworkPolicy", "ConfigMap",
            "Service"} <= kinds


def test_the_namespace_enforces_the_documented_level(
    release: cluster.Release, admin: kubernetes.client.ApiClient
) -> None:
    """The level is really enforced: a pod breaking it is refused by admission, naming the rule."""
    level = cluster.pod_security_level()
    assert level == "restricted"
    namespace = kubernetes.client.CoreV1Api(admin).read_namespace(RELEASE_NAMESPACE)
    assert namespace.metadata.labels["pod-security.kubernetes.io/enforce"] == level
    root = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "runs-as-root"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    with pytest.raises(ApiException) as refused:
        kubernetes.client.CoreV1Api(admin).create_namespaced_pod(RELEASE_NAMESPACE, root)
    assert refused.value.status == 403
    assert f'violates PodSecurity "{level}:latest"' in json.loads(refused.value.body)["message"]


@pytest.mark.parametrize("name", sorted(ACCOUNTS))
def test_each_workloads_pods_are_admitted_as_their_documented_account(
    name: str, release: cluster.Release, plane: ControlPlane, admin: kubernetes.client.ApiClient
) -> None:
    workload = next(doc for doc in release.workloads() if doc["metadata"]["name"] == name)
    account, holds_token = ACCOUNTS[name]
    for pod in _running_pods(plane, admin, workload):
        assert pod.spec.service_account_name == account
        token_volumes = [v.name for v in pod.spec.volumes or [] if v.name.startswith("kube-api-access-")]
        assert bool(token_volumes) is holds_token, f"{pod.metadata.name}: token volumes {token_volumes}"
        assert pod.spec.node_name, "scheduled by the scheduler"


def test_every_workload_is_in_the_account_table(release: cluster.Release) -> None:
    assert {doc["metadata"]["name"] for doc in release.workloads()} == set(ACCOUNTS)


def test_the_storage_migration_hook_is_the_documented_job(
    release: cluster.Release, plane: ControlPlane, admin: kubernetes.client.ApiClient
) -> None:
    """docs/KUBERNETES.md, "The maintenance pool's limit": a post-install,pre-upgrade hook Job whose init
    container migrates Dagster's storage and whose container then stores the pool's limit."""
    [hook] = release.hooks()
    name = hook["metadata"]["name"]
    assert name == "icepack-dagster-instance-migrate"
    assert hook["metadata"]["annotations"][cluster.HOOK_ANNOTATION] == "post-install,pre-upgrade"
    [pod] = _running_pods(plane, admin, hook)
    [migrate] = pod.spec.init_containers
    [pool] = pod.spec.containers
    assert migrate.command + migrate.args == ["dagster", "instance", "migrate"]
    # The limit the maintenance sensor keeps to (docs/DAGSTER.md): the code location's in-flight cap.
    code_server = release.stored[("Deployment", "icepack-dagster-user-deployments-icepack")]
    env = {e["name"]: e.get("value") for e in code_server["spec"]["template"]["spec"]["containers"][0]["env"]}
    limit = env["ICEPACK_PLATFORM_MAX_MAINTENANCE_IN_FLIGHT"]
    assert pool.command + pool.args == ["dagster", "instance", "concurrency", "set", "icepack_maintenance",
                                        str(limit)]
    # The container exits 0 (kwok, told so): the Job is complete, as Helm waits for of a hook.
    kubernetes.client.CoreV1Api(admin).patch_namespaced_pod(
        pod.metadata.name, RELEASE_NAMESPACE, {"metadata": {"labels": {COMPLETE_LABEL: "true"}}})
    jobs = kubernetes.client.BatchV1Api(admin)

    def complete() -> bool:
        conditions = jobs.read_namespaced_job(name, RELEASE_NAMESPACE).status.conditions or []
        return any(c.type == "Complete" and c.status == "True" for c in conditions)

    plane.wait(f"Job {name} Complete", complete, timeout=60)
