"""Test helpers over the session's API server: server-side apply as `kubectl apply --server-side` does
it, namespaces labelled for Pod Security admission, ServiceAccount tokens from the TokenRequest API (as
the kubelet gets them for a pod), and the production release as the docs' install steps create it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import yaml
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError

from tests.deploy import helm_chart

REPO = helm_chart.REPO
FIELD_MANAGER = "icepack-tests"
RELEASE_NAMESPACE = "icepack"
# Any other namespace: the release's accounts must not reach into it.
OTHER_NAMESPACE = "elsewhere"
SECURITY_DOC = REPO / "docs" / "SECURITY.md"
HOOK_ANNOTATION = "helm.sh/hook"
# Helm's own install order for the kinds the release holds (Helm's releaseutil.InstallOrder).
INSTALL_ORDER = ("Namespace", "NetworkPolicy", "ServiceAccount", "Secret", "ConfigMap", "Role",
                 "RoleBinding", "Service", "Deployment", "StatefulSet", "Job")


def pod_security_level() -> str:
    """The Pod Security level docs/SECURITY.md tells operators to enforce on the release namespace."""
    found = re.findall(r"pod-security\.kubernetes\.io/enforce=(\w+)", SECURITY_DOC.read_text())
    assert len(set(found)) == 1, f"docs/SECURITY.md names one enforced Pod Security level, found {found}"
    return str(found[0])


def create_namespace(api: kubernetes.client.ApiClient, name: str, level: str | None = None) -> None:
    """A namespace; with `level`, Pod Security admission enforces (and warns on) that level in it."""
    labels = {f"pod-security.kubernetes.io/{mode}": level for mode in ("enforce", "warn")} if level else {}
    if level:
        labels["pod-security.kubernetes.io/enforce-version"] = "latest"
    kubernetes.client.CoreV1Api(api).create_namespace(kubernetes.client.V1Namespace(
        metadata=kubernetes.client.V1ObjectMeta(name=name, labels=labels)))


def apply(api: kubernetes.client.ApiClient, document: dict[str, Any], namespace: str) -> dict[str, Any]:
    """Server-side apply of one manifest into `namespace`; the object as the API server stored it."""
    resource = DynamicClient(api).resources.get(api_version=document["apiVersion"], kind=document["kind"])
    applied = resource.server_side_apply(body=document, name=document["metadata"]["name"],
                                         namespace=namespace if resource.namespaced else None,
                                         field_manager=FIELD_MANAGER, force_conflicts=True)
    return dict(applied.to_dict())


def service_account_token(api: kubernetes.client.ApiClient, namespace: str, account: str,
                          pod: kubernetes.client.V1Pod | None = None) -> str:
    """A token of `account` from the TokenRequest API; bound to `pod` (it dies with the pod) the way
    the kubelet requests the token it mounts into a pod."""
    bound = None
    if pod is not None:
        bound = kubernetes.client.V1BoundObjectReference(api_version="v1", kind="Pod",
                                                         name=pod.metadata.name, uid=pod.metadata.uid)
    request = kubernetes.client.AuthenticationV1TokenRequest(
        spec=kubernetes.client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600,
                                                  bound_object_ref=bound))
    answer = kubernetes.client.CoreV1Api(api).create_namespaced_service_account_token(
        account, namespace, request)
    return str(answer.status.token)


def is_hook(document: dict[str, Any]) -> bool:
    return HOOK_ANNOTATION in (document["metadata"].get("annotations") or {})


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@dataclass
class Release:
    """The production release in its namespace: what was sent, and what the API server answered."""

    namespace: str
    sent: list[dict[str, Any]]
    stored: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    refused: dict[tuple[str, str], str] = field(default_factory=dict)

    def hooks(self) -> list[dict[str, Any]]:
        return [doc for doc in self.sent if is_hook(doc)]

    def workloads(self) -> list[dict[str, Any]]:
        return [doc for doc in self.sent if doc["kind"] in ("Deployment", "StatefulSet", "Job")]


def release_documents() -> list[dict[str, Any]]:
    """What the docs' install steps send, in their order: deploy/k8s/rbac.yaml and networkpolicies.yaml,
    the chart rendered with values.yaml + values-prod.yaml (its objects in Helm's install order, then its
    post-install hooks), then deploy/k8s/metrics.yaml."""
    rendered = helm_chart.render("values.yaml", "values-prod.yaml").documents
    hooks = [doc for doc in rendered if is_hook(doc)]
    ordered = sorted((doc for doc in rendered if not is_hook(doc)),
                     key=lambda doc: INSTALL_ORDER.index(doc["kind"]))
    deploy = REPO / "deploy" / "k8s"
    return [*documents(deploy / "rbac.yaml"), *documents(deploy / "networkpolicies.yaml"), *ordered, *hooks,
            *documents(deploy / "metrics.yaml")]


def install(api: kubernetes.client.ApiClient, namespace: str) -> Release:
    """Apply the release into `namespace`, recording per object what was stored or why it was refused."""
    release = Release(namespace, release_documents())
    for document in release.sent:
        key = (document["kind"], document["metadata"]["name"])
        try:
            release.stored[key] = apply(api, document, namespace)
        except DynamicApiError as error:
            release.refused[key] = f"{error.status} {error.reason}: {error.body}"
    return release
