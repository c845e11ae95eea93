"""Contract: the Kubernetes manifests under deploy/k8s are valid, least-privilege, and agree with the Helm
values, the sizing policy and the oauth2-proxy values they are written for.

- every document validates against Kubernetes 1.30's strict schema (kubernetes-validate);
- the run launcher's Role grants exactly the API calls dagster-k8s makes (derived from its source), no
  wildcard, no ClusterRole; the service accounts are the ones the values and the sizing policy name;
- NetworkPolicies deny ingress by default and open only the proxy → webserver, Dagster → code server
  and Spark executor → driver paths, on the ports the values and the sizing tier use.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import dagster_k8s
import kubernetes_validate
import pytest
import yaml

from icepack_dagster.domain.run_sizing import SIZE_TAG, default_tiers
from tests.deploy import chart

K8S_DIR = chart.REPO / "deploy" / "k8s"
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


def test_service_accounts_match_values_and_sizing() -> None:
    accounts = {d["metadata"]["name"] for d in _all() if d["kind"] == "ServiceAccount"}
    values = chart.load_values("values.yaml", "values-prod.yaml")
    assert chart.service_account(values) in accounts
    assert chart.service_account(values, values["dagster-user-deployments"]) in accounts
    drivers = {tier.service_account_name for tier in default_tiers() if tier.service_account_name}
    assert drivers <= accounts
    bound = {d["subjects"][0]["name"] for d in _all() if d["kind"] == "RoleBinding"}
    assert chart.service_account(values, values["dagster-user-deployments"]) not in bound, (
        "the code server and run pods must have no Kubernetes API rights"
    )


def _ingress_ports(policy: dict[str, Any]) -> set[int]:
    return {port["port"] for rule in policy["spec"].get("ingress", []) for port in rule.get("ports", [])}


def test_default_deny_and_open_paths_match_values() -> None:
    deny = _named("NetworkPolicy", "icepack-default-deny-ingress")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    values = chart.load_values("values.yaml", "values-prod.yaml")
    webserver = _named("NetworkPolicy", "icepack-webserver-from-proxy")
    assert _ingress_ports(webserver) == {values["dagsterWebserver"]["service"]["port"]}
    proxy_labels = chart.read_yaml(chart.HELM_DIR / "oauth2-proxy-values.yaml")["podLabels"]
    sources = [peer["podSelector"]["matchLabels"] for peer in webserver["spec"]["ingress"][0]["from"]]
    assert sources == [{k: proxy_labels[k] for k in sources[0]}]
    grpc = _named("NetworkPolicy", "icepack-code-server-grpc")
    assert _ingress_ports(grpc) == {chart.user_deployment(values)["port"]}
    large = next(tier for tier in default_tiers() if tier.is_kubernetes)
    driver = _named("NetworkPolicy", "icepack-spark-executors-to-driver")
    assert driver["spec"]["podSelector"]["matchLabels"] == {SIZE_TAG: large.name}
    assert _ingress_ports(driver) == {int(large.spark_conf["spark.driver.port"]),
                                      int(large.spark_conf["spark.blockManager.port"])}


@pytest.mark.parametrize(("name", "service"), [
    ("oauth2-proxy-values.yaml", "webserver"),
    ("oauth2-proxy-viewer-values.yaml", "webserver-read-only"),
])
def test_proxies_front_the_chart_webservers(name: str, service: str) -> None:
    config = chart.read_yaml(chart.HELM_DIR / name)["config"]["configFile"]
    port = chart.load_values("values.yaml", "values-prod.yaml")["dagsterWebserver"]["service"]["port"]
    assert f'upstreams = ["http://{chart.fullname()}-{service}:{port}"]' in config
    assert "allowed_groups" in config
