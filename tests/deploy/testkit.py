"""Test helpers for the deployment tests: a kubeconfig that lets dagster-k8s build its clients outside
a cluster (nothing connects to it), Helm values pointed at the test's PostgreSQL, and which pods a
label selector selects, as Kubernetes' own selector code decides (for NetworkPolicies and Services
against rendered pods)."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import PG_HOST, PG_PORT, PG_USER
from tests.kubernetes.control_plane import binaries

GIB = 1024**3


def write_kubeconfig(path: Path) -> Path:
    """A kubeconfig naming an API server on a closed local port (discard), with no credentials."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "none", "user": {}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
    }))
    return path


def point_at_test_database(values: dict[str, Any], database: str, kubeconfig: Path) -> dict[str, Any]:
    """What an operator changes to run a release's Dagster outside the cluster: the database address
    and the kubeconfig (a copy; `values` is left as it was)."""
    values = copy.deepcopy(values)
    values["postgresql"] |= {"enabled": False, "postgresqlHost": PG_HOST, "postgresqlUsername": PG_USER,
                             "postgresqlDatabase": database, "postgresqlParams": {}}
    values["postgresql"]["service"] = {"port": PG_PORT}
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    launcher |= {"loadInclusterConfig": False, "kubeconfigFile": str(kubeconfig)}
    return values


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether the LabelSelector `selector` (matchLabels, matchExpressions) selects a pod labelled
    `labels`: answered by k8s.io/apimachinery's selector code (scripts/kube/labelselect, built with the
    control plane by scripts/kube/build), not by a model of its semantics."""
    query = json.dumps({"selector": selector, "labels": [labels]})
    done = subprocess.run([str(binaries() / "labelselect")], input=query, capture_output=True, text=True,
                          check=False, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"Kubernetes refuses the selector {selector}: {done.stderr.strip()}")
    answer: list[bool] = json.loads(done.stdout)
    return answer[0]
