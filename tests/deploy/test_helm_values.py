"""Contract: our Helm values are valid input for the official dagster/dagster chart 1.13.27 and configure
icepack correctly, with no secret in them.

- yamllint passes on every values file (deploy/.yamllint.yaml);
- base and base + each overlay validate against the chart's own values schema
  (fixtures/dagster-helm-values.schema.json), its Kubernetes references resolved against Kubernetes
  1.30's strict definitions; a typo or a malformed resource is refused;
- the code location runs `dagster api grpc -m icepack_dagster.definitions` from the package's image;
- the environment the values give the code server and its runs loads into `IcepackSettings` and
  `PlatformSettings` (secrets stubbed where Kubernetes would inject them);
- credentials reach pods only through Secrets: no literal password, secret or token anywhere.
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import referencing
import referencing.jsonschema
from yamllint import linter
from yamllint.config import YamlLintConfig

from icepack_dagster.catalog_config import needs_aws_bundle
from icepack_dagster.settings import EmbeddedCatalogSettings, RestCatalogSettings, load_settings
from tests.deploy import chart

OVERLAYS = ["values-dev.yaml", "values-prod.yaml"]
K8S_DEFINITIONS = (Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
                   / "v1.30.0-local-strict" / "_definitions.json")
SECRET_WORDS = ("password", "secret", "token", "credential")


def _without_object_required(node: Any, top: bool = True) -> Any:
    """The schema with each object's `required` list dropped (the chart's own defaults supply those keys
    when Helm merges), keeping the conditional `required` inside if/then that ties a type to its config."""
    if isinstance(node, dict):
        return {k: _without_object_required(v, top=k not in ("then", "if") and top)
                for k, v in node.items() if not (k == "required" and top)}
    if isinstance(node, list):
        return [_without_object_required(item, top) for item in node]
    return node


def _validator() -> jsonschema.Draft202012Validator:
    schema = _without_object_required(json.loads(chart.SCHEMA_PATH.read_text()))
    definitions = json.loads(K8S_DEFINITIONS.read_text())
    definitions.pop("$id")
    definitions["definitions"] = definitions["$defs"]

    def retrieve(uri: str) -> referencing.Resource:
        if uri.startswith("https://kubernetesjsonschema.dev/") and uri.endswith("/_definitions.json"):
            return referencing.jsonschema.DRAFT202012.create_resource(definitions)
        raise referencing.exceptions.NoSuchResource(uri)

    return jsonschema.Draft202012Validator(schema, registry=referencing.Registry(retrieve=retrieve))


VALIDATOR = _validator()


def _errors(values: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(values)]


@pytest.mark.parametrize("path", sorted(chart.HELM_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_yamllint(path: Path) -> None:
    config = YamlLintConfig(file=str(chart.REPO / "deploy" / ".yamllint.yaml"))
    problems = [str(p) for p in linter.run(path.read_text(), config, str(path))]
    assert problems == []


@pytest.mark.parametrize("overlays", [[], *[[o] for o in OVERLAYS]], ids=["base", *OVERLAYS])
def test_values_validate_against_the_chart_schema(overlays: list[str]) -> None:
    assert _errors(chart.load_values("values.yaml", *overlays)) == []


@pytest.mark.parametrize(
    ("path", "bad", "message"),
    [
        (["dagsterDaemon", "runCoordinatr"], {"enabled": True}, "Additional properties"),
        (["runLauncher", "config", "k8sRunLauncher", "resources"], {"limits": {"memory": ["2Gi"]}}, "is not"),
        (["dagsterDaemon", "runCoordinator", "config", "queuedRunCoordinator", "tagConcurrencyLimits"],
         [{"key": "icepack/table", "value": {"applyLimitPerUniqueValue": "yes"}, "limit": 1}],
         "is not valid"),
    ],
)
def test_schema_catches_mistakes(path: list[str], bad: Any, message: str) -> None:
    values = copy.deepcopy(chart.load_values("values.yaml", "values-prod.yaml"))
    node = values
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    errors = _errors(values)
    assert errors and any(message in e for e in errors), errors


def test_chart_version_matches_dagster() -> None:
    assert importlib.metadata.version("dagster") == chart.CHART_VERSION
    for name in ["values.yaml", *OVERLAYS]:
        text = (chart.HELM_DIR / name).read_text()
        assert f"--version {chart.CHART_VERSION}" in text or "version 1.13.27" in text, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_code_location_serves_icepack(overlay: str) -> None:
    deployment = chart.user_deployment(chart.load_values("values.yaml", overlay))
    assert deployment["dagsterApiGrpcArgs"] == ["--module-name", "icepack_dagster.definitions"]
    assert importlib.util.find_spec("icepack_dagster.definitions") is not None
    assert deployment["image"]["tag"] == importlib.metadata.version("icepack_dagster")
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}
    env = {e["name"]: e.get("value") for e in deployment["env"]}
    assert env["ICEPACK_PLATFORM_SPARK_IMAGE"] == chart.image_name(deployment), "executors run the same image"
    assert env["ICEPACK_PLATFORM_RUN_SIZING"] == "true"


def _pod_env(deployment: dict[str, Any], secret_keys: dict[str, list[str]]) -> dict[str, str]:
    """The environment Kubernetes would give the container: literal values, then stand-ins for what
    secretKeyRef and envFrom secretRef inject."""
    env: dict[str, str] = {}
    for secret in deployment.get("envSecrets") or []:
        env |= {key: f"stub-{key.lower()}" for key in secret_keys[secret["name"]]}
    for entry in deployment["env"]:
        ref = entry.get("valueFrom", {}).get("secretKeyRef")
        env[entry["name"]] = entry["value"] if ref is None else f"postgresql+psycopg2://u:stub@db/{ref['key']}"
    return env


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_environment_configures_icepack(overlay: str, monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = chart.user_deployment(chart.load_values("values.yaml", overlay))
    secret_keys = {"icepack-catalog-credentials": ["ICEPACK_CATALOGS__LAKE__CLIENT_ID",
                                                   "ICEPACK_CATALOGS__LAKE__CLIENT_SECRET"]}
    for key in [k for k in os.environ if k.startswith("ICEPACK_")]:
        monkeypatch.delenv(key)
    for key, value in _pod_env(deployment, secret_keys).items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    platform = settings.platform
    assert str(settings.home) == "/var/lib/icepack"
    assert platform.max_maintenance_in_flight >= 1
    lake = settings.catalogs["lake"]
    if overlay == "values-prod.yaml":
        assert isinstance(lake, RestCatalogSettings) and lake.vended_credentials
        assert lake.client_secret is not None and lake.client_secret.get_secret_value().startswith("stub-")
        assert settings.state_url is not None
        # The image's pinned jars (ICEPACK_SPARK__JAR_CACHE), with the AWS bundle S3 needs.
        assert settings.spark.jars is None and needs_aws_bundle(settings)
    else:
        assert isinstance(lake, EmbeddedCatalogSettings)


def _literal_secrets(node: Any, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        if "name" in node and "value" in node and any(w in str(node["name"]).lower() for w in SECRET_WORDS):
            if not str(node["name"]).endswith("VENDED_CREDENTIALS"):
                found.append(f"{path}: env {node['name']} has a literal value")
        for key, value in node.items():
            lowered = str(key).lower()
            if any(w in lowered for w in SECRET_WORDS) and isinstance(value, str) and value:
                if not lowered.endswith(("secretname", "existingsecret")):
                    found.append(f"{path}/{key}")
            found += _literal_secrets(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found += _literal_secrets(item, f"{path}[{index}]")
    return found


@pytest.mark.parametrize("path", sorted(chart.HELM_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_no_literal_secrets(path: Path) -> None:
    assert _literal_secrets(chart.read_yaml(path)) == []


def test_literal_secret_detector_works() -> None:
    leaked = {"postgresql": {"postgresqlPassword": "hunter2"}}
    assert _literal_secrets(leaked) == ["/postgresql/postgresqlPassword"]
    assert _literal_secrets({"env": [{"name": "ICEPACK_CATALOGS__X__CLIENT_SECRET", "value": "s"}]})
