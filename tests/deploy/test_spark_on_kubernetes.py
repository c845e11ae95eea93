"""Contract: the large tier's Spark on Kubernetes starts executors that work, as Spark 3.5 itself builds them.

The driver is the run pod (client mode): its Job is built by dagster-k8s from the rendered production
release and the run's sizing tags, and given what Kubernetes gives a pod (name, uid, the downward-API
environment). The executor pods are built by Spark's own `KubernetesExecutorBuilder` (feature steps from
the pyspark jars, through py4j) in a JVM whose environment is that pod's, from the Spark settings the
run's `icepack/spark-conf` tag carries, exactly as the run starts its session. Checked:

- each executor pod validates against Kubernetes 1.30's strict schema;
- its container runs the image's executor command (Spark gives only args ["executor"]);
- it is created in the run pod's namespace, owned by the driver pod, named after the run (two runs
  never collide), as the executor service account without a token;
- secrets reach it as secretKeyRef only, never as a value;
- the NetworkPolicies open executor → driver and executor ↔ executor for these labels;
- the executor command, given the environment Spark puts in the container, starts Spark's
  KubernetesExecutorBackend, which then looks for its driver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from dagster_k8s import K8sRunLauncher
from pyspark import SparkConf
from pyspark.java_gateway import launch_gateway

from icepack_dagster.domain.sizing.run_sizing import SizingPolicy, read_spark_conf_tag
from icepack_dagster.domain.sizing.spark_on_kubernetes import EXECUTOR_POD_TEMPLATE
from tests.deploy import helm_chart
from tests.deploy.run_job import IMAGE, RELEASE, rendered_launcher, run_job, sized
from tests.deploy.testkit import GIB, selects

REPO = helm_chart.REPO
TEMPLATE = REPO / "deploy" / "docker" / "spark-executor-pod-template.yaml"
EXECUTOR_COMMAND = REPO / "deploy" / "docker" / "spark-executor"
POD_IP = "10.42.0.17"
APP_ID = "spark-0123456789abcdef"
# The catalog credentials of the production release, handed to executors by reference.
SECRET = RELEASE.container_context()["k8s"]["env_secrets"][0]
SECRET_REFS = {key: f"{SECRET}:{key}" for key in
               ("ICEPACK_CATALOGS__LAKE__CLIENT_ID", "ICEPACK_CATALOGS__LAKE__CLIENT_SECRET")}


def _field(pod: dict[str, Any], path: str) -> str:
    """The value the kubelet gives a downward-API `fieldRef`."""
    if path == "status.podIP":
        return POD_IP
    if path.startswith("metadata.labels['"):
        return str(pod["metadata"]["labels"][path[len("metadata.labels['"):-2]])
    return str(pod["metadata"][path.removeprefix("metadata.")])


def _as_created(job: dict[str, Any]) -> dict[str, Any]:
    """The Job's pod as Kubernetes creates it: named after the Job, in its namespace, with a uid."""
    pod = json.loads(json.dumps(job["spec"]["template"]))
    pod["metadata"] |= {"name": f"{job['metadata']['name']}-x7k2p", "uid": str(uuid.uuid4()),
                        "namespace": helm_chart.NAMESPACE}
    return {"apiVersion": "v1", "kind": "Pod"} | pod


def _downward_env(pod: dict[str, Any]) -> dict[str, str]:
    container = pod["spec"]["containers"][0]
    return {e["name"]: _field(pod, e["valueFrom"]["fieldRef"]["fieldPath"])
            for e in container["env"] if "fieldRef" in e.get("valueFrom", {})}


