"""Contract: Dagster's real K8sRunLauncher, built from the production release's rendered dagster.yaml and
authenticated only by a token of the run launcher's ServiceAccount (`icepack-dagster`), launches,
watches and terminates maintenance runs on a real API server.

- A launched maintenance run is a Job the API server stores, with the run's sizing (requests = limits
  of its tier); the job controller creates its pod, Pod Security admits it, the scheduler places it and
  kwok runs it (the container itself never runs: kwok stands in for the kubelet).
- When that pod fails (kwok's chaos stage, as a crashed run worker would), the job controller fails the
  Job, and a real `dagster-daemon`'s run monitoring, on the same instance, sees it and fails the run with
  the pod's diagnostics (read with the launcher's own rights); icepack's failure sensor, evaluated on
  that failure as the daemon would, records the crash in the table's history.
- Terminating a run deletes its Job and its pod.

The run's status before its pod fails is what the run worker reports when it starts (RUN_START, then
its maintenance step's STEP_START), reported here on its behalf since no container runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import dagster as dg
import kubernetes
import pytest
from dagster._core.events import DagsterEvent, DagsterEventType
from dagster_k8s.job import get_job_name_from_run_id
from kubernetes.client.exceptions import ApiException

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.maintenance.failure_sensor import WORKER_DIED
from icepack_dagster.defs.partitions import PARTITIONS_NAME
from icepack_dagster.domain.table.key import parse_table_key
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import small_file_table
from tests.deploy.run_job import sized
from tests.deploy.testkit import GIB
from tests.kubernetes.cluster import RELEASE_NAMESPACE
from tests.kubernetes.control_plane import ControlPlane
from tests.kubernetes.dagster_runs import Dagster, run_pod
from tests.platform.platform_testkit import evaluate_failure_sensor
from tests.processes import DagsterDaemon
from tests.tables_testkit import arrow_fingerprint

pytestmark = [pytest.mark.kubernetes_api, pytest.mark.postgres, pytest.mark.daemon]

FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"


def test_a_launched_run_is_a_sized_job_whose_pod_runs(
    dagster: Dagster, plane: ControlPlane, admin: kubernetes.client.ApiClient
) -> None:
    size, _ = sized(50 * GIB)
    run = dagster.launch_maintenance(50 * GIB)
    job_name = get_job_name_from_run_id(run.run_id)
    job = kubernetes.client.BatchV1Api(admin).read_namespaced_job(job_name, RELEASE_NAMESPACE)
    container = job.spec.template.spec.containers[0]
    assert container.resources.requests == size.resources.requests
    assert container.resources.limits == size.resources.limits
    assert job.spec.template.metadata.labels["icepack/size"] == size.tier == "medium"
    assert job.spec.backoff_limit == 0
    pod = run_pod(plane, admin, run)
    assert pod.spec.node_name, "placed by the scheduler"
    assert pod.spec.containers[0].resources.limits == size.resources.limits
    assert pod.metadata.labels["dagster/run-id"] == run.run_id
    assert dagster.status(run.run_id) == dg.DagsterRunStatus.STARTING


def test_run_monitoring_fails_a_run_whose_pod_died(
    dagster: Dagster,
    plane: ControlPlane,
    admin: kubernetes.client.ApiClient,
    settings: IcepackSettings,
    catalogs: CatalogSet,
    namespace: str,
    tmp_path: Path,
) -> None:
    table = small_file_table(catalogs.get("lake"), f"{namespace}.crashy", appends=3)
    before = arrow_fingerprint(table)
    partition = f"lake.{namespace}.crashy"
    dagster.instance.add_dynamic_partitions(PARTITIONS_NAME, [partition])
    run = dagster.launch_maintenance(GIB, table=partition)
    job_name = get_job_name_from_run_id(run.run_id)
    pod = run_pod(plane, admin, run)
    # What the run worker reports once it starts in that pod, and once its maintenance step starts.
    for started in (DagsterEvent(event_type_value=DagsterEventType.RUN_START.value, job_name=run.job_name),
                    DagsterEvent(event_type_value=DagsterEventType.STEP_START.value, job_name=run.job_name,
                                 step_key=DEFAULT_NAMES.maintained_step)):
        dagster.instance.report_dagster_event(started, run_id=run.run_id)
    assert dagster.status(run.run_id) == dg.DagsterRunStatus.STARTED
    # The run worker's container dies (exit code 1): kwok's chaos stage, triggered by its label.
    kubernetes.client.CoreV1Api(admin).patch_namespaced_pod(
        pod.metadata.name, RELEASE_NAMESPACE, {"metadata": {"labels": {FAIL_LABEL: "true"}}})
    batch = kubernetes.client.BatchV1Api(admin)

    def job_failed() -> bool:
        conditions = batch.read_namespaced_job(job_name, RELEASE_NAMESPACE).status.conditions or []
        return any(c.type == "Failed" and c.status == "True" for c in conditions)

    plane.wait(f"Job {job_name} Failed", job_failed, timeout=90)
    assert dagster.status(run.run_id) == dg.DagsterRunStatus.STARTED, "nothing but monitoring fails it"

    workspace = tmp_path / "workspace.yaml"
    workspace.write_text("load_from: []\n")
    daemon = DagsterDaemon(dagster.home, workspace, {"DAGSTER_PG_PASSWORD": ""}, tmp_path / "daemon.log")
    daemon.start()
    try:
        plane.wait("run monitoring to fail the run",
                   lambda: dagster.status(run.run_id) == dg.DagsterRunStatus.FAILURE, timeout=180)
    except TimeoutError:
        pytest.fail(f"the run is {dagster.status(run.run_id)}; daemon log:\n{daemon.tail()}")
    finally:
        daemon.stop()
    failure = dagster.instance.get_records_for_run(
        run.run_id, of_type=DagsterEventType.RUN_FAILURE).records
    [message] = [record.event_log_entry.message for record in failure]
    assert "Run has not completed but K8s job has no active pods" in message, message
    assert "containerFailed" in message, message

    # icepack's failure sensor, evaluated on that failure as the daemon would, records it in the
    # table's maintenance history: a crash counts towards quarantine.
    defs = build_definitions(settings)
    assert evaluate_failure_sensor(defs, dagster.instance, run.run_id) is None
    engine = Engine(settings)
    key = parse_table_key(partition)
    history = engine.history(key, engine.policy(key, engine.status(key).properties).policy)
    assert history.consecutive_failures == 1
    assert history.last_error is not None and history.last_error.startswith(WORKER_DIED)
    assert "K8s job has no active pods" in history.last_error
    assert arrow_fingerprint(catalogs.get("lake").load_table(f"{namespace}.crashy")) == before


def test_terminating_a_run_deletes_its_job_and_pod(
    dagster: Dagster, plane: ControlPlane, admin: kubernetes.client.ApiClient
) -> None:
    run = dagster.launch_maintenance(GIB)
    job_name = get_job_name_from_run_id(run.run_id)
    pod = run_pod(plane, admin, run)
    assert dagster.launcher.terminate(run.run_id) is True
    # CANCELED follows from the run worker, or from run monitoring once cancelTimeoutSeconds passed.
    assert dagster.status(run.run_id) == dg.DagsterRunStatus.CANCELING
    core, batch = kubernetes.client.CoreV1Api(admin), kubernetes.client.BatchV1Api(admin)

    plane.wait(f"Job {job_name} deleted", lambda: _deleted(batch.read_namespaced_job, job_name), timeout=60)
    name = pod.metadata.name
    plane.wait(f"pod {name} deleted", lambda: _deleted(core.read_namespaced_pod, name), timeout=60)


def _deleted(read: Callable[[str, str], object], name: str) -> bool:
    try:
        read(name, RELEASE_NAMESPACE)
    except ApiException as error:
        return error.status == 404
    return False
