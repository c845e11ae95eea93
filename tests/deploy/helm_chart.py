"""Test helpers: the official dagster/dagster Helm chart, rendered by Helm's own Go SDK (helm-python-sdk)
with our values files, so the deploy tests assert on what Kubernetes would receive, not on a model.

The chart is found beside the checkout (`../shared/reference/dagster-chart-<version>`), where
ICEPACK_DAGSTER_CHART points, or where scripts/setup pulled it (`python -m tests.deploy.helm_chart`).
Helm validates values against the chart's values.schema.json before it renders; that schema `$ref`s
Kubernetes definitions on a web site, which a closed network cannot reach, so the chart is rendered
from a copy whose schema references point at the same definitions as shipped by kubernetes-validate
(templates and everything else byte-identical; `test_helm_values` checks it).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import yaml

REPO = Path(__file__).resolve().parents[2]
HELM_DIR = REPO / "deploy" / "helm"
CHART_VERSION = "1.10.4"
CHART_ENV = "ICEPACK_DAGSTER_CHART"
DEFAULT_CHART = REPO.parent / "shared" / "reference" / f"dagster-chart-{CHART_VERSION}"
# Where scripts/setup pulls the chart when it is not beside the checkout.
CHART_REPOSITORY = "https://dagster-io.github.io/helm"
PULLED_CHART = REPO / ".venv" / "share" / f"dagster-chart-{CHART_VERSION}" / "dagster"
RELEASE = "icepack"
NAMESPACE = "icepack"
# The chart's schemas reference kubernetesjsonschema.dev's (non-strict) definitions; these are the
# same definitions for the Kubernetes release the rest of tests/deploy validates against.
REMOTE_DEFINITIONS = "https://kubernetesjsonschema.dev/v1.18.0/_definitions.json"
LOCAL_DEFINITIONS = (Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
                     / "v1.30.0-local" / "_definitions.json")
OVERLAYS = ("values-dev.yaml", "values-prod.yaml")


def chart_dir() -> Path:
    """The official chart's directory; a clear failure naming the fix when it is missing."""
    candidates = [Path(os.environ[CHART_ENV])] if os.environ.get(CHART_ENV) else [DEFAULT_CHART, PULLED_CHART]
    for path in candidates:
        if (path / "Chart.yaml").is_file():
            return path
    raise FileNotFoundError(
        f"the official dagster/dagster Helm chart is not at {' or '.join(map(str, candidates))}. Put the "
        f"unpacked chart (release {CHART_VERSION}) there, set {CHART_ENV} to a chart directory, or run "
        "scripts/setup where the chart repository is reachable (it pulls the chart with helm-python-sdk)"
    )


def pull_chart() -> Path:
    """The chart, pulled from the official chart repository with Helm's SDK unless it is already here."""
    try:
        return chart_dir()
    except FileNotFoundError as missing:
        try:
            helm.pull("dagster", repo_url=CHART_REPOSITORY, version=CHART_VERSION, untar=True,
                      untar_dir=PULLED_CHART.parent, destination=PULLED_CHART.parent)
        except helm.HelmError as error:
            raise SystemExit(f"{missing}\npulling it from {CHART_REPOSITORY} failed: {error}") from None
        return chart_dir()


@functools.cache
def local_schema_chart() -> Path:
    """A copy of the chart whose values schemas resolve their Kubernetes `$ref`s to local files."""
    target = Path(tempfile.mkdtemp(prefix="dagster-chart-")) / "dagster"
    shutil.copytree(chart_dir(), target)
    definitions = json.loads(LOCAL_DEFINITIONS.read_text())
    local = target.parent / "kubernetes-definitions.json"
    # The chart's references use `#/definitions/...` (draft-04 layout); kubernetes-validate's file keys
    # them under `$defs`: offer both, and let the file be its own base URI.
    definitions |= {"$id": local.as_uri(), "definitions": definitions["$defs"]}
    local.write_text(json.dumps(definitions))
    for schema in target.rglob("values.schema.json"):
        schema.write_text(schema.read_text().replace(REMOTE_DEFINITIONS, local.as_uri()))
    return target


def read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def merge_values_files(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """How `helm -f base -f overlay` combines two values files (Helm's `mergeMaps`): maps merge key by
    key, anything else in the overlay replaces. The chart's defaults are coalesced in later by Helm."""
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_values_files(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_values(*names: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in names:
        values = merge_values_files(values, read_yaml(HELM_DIR / name))
    return values


def validate(values: dict[str, Any]) -> None:
    """Helm's own check of `values` against the chart's (and subcharts') values.schema.json."""
    with helm.Chart.load(local_schema_chart()) as chart:
        chart.validate_schema(values)


class Rendered:
    """The manifests of one rendered release, by kind and name."""

    def __init__(self, manifests: dict[str, str]) -> None:
        self.documents = [doc for path, text in sorted(manifests.items()) if path.endswith(".yaml")
                          for doc in yaml.safe_load_all(text) if doc]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [doc for doc in self.documents if doc["kind"] == kind]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        matches = [doc for doc in self.of_kind(kind) if doc["metadata"]["name"] == name]
        assert len(matches) == 1, f"one {kind} {name} expected, found {len(matches)}"
        return matches[0]

    def pod_templates(self) -> dict[str, dict[str, Any]]:
        """Every workload's pod template by workload name (Deployments, StatefulSets, Jobs)."""
        return {doc["metadata"]["name"]: doc["spec"]["template"] for doc in self.documents
                if doc["kind"] in ("Deployment", "StatefulSet", "Job")}

    def instance_config(self) -> dict[str, Any]:
        """dagster.yaml as the chart writes it into the instance ConfigMap."""
        config_map = self.get("ConfigMap", f"{RELEASE}-dagster-instance")
        return yaml.safe_load(config_map["data"]["dagster.yaml"])

    def code_server(self, name: str = "icepack") -> dict[str, Any]:
        """The code location's Deployment (user-deployments subchart)."""
        return self.get("Deployment", f"{RELEASE}-dagster-user-deployments-{name}")

    def container_context(self, name: str = "icepack") -> dict[str, Any]:
        """What the code server passes its runs (`DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT`)."""
        env = self.code_server(name)["spec"]["template"]["spec"]["containers"][0]["env"]
        raw = next(e["value"] for e in env if e["name"] == "DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT")
        return json.loads(raw)

    def image(self, name: str = "icepack") -> str:
        return self.code_server(name)["spec"]["template"]["spec"]["containers"][0]["image"]


def render_values(values: dict[str, Any]) -> Rendered:
    """Render the chart as `helm install icepack dagster/dagster -n icepack` would with `values`."""
    # Loaded per render: Helm drops disabled subcharts from the loaded chart while rendering.
    with helm.Chart.load(local_schema_chart()) as chart:
        return Rendered(chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True))


@functools.cache
def render(*names: str) -> Rendered:
    """The release rendered from values files in deploy/helm, in `-f` order (cached; do not mutate)."""
    return render_values(load_values(*names))


if __name__ == "__main__":
    print(f"dagster/dagster chart {CHART_VERSION}: {pull_chart()}")
