"""Contract: our Helm values are valid input for the official dagster/dagster chart, as Helm itself renders
it (helm-python-sdk, Helm's Go SDK), and configure icepack correctly, with no secret in them.

- yamllint passes on every values file (deploy/.yamllint.yaml);
- the chart the tests render is the official release, unmodified but for its schemas' Kubernetes
  references, which point at local copies of the same definitions;
- base and base + each overlay pass Helm's validation against the chart's own values.schema.json (and
  the user-deployments subchart's) and render; a typo or a malformed resource is refused;
- the rendered Dagster images are the Dagster release icepack pins, the code server runs
  `dagster api grpc -m icepack_dagster.definitions` from the package's image;
- the environment the rendered code server and its runs get loads into `IcepackSettings` and
  `PlatformSettings` (secrets stubbed where Kubernetes would inject them);
- credentials reach pods only through Secrets: no literal password, secret or token in the values or in
  any rendered env var, and no Secret rendered into the production release.
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import os
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
from yamllint import linter
from yamllint.config import YamlLintConfig

from icepack_dagster.config.catalogs import EmbeddedCatalogSettings, RestCatalogSettings, needs_aws_bundle
from icepack_dagster.config.settings import load_settings
from tests.deploy import helm_chart
from tests.deploy.helm_chart import OVERLAYS, Rendered

SECRET_WORDS = ("password", "secret", "token", "credential")


@pytest.mark.parametrize("path", sorted(helm_chart.HELM_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_yamllint(path: Path) -> None:
    config = YamlLintConfig(file=str(helm_chart.REPO / "deploy" / ".yamllint.yaml"))
    problems = [str(p) for p in linter.run(path.read_text(), config, str(path))]
    assert problems == []


def test_the_rendered_chart_is_the_official_release_unmodified() -> None:
    original, copy_ = helm_chart.chart_dir(), helm_chart.local_schema_chart()
    with helm.Chart.load(original) as chart:
        assert (chart.name, chart.version) == ("dagster", helm_chart.CHART_VERSION)
    files = sorted(p.relative_to(original) for p in original.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(copy_) for p in copy_.rglob("*") if p.is_file())
    local = (copy_.parent / "kubernetes-definitions.json").as_uri()
    for name in files:
        text = (copy_ / name).read_text(errors="replace")
        if name.name == "values.schema.json":
            text = text.replace(local, helm_chart.REMOTE_DEFINITIONS)
        assert text == (original / name).read_text(errors="replace"), name


@pytest.mark.parametrize("overlays", [[], *[[o] for o in OVERLAYS]], ids=["base", *OVERLAYS])
def test_values_pass_the_chart_schema_and_render(overlays: list[str]) -> None:
    helm_chart.validate(helm_chart.load_values("values.yaml", *overlays))
    assert helm_chart.render("values.yaml", *overlays).of_kind("Deployment")


@pytest.mark.parametrize(
    ("path", "bad", "message"),
    [
        (["dagsterDaemon", "runCoordinatr"], {"enabled": True}, "additional properties 'runCoordinatr'"),
        (["runLauncher", "config", "k8sRunLauncher", "resources"], {"limits": {"memory": ["2Gi"]}},
         "/runLauncher/config/k8sRunLauncher/resources"),
        (["dagsterDaemon", "runCoordinator", "config", "customRunCoordinator"],
         {"module": "dagster.core.run_coordinator", "config": {}}, "missing property 'class'"),
        (["dagster-user-deployments", "deployments"], [{"name": "icepack", "imag": {}, "port": 3030}],
         "missing property 'image'"),
    ],
)
def test_schema_catches_mistakes(path: list[str], bad: Any, message: str) -> None:
    values = copy.deepcopy(helm_chart.load_values("values.yaml", "values-prod.yaml"))
    node = values
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    with pytest.raises(helm.HelmValuesError, match=message):
        helm_chart.validate(values)
    with pytest.raises(helm.HelmValuesError, match=message):
        helm_chart.render_values(values)


# The chart's own PostgreSQL (dev overlay) is the one workload that does not run Dagster.
CHART_DATABASE = "icepack-postgresql"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_dagster_process_runs_the_icepack_image(overlay: str) -> None:
    """Webserver(s), daemon, code server and (production) the storage migration: one image, whose
    pyproject.toml pins Dagster and the packages the instance config names (test_dockerfile.py)."""
    rendered = helm_chart.render("values.yaml", overlay)
    images = {name: {container["image"] for container in pod["spec"]["containers"]}
              for name, pod in rendered.pod_templates().items() if name != CHART_DATABASE}
    assert {"icepack-dagster-webserver", "icepack-dagster-daemon"} <= set(images)
    assert all(found == {rendered.image()} for found in images.values()), images


def _container(rendered: Rendered) -> dict[str, Any]:
    return rendered.code_server()["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_code_location_serves_icepack(overlay: str) -> None:
    rendered = helm_chart.render("values.yaml", overlay)
    container = _container(rendered)
    assert container["args"][:3] == ["dagster", "api", "grpc"]
    assert container["args"][-2:] == ["--module-name", "icepack_dagster.definitions"]
    assert importlib.util.find_spec("icepack_dagster.definitions") is not None
    assert rendered.image().endswith(":" + importlib.metadata.version("icepack_dagster"))
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DAGSTER_CURRENT_IMAGE"] == rendered.image()
    assert env["ICEPACK_PLATFORM_SPARK_IMAGE"] == rendered.image(), "executors run the same image"
    assert env["ICEPACK_PLATFORM_RUN_SIZING"] == "true"
    port = rendered.get("Service", "icepack")["spec"]["ports"][0]["port"]
    assert container["args"][container["args"].index("-p") + 1] == str(port)
    workspace = rendered.get("ConfigMap", "icepack-dagster-workspace-yaml")["data"]["workspace.yaml"]
    assert f"port: {port}" in workspace


def _pod_env(container: dict[str, Any], secret_keys: dict[str, list[str]]) -> dict[str, str]:
    """The environment Kubernetes would give the container: literal values, then stand-ins for what
    secretKeyRef and envFrom secretRef inject."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        if "secretRef" in source and not source["secretRef"].get("optional"):
            env |= {key: f"stub-{key.lower()}" for key in secret_keys[source["secretRef"]["name"]]}
    for entry in container["env"]:
        ref = entry.get("valueFrom", {}).get("secretKeyRef")
        env[entry["name"]] = entry["value"] if ref is None else f"postgresql+psycopg2://u:stub@db/{ref['key']}"
    return env


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_environment_configures_icepack(overlay: str, monkeypatch: pytest.MonkeyPatch) -> None:
    container = _container(helm_chart.render("values.yaml", overlay))
    secret_keys = {"icepack-catalog-credentials": ["ICEPACK_CATALOGS__LAKE__CLIENT_ID",
                                                   "ICEPACK_CATALOGS__LAKE__CLIENT_SECRET"],
                   "icepack-compute-logs": ["DAGSTER_COMPUTE_LOG_BUCKET"],
                   "icepack-alerts": ["ICEPACK_PLATFORM_ALERT_WEBHOOK_URL"]}
    for key in [k for k in os.environ if k.startswith("ICEPACK_")]:
        monkeypatch.delenv(key)
    for key, value in _pod_env(container, secret_keys).items():
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
        webhook = platform.alert_webhook_url  # the alert sensor's webhook, from a Secret by reference
        assert webhook is not None and webhook.get_secret_value().startswith("stub-")
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
                if not lowered.endswith(("secretname", "existingsecret", "password_secret")):
                    found.append(f"{path}/{key}")
            found += _literal_secrets(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found += _literal_secrets(item, f"{path}[{index}]")
    return found


@pytest.mark.parametrize("path", sorted(helm_chart.HELM_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_no_literal_secrets_in_values(path: Path) -> None:
    assert _literal_secrets(helm_chart.read_yaml(path)) == []


def test_no_literal_secrets_in_the_rendered_production_release() -> None:
    rendered = helm_chart.render("values.yaml", "values-prod.yaml")
    assert rendered.of_kind("Secret") == [], "production Secrets are created out of band, not by the chart"
    for document in rendered.documents:
        assert _literal_secrets(document) == [], document["metadata"]["name"]
    assert _literal_secrets(rendered.instance_config()) == []
    context = rendered.container_context()
    assert _literal_secrets(context) == []
    assert context["k8s"]["env_secrets"] == [
        "icepack-catalog-credentials", "icepack-compute-logs", "icepack-alerts"
    ]


def test_dev_release_renders_only_the_charts_own_database_secrets() -> None:
    """Trials only: the chart's PostgreSQL and its generated password (Dagster's copy and the subchart's)."""
    secrets = helm_chart.render("values.yaml", "values-dev.yaml").of_kind("Secret")
    names = sorted(s["metadata"]["name"] for s in secrets)
    assert names == ["dagster-postgresql-secret", "icepack-postgresql"]


def test_literal_secret_detector_works() -> None:
    leaked = {"postgresql": {"postgresqlPassword": "hunter2"}}
    assert _literal_secrets(leaked) == ["/postgresql/postgresqlPassword"]
    assert _literal_secrets({"env": [{"name": "ICEPACK_CATALOGS__X__CLIENT_SECRET", "value": "s"}]})
