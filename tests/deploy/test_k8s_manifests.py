"""Contract: the Kubernetes manifests under deploy/k8s are valid, least-privilege, and agree with the
release the official chart renders from our values, the sizing policy and the oauth2-proxy values.

- every document validates against Kubernetes 1.30's strict schema (kubernetes-validate), and so does
  every rendered manifest;
- the rendered release holds no Role, ClusterRole or binding of its own (dev and production); the run
  launcher's Role in deploy/k8s grants exactly the API calls dagster-k8s makes (derived from its
  source), no wildcard, no ClusterRole; every service account a rendered pod uses is defined there, and
  the account of the code server and its runs is bound to nothing;
- NetworkPolicies deny ingress by default and open only the proxy → webserver, Dagster → code server,
  Spark executor → driver and (dev) Dagster → PostgreSQL paths: their selectors match the rendered
  pods' labels and their ports the rendered containers' ports;
- every rendered main container has CPU and memory requests and a memory limit, and its probes hit a
  port it listens on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import dagster_k8s
import kubernetes_validate
import pytest
import yaml

from icepack_dagster.domain.sizing.run_sizing import SIZE_TAG
from icepack_dagster.domain.sizing.tiers import default_tiers
from tests.deploy import helm_chart
from tests.deploy.helm_chart import OVERLAYS, Rendered
from tests.deploy.testkit import selects

K8S_DIR = helm_chart.REPO / "deploy" / "k8s"
PROD = ("values.yaml", "values-prod.yaml")
MANIFESTS = sorted(K8S_DIR.rglob("*.yaml"))
# Kubernetes client call -> (resource, verb) in RBAC terms.
CALL_TO_RULE = {
    "create_namespaced_job": ("jobs", "create"),
    "list_namespaced_job": ("jobs", "list"),
    "delete_namespaced_job": ("jobs", "delete"),
    "read_namespaced_job": ("jobs", "get"),
    "read_namespaced_job_status": ("jobs/status", "get"),
    "read_namespaced_pod": ("pods", "get"),
    "list_namespaced_pod": ("pods", "list"),
    "delete_namespaced_pod": ("pods", "delete"),
    "read_namespaced_pod_log": ("pods/log", "get"),
    "list_namespaced_event": ("events", "list"),
}


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _all() -> list[dict[str, Any]]:
    return [doc for path in MANIFESTS for doc in _documents(path)]


def _named(kind: str, name: str) -> dict[str, Any]:
    return next(d for d in _all() if d["kind"] == kind and d["metadata"]["name"] == name)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(K8S_DIR)))
def test_manifests_validate_strictly(path: Path) -> None:
    documents = _documents(path)
    assert documents
    for document in documents:
        kubernetes_validate.validate(document, "1.30", strict=True)


def test_strict_validation_catches_a_typo() -> None:
    policy = _named("NetworkPolicy", "icepack-default-deny-ingress") | {"spec": {"podSelectr": {}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(policy, "1.30", strict=True)


def _dagster_k8s_calls() -> set[tuple[str, str]]:
    package = Path(dagster_k8s.__file__).parent
    source = "".join((package / name).read_text() for name in ("client.py", "launcher.py"))
    calls = set(re.findall(r"(?:batch_api|core_api)\.([a-z_]+)\(", source))
    unknown = calls - set(CALL_TO_RULE)
    assert not unknown, f"dagster-k8s makes calls this test cannot map to RBAC yet: {unknown}"
    return {CALL_TO_RULE[call] for call in calls}


def test_run_launcher_role_is_exactly_what_dagster_k8s_calls() -> None:
    role = _named("Role", "icepack-run-launcher")
    granted = {(res, verb) for rule in role["rules"] for res in rule["resources"] for verb in rule["verbs"]}
    assert granted == _dagster_k8s_calls()


def test_no_wildcards_and_nothing_cluster_wide() -> None:
    documents = _all()
    assert not [d for d in documents if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    for role in (d for d in documents if d["kind"] == "Role"):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], role["metadata"]["name"]
            assert "secrets" not in rule["resources"], role["metadata"]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_release_validates_strictly(overlay: str) -> None:
    for document in helm_chart.render("values.yaml", overlay).documents:
        kubernetes_validate.validate(document, "1.30", strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_release_has_no_rbac_of_its_own(overlay: str) -> None:
    rendered = helm_chart.render("values.yaml", overlay)
    kinds = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
    found = [(d["kind"], d["metadata"]["name"]) for d in rendered.documents if d["kind"] in kinds]
    assert found == [], "docs/SECURITY.md promises the Roles of deploy/k8s/rbac.yaml only"
    assert [d for d in rendered.documents if d["kind"] == "ServiceAccount"
            and d["metadata"]["name"].startswith("icepack-")] == []


def _bound_accounts() -> dict[str, str]:
    return {d["subjects"][0]["name"]: d["roleRef"]["name"] for d in _all() if d["kind"] == "RoleBinding"}


def test_service_accounts_match_release_and_sizing() -> None:
    accounts = {d["metadata"]["name"] for d in _all() if d["kind"] == "ServiceAccount"}
    rendered = helm_chart.render(*PROD)
    pods = rendered.pod_templates()
    used = {name: pod["spec"]["serviceAccountName"] for name, pod in pods.items()}
    assert set(used.values()) <= accounts, used
    launcher = rendered.instance_config()["run_launcher"]["config"]["service_account_name"]
    code = rendered.container_context()["k8s"]["service_account_name"]
    assert {launcher, code} <= accounts
    drivers = {tier.service_account_name for tier in default_tiers() if tier.service_account_name}
    assert drivers <= accounts
    bound = _bound_accounts()
    assert bound == {launcher: "icepack-run-launcher", **{d: "icepack-spark-driver" for d in drivers}}
    assert code not in bound, "the code server and run pods must have no Kubernetes API rights"


def test_pods_that_mount_a_token_are_the_documented_ones() -> None:
    """Webserver and daemon launch runs (their token is bound to the launcher Role); the chart always
    mounts one in the code server too, whose account is bound to nothing. The storage migration hook
    Job calls no Kubernetes API and mounts none (docs/SECURITY.md, docs/KUBERNETES.md)."""
    pods = helm_chart.render(*PROD).pod_templates()
    mounting = {name: pod["spec"]["serviceAccountName"] for name, pod in pods.items()
                if pod["spec"].get("automountServiceAccountToken", True)}
    assert mounting == {
        "icepack-dagster-webserver": "icepack-dagster",
        "icepack-dagster-webserver-read-only": "icepack-dagster",
        "icepack-dagster-daemon": "icepack-dagster",
        "icepack-dagster-user-deployments-icepack": "icepack-user-code",
    }


def _ingress_ports(policy: dict[str, Any]) -> set[int]:
    return {port["port"] for rule in policy["spec"].get("ingress", []) for port in rule.get("ports", [])}


def _selected(rendered: Rendered, selector: dict[str, Any]) -> set[str]:
    return {name for name, pod in rendered.pod_templates().items()
            if selects(selector, pod["metadata"].get("labels", {}))}


def _container_ports(pod: dict[str, Any]) -> set[int]:
    return {port["containerPort"] for c in pod["spec"]["containers"] for port in c.get("ports", [])}


def test_webserver_only_from_the_proxy() -> None:
    rendered = helm_chart.render(*PROD)
    policy = _named("NetworkPolicy", "icepack-webserver-from-proxy")
    webservers = _selected(rendered, policy["spec"]["podSelector"])
    assert webservers == {"icepack-dagster-webserver", "icepack-dagster-webserver-read-only"}
    for name in webservers:
        assert _ingress_ports(policy) == _container_ports(rendered.pod_templates()[name])
    proxy_labels = helm_chart.read_yaml(helm_chart.HELM_DIR / "oauth2-proxy-values.yaml")["podLabels"]
    sources = [peer["podSelector"] for peer in policy["spec"]["ingress"][0]["from"]]
    assert len(sources) == 1 and selects(sources[0], proxy_labels)


def test_code_server_grpc_from_dagster_pods() -> None:
    rendered = helm_chart.render(*PROD)
    policy = _named("NetworkPolicy", "icepack-code-server-grpc")
    assert _selected(rendered, policy["spec"]["podSelector"]) == {"icepack-dagster-user-deployments-icepack"}
    service = rendered.get("Service", "icepack")
    assert _ingress_ports(policy) == {port["targetPort"] if "targetPort" in port else port["port"]
                                      for port in service["spec"]["ports"]}
    sources = policy["spec"]["ingress"][0]["from"][0]["podSelector"]
    dagster_pods = {"icepack-dagster-webserver", "icepack-dagster-webserver-read-only",
                    "icepack-dagster-daemon"}
    assert _selected(rendered, sources) == dagster_pods


def test_dev_postgresql_from_dagster_pods() -> None:
    rendered = helm_chart.render("values.yaml", "values-dev.yaml")
    policy = _named("NetworkPolicy", "icepack-dev-postgresql")
    databases = _selected(rendered, policy["spec"]["podSelector"])
    assert databases == {"icepack-postgresql"}
    assert _ingress_ports(policy) == _container_ports(rendered.pod_templates()["icepack-postgresql"])


def test_default_deny_and_spark_paths() -> None:
    deny = _named("NetworkPolicy", "icepack-default-deny-ingress")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    large = next(tier for tier in default_tiers() if tier.is_kubernetes)
    driver = _named("NetworkPolicy", "icepack-spark-executors-to-driver")
    assert driver["spec"]["podSelector"]["matchLabels"] == {SIZE_TAG: large.name}
    assert _ingress_ports(driver) == {int(large.spark_conf["spark.driver.port"]),
                                      int(large.spark_conf["spark.blockManager.port"])}


def _probe_ports(container: dict[str, Any]) -> list[Any]:
    probes = [container.get(p) for p in ("readinessProbe", "livenessProbe", "startupProbe")]
    return [probe[kind]["port"] for probe in probes if probe
            for kind in ("httpGet", "tcpSocket") if kind in probe]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_containers_have_resources_and_probes_hit_their_ports(overlay: str) -> None:
    rendered = helm_chart.render("values.yaml", overlay)
    for name, pod in rendered.pod_templates().items():
        if name == "icepack-postgresql":
            continue  # the dev overlay's trial database: the bitnami subchart's own settings
        for container in pod["spec"]["containers"]:
            resources = container.get("resources") or {}
            assert {"cpu", "memory"} <= set(resources.get("requests", {})), name
            assert "memory" in resources.get("limits", {}), name
            names = {port.get("name") for port in container.get("ports", [])}
            for port in _probe_ports(container):
                assert port in _container_ports(pod) | names, f"{name}: probe on {port}, not listened on"


@pytest.mark.parametrize(("name", "service"), [
    ("oauth2-proxy-values.yaml", "icepack-dagster-webserver"),
    ("oauth2-proxy-viewer-values.yaml", "icepack-dagster-webserver-read-only"),
])
def test_proxies_front_the_rendered_webservers(name: str, service: str) -> None:
    config = helm_chart.read_yaml(helm_chart.HELM_DIR / name)["config"]["configFile"]
    port = helm_chart.render(*PROD).get("Service", service)["spec"]["ports"][0]["port"]
    assert f'upstreams = ["http://{service}:{port}"]' in config
    assert "allowed_groups" in config
