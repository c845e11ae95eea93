"""Test helpers: the production Dagster instance (its rendered dagster.yaml: PostgreSQL storage, the
K8sRunLauncher) pointed at the test's database and at the session's API server, authenticated by a token
of the run launcher's ServiceAccount; maintenance runs launched through it as the run queue launches
them; and the pod the job controller makes for a run's Job."""

from __future__ import annotations

import sys
from pathlib import Path

import dagster as dg
import kubernetes
import yaml
from dagster._core.code_pointer import ModuleCodePointer
from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
from dagster_k8s import K8sRunLauncher
from dagster_k8s.job import get_job_name_from_run_id

from icepack_dagster.defs.run_tags import PARTITION_TAG
from icepack_dagster.domain.sizing.run_sizing import SizingPolicy
from tests.deploy import helm_chart
from tests.deploy.run_job import IMAGE, RELEASE, sized
from tests.deploy.testkit import point_at_test_database
from tests.kubernetes.cluster import RELEASE_NAMESPACE
from tests.kubernetes.control_plane import ControlPlane

LAUNCHER_ACCOUNT = "icepack-dagster"


class Dagster:
    def __init__(self, home: Path, database: str, kubeconfig: Path) -> None:
        self.home = home
        values = point_at_test_database(helm_chart.load_values("values.yaml", "values-prod.yaml"),
                                        database, kubeconfig)
        home.mkdir(parents=True)
        (home / "dagster.yaml").write_text(
            yaml.safe_dump(helm_chart.render_values(values).instance_config(), sort_keys=False))
        self.instance = dg.DagsterInstance.from_config(str(home))
        assert isinstance(self.instance.run_launcher, K8sRunLauncher)
        self.launcher: K8sRunLauncher = self.instance.run_launcher

    def launch_maintenance(
        self, live_bytes: int, policy: SizingPolicy | None = None, table: str = "lake.sales.orders"
    ) -> dg.DagsterRun:
        """A maintenance run of `table` of `live_bytes` (its partition), tagged as the maintenance sensor
        tags it, from the code location the release deploys, launched as the run queue launches it."""
        _, tags = sized(live_bytes, policy, table)
        tags = tags | {PARTITION_TAG: table}
        origin = JobPythonOrigin("maintenance", RepositoryPythonOrigin(
            executable_path=sys.executable,
            code_pointer=ModuleCodePointer("icepack_dagster.definitions", "defs", None),
            container_image=IMAGE, container_context=RELEASE.container_context()))
        run = self.instance.add_run(dg.DagsterRun(job_name="maintenance", tags=tags, job_code_origin=origin))
        return self.instance.launch_run(run.run_id, workspace=None)  # type: ignore[arg-type]

    def status(self, run_id: str) -> dg.DagsterRunStatus:
        run = self.instance.get_run_by_id(run_id)
        assert run is not None
        return run.status


def run_pod(plane: ControlPlane, admin: kubernetes.client.ApiClient, run: dg.DagsterRun,
            phase: str = "Running") -> kubernetes.client.V1Pod:
    """The one pod of the run's Job, once it is in `phase`."""
    core = kubernetes.client.CoreV1Api(admin)
    job_name = get_job_name_from_run_id(run.run_id)

    def pod_in_phase() -> kubernetes.client.V1Pod | None:
        pods = core.list_namespaced_pod(RELEASE_NAMESPACE, label_selector=f"job-name={job_name}").items
        return pods[0] if len(pods) == 1 and pods[0].status.phase == phase else None

    return plane.wait(f"the pod of Job {job_name} {phase}", pod_in_phase, timeout=90)
