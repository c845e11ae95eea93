"""Test helpers: the Kubernetes Job of a run, built by dagster-k8s exactly as its K8sRunLauncher builds it,
from the production release as the official chart renders it (the run launcher of the instance
ConfigMap's dagster.yaml, the container context the code server hands its runs) and the run's tags."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import kubernetes
from dagster._core.code_pointer import ModuleCodePointer
from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
from dagster._grpc.types import ExecuteRunArgs
from dagster_k8s import K8sRunLauncher
from dagster_k8s.job import construct_dagster_k8s_job, get_job_name_from_run_id

from icepack_dagster.defs.run_tags import maintenance_tags
from icepack_dagster.domain.sizing.run_sizing import RunSize, SizingPolicy, size_run, sizing_tags
from tests.deploy import helm_chart
from tests.deploy.testkit import write_kubeconfig
from tests.factories import make_status

RELEASE = helm_chart.render("values.yaml", "values-prod.yaml")
IMAGE = RELEASE.image()


@contextmanager
def rendered_launcher(directory: Path) -> Iterator[K8sRunLauncher]:
    """The K8sRunLauncher Dagster builds from the rendered run_launcher section (kubeconfig swapped in)."""
    kubeconfig = write_kubeconfig(directory / "kubeconfig")
    run_launcher = RELEASE.instance_config()["run_launcher"]
    run_launcher["config"] |= {"load_incluster_config": False, "kubeconfig_file": str(kubeconfig)}
    with dg.instance_for_test(overrides={"run_launcher": run_launcher}) as instance:
        assert isinstance(instance.run_launcher, K8sRunLauncher)
        yield instance.run_launcher


def run_job(launcher: K8sRunLauncher, tags: dict[str, str]) -> dict[str, Any]:
    """Mirrors K8sRunLauncher.launch_run up to the API call, and returns the Job as the API receives it."""
    origin = JobPythonOrigin("maintenance", RepositoryPythonOrigin(
        executable_path=sys.executable,
        code_pointer=ModuleCodePointer("icepack_dagster.definitions", "defs", None),
        container_image=IMAGE,
        container_context=RELEASE.container_context(),
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


def sized(
    live_bytes: int, policy: SizingPolicy | None = None, table: str = "lake.sales.orders"
) -> tuple[RunSize, dict[str, str]]:
    """A maintenance run's size and tags for `table` of `live_bytes`, as the maintenance sensor makes them."""
    status = make_status(table=table, live_data_bytes=live_bytes)
    size = size_run(status, policy or SizingPolicy(spark_image=IMAGE))
    return size, maintenance_tags(table, 42) | sizing_tags(size)
