"""Fixtures of the kubernetes_api tier: one real control plane for the tier's tests (tests/kubernetes/
control_plane.py; package-scoped, so it stops once the tier's last test ran), and the production release
installed once into a namespace that enforces the Pod Security level docs/SECURITY.md claims. A control
plane that is not built, or does not start, fails the tier saying why; nothing here is skipped."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest

from tests.conftest import fresh_database
from tests.kubernetes import cluster, control_plane
from tests.kubernetes.cluster import OTHER_NAMESPACE, RELEASE_NAMESPACE
from tests.kubernetes.control_plane import ControlPlane
from tests.kubernetes.dagster_runs import LAUNCHER_ACCOUNT, Dagster


@pytest.fixture(scope="package")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        started = control_plane.start(tmp_path_factory.mktemp("kube"))
    except (RuntimeError, TimeoutError) as error:
        pytest.fail(f"the Kubernetes control plane of the kubernetes_api tier did not start: {error}",
                    pytrace=False)
    yield started
    started.stop()


@pytest.fixture(scope="package")
def admin(plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    """A cluster-admin client: sets the stage and reads what happened, never the subject under test."""
    with plane.api_client() as api:
        yield api


@pytest.fixture(scope="package")
def release(plane: ControlPlane, admin: kubernetes.client.ApiClient) -> cluster.Release:
    """The production release applied as the docs install it, in `icepack` (Pod Security enforced)
    beside a second namespace the release's accounts must not reach."""
    cluster.create_namespace(admin, RELEASE_NAMESPACE, cluster.pod_security_level())
    cluster.create_namespace(admin, OTHER_NAMESPACE)
    core = kubernetes.client.CoreV1Api(admin)
    # ServiceAccounts are created by the serviceaccount controller; pods need `default` to exist.
    plane.wait("the namespace's default ServiceAccount",
               lambda: core.list_namespaced_service_account(RELEASE_NAMESPACE).items)
    return cluster.install(admin, RELEASE_NAMESPACE)


@pytest.fixture(scope="package")
def dagster(release: cluster.Release, plane: ControlPlane, admin: kubernetes.client.ApiClient,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dagster]:
    """The production Dagster instance on a fresh PostgreSQL database, launching runs into the release
    namespace with a token of the run launcher's ServiceAccount."""
    directory = tmp_path_factory.mktemp("dagster")
    token = cluster.service_account_token(admin, RELEASE_NAMESPACE, LAUNCHER_ACCOUNT)
    kubeconfig = plane.token_kubeconfig(directory / "launcher.kubeconfig", token)
    with pytest.MonkeyPatch.context() as patch, fresh_database("icepack_dagster_k8s") as database:
        patch.setenv("DAGSTER_PG_PASSWORD", "")
        instance = Dagster(directory / "home", database, kubeconfig)
        yield instance
        instance.instance.dispose()