class Driver:
    """A large-tier run: its pod as created, its Spark settings, and a JVM with the pod's environment."""

    def __init__(self, launcher: K8sRunLauncher) -> None:
        policy = SizingPolicy(spark_image=IMAGE, executor_secret_refs=SECRET_REFS)
        self.size, self.tags = sized(4096 * GIB, policy)
        assert self.size.kubernetes_driver
        self.pod = _as_created(run_job(launcher, self.tags))
        self.env = _downward_env(self.pod)
        conf = read_spark_conf_tag(self.tags, self.size.table)
        assert conf is not None
        self.spark_conf = conf

    def executor_conf(self, jvm: Any) -> Any:
        """The SparkConf the driver runs with: the tag's settings, plus what SparkContext adds."""
        conf = jvm.org.apache.spark.SparkConf(False)
        for key, value in self.spark_conf.items():
            conf.set(key, value)
        conf.set("spark.app.id", APP_ID)
        conf.set("spark.driver.host", self.env["SPARK_LOCAL_HOSTNAME"])
        # The template is the image's file; here it is read from the checkout (test_dockerfile ties them).
        assert conf.get("spark.kubernetes.executor.podTemplateFile") == EXECUTOR_POD_TEMPLATE
        conf.set("spark.kubernetes.executor.podTemplateFile", str(TEMPLATE))
        # SparkContext adds Java 17's module options to the executors' JVM options.
        conf.set("spark.executor.extraJavaOptions",
                 jvm.org.apache.spark.launcher.JavaModuleOptions.defaultModuleOptions())
        return conf


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    with rendered_launcher(tmp_path_factory.mktemp("kube")) as launcher:
        yield Driver(launcher)


@pytest.fixture(scope="module")
def jvm(driver: Driver) -> Iterator[Any]:
    """A JVM with pyspark's jars (spark-kubernetes included), started with the run pod's environment."""
    saved = dict(os.environ)
    os.environ.update(driver.env)
    try:
        gateway = launch_gateway(SparkConf())
    finally:
        os.environ.clear()
        os.environ.update(saved)
    yield gateway.jvm
    gateway.shutdown()
    gateway.proc.stdin.close()  # the gateway JVM exits when its stdin closes
    gateway.proc.wait(timeout=60)


def _module(jvm: Any, name: str) -> Any:
    return jvm.java.lang.Class.forName(name + "$").getField("MODULE$").get(None)


def _build_executor(jvm: Any, driver: Driver, executor_id: str) -> tuple[Any, dict[str, Any]]:
    """Spark's executor pod, built as ExecutorPodsAllocator builds it, as the JSON the API server gets."""
    conf = driver.executor_conf(jvm)
    serialization = jvm.io.fabric8.kubernetes.client.utils.Serialization
    pod_class = jvm.java.lang.Class.forName("io.fabric8.kubernetes.api.model.Pod")
    driver_pod = serialization.unmarshal(json.dumps(driver.pod), pod_class)
    executor_conf = _module(jvm, "org.apache.spark.deploy.k8s.KubernetesConf").createExecutorConf(
        conf, executor_id, APP_ID, jvm.scala.Option.apply(driver_pod), 0)
    security = jvm.org.apache.spark.SecurityManager(
        conf, jvm.scala.Option.empty(), _module(jvm, "org.apache.spark.internal.config.package")
        .AUTH_SECRET_FILE_EXECUTOR())
    client_config = jvm.io.fabric8.kubernetes.client.ConfigBuilder().withMasterUrl("https://127.0.0.1:9").build()
    client = jvm.io.fabric8.kubernetes.client.KubernetesClientBuilder().withConfig(client_config).build()
    profile = _module(jvm, "org.apache.spark.resource.ResourceProfile").getOrCreateDefaultProfile(conf)
    try:
        spec = jvm.org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBuilder().buildFromFeatures(
            executor_conf, security, client, profile)
    finally:
        client.close()
    pod = json.loads(serialization.asJson(spec.pod().pod()))
    # ExecutorPodsAllocator adds the executor container to the pod's other containers.
    pod["spec"]["containers"] = [*pod["spec"].get("containers", []),
                                 json.loads(serialization.asJson(spec.pod().container()))]
    return executor_conf, pod


@pytest.fixture(scope="module")
def executor(jvm: Any, driver: Driver) -> tuple[Any, dict[str, Any]]:
    return _build_executor(jvm, driver, "1")


def test_executor_pod_is_valid(executor: tuple[Any, dict[str, Any]]) -> None:
    kubernetes_validate.validate(executor[1], "1.30", strict=True)


def test_executor_runs_the_images_executor_command(executor: tuple[Any, dict[str, Any]]) -> None:
    container = executor[1]["spec"]["containers"][-1]
    template = helm_chart.read_yaml(TEMPLATE)["spec"]["containers"][0]
    assert container["args"] == ["executor"], "what Spark 3.5 passes"
    assert container["command"] == template["command"] == ["/opt/icepack/bin/spark-executor"]
    assert container["image"] == IMAGE


