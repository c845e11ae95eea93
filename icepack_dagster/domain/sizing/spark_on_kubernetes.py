"""Spark on Kubernetes from a run pod: what a k8s:// sizing tier's Spark settings and run pod need so that
executors start, in the run's namespace, owned by the run pod, named after the run.

The run pod is the Spark driver (client mode). What ties executors to it is only known once the pod
exists, so the run pod gets it through the downward API (`driver_pod_env`): its namespace, name and run
id become environment variables that the Spark settings reference as `${env:NAME}`, which Spark resolves
when it reads them. Spark 3.5 starts executor containers with args ["executor"] and no command; the
icepack image carries an executor pod template whose container command starts the executor
(deploy/docker/). Executors get secrets by reference only. Pure: no Kubernetes or Spark import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# The executor pod template and its container, baked into the icepack image (deploy/docker/Dockerfile).
EXECUTOR_POD_TEMPLATE = "/opt/icepack/spark/executor-pod-template.yaml"
EXECUTOR_CONTAINER = "executor"
# The downward-API environment of a k8s:// driver's run pod.
POD_NAMESPACE_ENV = "ICEPACK_POD_NAMESPACE"
POD_NAME_ENV = "ICEPACK_POD_NAME"
RUN_ID_ENV = "ICEPACK_RUN_ID"
RUN_ID_LABEL = "dagster/run-id"  # set by dagster-k8s on every run pod
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_KEY_REF = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?:[-._a-zA-Z0-9]+$")


def check_secret_refs(refs: Mapping[str, str]) -> None:
    """Executor env var name -> '<secret name>:<key>', as spark.kubernetes.executor.secretKeyRef takes."""
    for name, ref in refs.items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"executor_secret_refs: {name!r} is not an environment variable name")
        if not _SECRET_KEY_REF.match(ref):
            raise ValueError(f"executor_secret_refs.{name}: {ref!r} is not '<secret name>:<key>'")


def kubernetes_executor_conf(
    image: str, executor_service_account: str | None, secret_refs: Mapping[str, str]
) -> dict[str, str]:
    """Spark settings for executors that start, in the driver's namespace, owned by the driver pod."""
    conf = {
        "spark.kubernetes.container.image": image,
        "spark.kubernetes.namespace": f"${{env:{POD_NAMESPACE_ENV}}}",
        # Executors get the driver pod as owner: they go when the run pod goes, killed or not.
        "spark.kubernetes.driver.pod.name": f"${{env:{POD_NAME_ENV}}}",
        # One prefix per run, so concurrent runs never collide (Spark allows 47 characters).
        "spark.kubernetes.executor.podNamePrefix": f"icepack-${{env:{RUN_ID_ENV}}}",
        "spark.kubernetes.executor.podTemplateFile": EXECUTOR_POD_TEMPLATE,
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
    }
    if executor_service_account:
        conf["spark.kubernetes.authenticate.executor.serviceAccountName"] = executor_service_account
    conf |= {f"spark.kubernetes.executor.secretKeyRef.{name}": ref for name, ref in secret_refs.items()}
    return conf


def _field_env(name: str, field_path: str) -> dict[str, object]:
    return {"name": name, "value_from": {"field_ref": {"field_path": field_path}}}


def driver_pod_env() -> list[dict[str, object]]:
    """The driver run pod's downward-API environment (dagster-k8s's snake_case container config)."""
    return [
        # Executors connect back to the driver by address: advertise the pod IP, not its hostname.
        _field_env("SPARK_LOCAL_HOSTNAME", "status.podIP"),
        # What the settings of `kubernetes_executor_conf` reference.
        _field_env(POD_NAMESPACE_ENV, "metadata.namespace"),
        _field_env(POD_NAME_ENV, "metadata.name"),
        _field_env(RUN_ID_ENV, f"metadata.labels['{RUN_ID_LABEL}']"),
    ]
