"""Contract: a large-tier maintenance run's Spark 3.5 driver, in client mode in its run pod and holding
only the token of `icepack-spark-driver`, creates its executor pods through the API server from the
image's executor pod template, and they are deleted when its session stops.

The run is launched by the real K8sRunLauncher (tests/kubernetes/dagster_runs.py); its pod, created by
the job controller and run by kwok, is the driver pod. The driver is pyspark in a process of its own with
the run's `icepack/spark-conf` settings and the environment the pod's downward API gives it (name,
namespace, run id, pod IP from the API server's pod object), and a token bound to that pod from the
TokenRequest API, which is what the kubelet mounts. What differs from the pod itself: the API server's
address (loopback instead of kubernetes.default.svc), where the token and CA files are, the template
read from the checkout instead of the image, a smaller driver heap, the driver binding to loopback, and
no waiting for executors to register at start (kwok runs no container, so no executor ever registers).

Checked on the API objects Spark created: as many executor pods as the tier asks for, admitted under the
namespace's Pod Security level, owned by the driver pod, running the image's executor command as
`icepack-user-code` with no token, secrets only by reference; all deleted when the session stops.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import kubernetes
import pytest

from icepack_dagster.domain.sizing.run_sizing import SizingPolicy, read_spark_conf_tag
from tests import processes
from tests.deploy import helm_chart
from tests.deploy.run_job import IMAGE, RELEASE, sized
from tests.deploy.testkit import GIB
from tests.kubernetes import cluster
from tests.kubernetes.cluster import RELEASE_NAMESPACE
from tests.kubernetes.control_plane import ControlPlane
from tests.kubernetes.dagster_runs import Dagster, run_pod

pytestmark = [pytest.mark.kubernetes_api, pytest.mark.postgres, pytest.mark.jvm_servers]

DRIVER_ACCOUNT = "icepack-spark-driver"
TEMPLATE = helm_chart.REPO / "deploy" / "docker" / "spark-executor-pod-template.yaml"
SECRET = RELEASE.container_context()["k8s"]["env_secrets"][0]
SECRET_REFS = {key: f"{SECRET}:{key}" for key in
               ("ICEPACK_CATALOGS__LAKE__CLIENT_ID", "ICEPACK_CATALOGS__LAKE__CLIENT_SECRET")}
LARGE = 4096 * GIB
POLICY = SizingPolicy(spark_image=IMAGE, executor_secret_refs=SECRET_REFS)


def downward_env(pod: kubernetes.client.V1Pod) -> dict[str, str]:
    """The values the kubelet gives the run container's downward-API variables, read from the pod
    object the API server holds."""
    values = {"status.podIP": pod.status.pod_ip, "metadata.name": pod.metadata.name,
              "metadata.namespace": pod.metadata.namespace}
    values |= {f"metadata.labels['{k}']": v for k, v in pod.metadata.labels.items()}
    return {e.name: values[e.value_from.field_ref.field_path] for e in pod.spec.containers[0].env
            if e.value_from is not None and e.value_from.field_ref is not None}


def executor_pods(admin: kubernetes.client.ApiClient, app_id: str) -> list[kubernetes.client.V1Pod]:
    return list(kubernetes.client.CoreV1Api(admin).list_namespaced_pod(
        RELEASE_NAMESPACE, label_selector=f"spark-app-selector={app_id},spark-role=executor").items)


def test_the_driver_creates_and_deletes_its_executors(
    dagster: Dagster, plane: ControlPlane, admin: kubernetes.client.ApiClient, tmp_path: Path
) -> None:
    size, tags = sized(LARGE, POLICY)
    assert size.kubernetes_driver
    run = dagster.launch_maintenance(LARGE, POLICY)
    driver = run_pod(plane, admin, run)
    assert driver.spec.service_account_name == DRIVER_ACCOUNT
    assert any(v.name.startswith("kube-api-access-") for v in driver.spec.volumes), "the driver's token"

    token = tmp_path / "token"
    token.write_text(cluster.service_account_token(admin, RELEASE_NAMESPACE, DRIVER_ACCOUNT, driver))
    conf = read_spark_conf_tag(tags, size.table)
    assert conf is not None
    instances = int(conf["spark.executor.instances"])
    conf |= {
        "spark.master": f"k8s://{plane.server}",
        "spark.kubernetes.authenticate.oauthTokenFile": str(token),
        "spark.kubernetes.authenticate.caCertFile": str(plane.ca),
        "spark.kubernetes.executor.podTemplateFile": str(TEMPLATE),
        "spark.driver.memory": "1g",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.scheduler.minRegisteredResourcesRatio": "0",
    }
    settings, ready = tmp_path / "spark-conf.json", tmp_path / "app-id"
    settings.write_text(json.dumps(conf))
    # No kubeconfig and no in-cluster variables: the token file is the driver's only credential.
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env |= downward_env(driver) | {"KUBECONFIG": str(tmp_path / "no-kubeconfig"), "HOME": str(tmp_path)}
    log = (tmp_path / "driver.log").open("w")
    command = [sys.executable, "-m", "tests.kubernetes.spark_driver", str(settings), str(ready)]
    process = subprocess.Popen(command, cwd=helm_chart.REPO, env=env, stdin=subprocess.PIPE, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:

        def started() -> str | None:
            if process.poll() is not None:
                raise RuntimeError(f"the driver exited: {(tmp_path / 'driver.log').read_text()[-4000:]}")
            return ready.read_text() if ready.exists() else None

        app_id = plane.wait("the Spark driver started", started, timeout=180)

        def all_running() -> list[kubernetes.client.V1Pod] | None:
            pods = [p for p in executor_pods(admin, app_id) if p.status.phase == "Running"]
            return pods if len(pods) == instances else None

        pods = plane.wait(f"{instances} executor pods Running", all_running, timeout=120)
        for pod in pods:
            _check_executor(pod, driver)
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            processes.stop(process, group=True)
        log.close()
    assert process.returncode == 0, (tmp_path / "driver.log").read_text()[-4000:]
    plane.wait("the executor pods deleted", lambda: not executor_pods(admin, app_id), timeout=60)


def _check_executor(pod: kubernetes.client.V1Pod, driver: kubernetes.client.V1Pod) -> None:
    [owner] = pod.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "Pod", driver.metadata.name, driver.metadata.uid, True)
    assert pod.metadata.namespace == RELEASE_NAMESPACE
    assert pod.spec.service_account_name == "icepack-user-code"
    assert pod.spec.automount_service_account_token is False
    assert not [v.name for v in pod.spec.volumes if v.name.startswith("kube-api-access-")]
    container = pod.spec.containers[-1]
    assert container.command == ["/opt/icepack/bin/spark-executor"] and container.args == ["executor"]
    assert container.image == IMAGE
    env = {e.name: e for e in container.env}
    for name, ref in SECRET_REFS.items():
        secret, key = ref.split(":")
        assert env[name].value is None
        reference = env[name].value_from.secret_key_ref
        assert (reference.name, reference.key) == (secret, key)
    assert pod.spec.node_name, "placed by the scheduler"