def test_executor_lives_in_the_run_pods_namespace_owned_by_it(
    executor: tuple[Any, dict[str, Any]], driver: Driver
) -> None:
    executor_conf, pod = executor
    assert executor_conf.namespace() == driver.pod["metadata"]["namespace"] == helm_chart.NAMESPACE
    assert pod["metadata"].get("namespace", helm_chart.NAMESPACE) == helm_chart.NAMESPACE
    owner = pod["metadata"]["ownerReferences"]
    assert owner == [{"apiVersion": "v1", "kind": "Pod", "name": driver.pod["metadata"]["name"],
                      "uid": driver.pod["metadata"]["uid"], "controller": True}]


def test_executor_names_are_per_run(jvm: Any, driver: Driver, executor: tuple[Any, dict[str, Any]]) -> None:
    run_id = driver.pod["metadata"]["labels"]["dagster/run-id"]
    assert executor[1]["metadata"]["name"] == f"icepack-{run_id}-exec-1"
    assert _build_executor(jvm, driver, "2")[1]["metadata"]["name"] == f"icepack-{run_id}-exec-2"


def test_executor_has_no_token_and_secrets_by_reference(executor: tuple[Any, dict[str, Any]]) -> None:
    spec = executor[1]["spec"]
    assert spec["serviceAccountName"] == "icepack-user-code"
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = spec["containers"][-1]["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    env = {e["name"]: e for e in spec["containers"][-1]["env"]}
    for name, ref in SECRET_REFS.items():
        secret, key = ref.split(":")
        assert env[name] == {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
    literal = [e["value"] for e in env.values() if "value" in e]
    assert not [v for v in literal if "stub" in v or "secret" in v.lower()]


def test_network_policies_admit_executors(executor: tuple[Any, dict[str, Any]], driver: Driver) -> None:
    policies = {doc["metadata"]["name"]: doc["spec"] for doc in
                yaml.safe_load_all((REPO / "deploy" / "k8s" / "networkpolicies.yaml").read_text())}
    labels, driver_labels = executor[1]["metadata"]["labels"], driver.pod["metadata"]["labels"]
    to_driver = policies["icepack-spark-executors-to-driver"]
    assert selects(to_driver["podSelector"], driver_labels)
    assert selects(to_driver["ingress"][0]["from"][0]["podSelector"], labels)
    among = policies["icepack-spark-executors"]
    assert selects(among["podSelector"], labels)
    assert any(selects(peer["podSelector"], labels) for peer in among["ingress"][0]["from"])
    assert any(selects(peer["podSelector"], driver_labels) for peer in among["ingress"][0]["from"])


def _container_env(container: dict[str, Any]) -> dict[str, str]:
    """What the kubelet would give the executor container, secrets stubbed, the driver on a closed port."""
    env: dict[str, str] = {}
    for entry in container["env"]:
        source = entry.get("valueFrom", {})
        if "fieldRef" in source:
            env[entry["name"]] = "127.0.0.1"
        elif "secretKeyRef" in source:
            env[entry["name"]] = "stub"
        else:
            env[entry["name"]] = entry.get("value", "")
    return env | {"SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@127.0.0.1:9"}


def test_the_executor_command_starts_sparks_executor_backend(
    executor: tuple[Any, dict[str, Any]], tmp_path: Path
) -> None:
    container = executor[1]["spec"]["containers"][-1]
    jars = Path.home() / ".cache" / "icepack" / "jars"
    # As in the image: the virtualenv's bin first on PATH (pyspark's jars are found through its python).
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    java_home = {"JAVA_HOME": os.environ["JAVA_HOME"]} if "JAVA_HOME" in os.environ else {}
    env = _container_env(container) | java_home | {
        "SPARK_EXECUTOR_MEMORY": "512m", "PATH": path, "ICEPACK_SPARK__JAR_CACHE": str(jars),
        "HOME": str(tmp_path)}
    result = subprocess.run([str(EXECUTOR_COMMAND), *container["args"]], env=env, capture_output=True,
                            text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "KubernetesExecutorBackend" in output, output
    assert "Failed to connect to /127.0.0.1:9" in output, output
