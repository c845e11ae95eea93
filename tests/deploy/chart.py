"""Test helpers: our Helm values as the official dagster/dagster chart (1.13.27) sees them.

`load_values` merges values files the way Helm does (maps merge, lists and scalars replace).
`instance_config` and `container_context` build what the chart's templates build from values
(templates/configmap-instance.yaml with helpers/instance/*.tpl, and the user-deployments subchart's
`dagsterUserDeployments.k8sContainerContext`), restricted to the sections icepack's values set, so the
tests can hand them to Dagster and dagster-k8s themselves.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
HELM_DIR = REPO / "deploy" / "helm"
SCHEMA_PATH = Path(__file__).parent / "fixtures" / "dagster-helm-values.schema.json"
CHART_VERSION = "1.13.27"
RELEASE = "icepack"
NAMESPACE = "icepack"
DAGSTER_HOME = "/opt/dagster/dagster_home"  # the chart's global.dagsterHome default


def read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def helm_merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """Helm's coalescing of two values files: nested maps merge, anything else is replaced, null deletes."""
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = helm_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_values(*names: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in names:
        values = helm_merge(values, read_yaml(HELM_DIR / name))
    return values


def fullname(release: str = RELEASE) -> str:
    """The chart's `dagster.fullname`: the release name, suffixed with the chart name unless it has it."""
    return release if "dagster" in release else f"{release}-dagster"


def service_account(values: dict[str, Any], chart: dict[str, Any] | None = None) -> str:
    """`dagster.serviceAccountName` (chart=None) or the user-deployments subchart's equivalent."""
    name = values.get("global", {}).get("serviceAccountName") or (chart or values)["serviceAccount"]["name"]
    assert name, "set serviceAccount.name: the chart would otherwise create and bind its own account"
    return str(name)


def _postgres_storage(values: dict[str, Any]) -> dict[str, Any]:
    pg = values["postgresql"]
    config: dict[str, Any] = {
        "postgres_db": {
            "username": pg["postgresqlUsername"],
            "password": {"env": "DAGSTER_PG_PASSWORD"},
            "hostname": pg["postgresqlHost"],
            "db_name": pg["postgresqlDatabase"],
            "port": pg["service"]["port"],
            "params": pg.get("postgresqlParams", {}),
        }
    }
    if pg.get("postgresqlScheme"):
        config["postgres_db"]["scheme"] = pg["postgresqlScheme"]
    return config


def _configurable(module: str, cls: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"module": module, "class": cls} | ({"config": config} if config is not None else {})


def instance_config(values: dict[str, Any], namespace: str = NAMESPACE) -> dict[str, Any]:
    """dagster.yaml as the chart renders it into its `<fullname>-instance` ConfigMap."""
    storage = _postgres_storage(values)
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    run_launcher: dict[str, Any] = {
        "load_incluster_config": launcher["loadInclusterConfig"],
        "job_namespace": launcher.get("jobNamespace") or namespace,
        "image_pull_policy": launcher["imagePullPolicy"],
        "service_account_name": service_account(values),
        "dagster_home": DAGSTER_HOME,
        "instance_config_map": f"{fullname()}-instance",
        "postgres_password_secret": values.get("global", {}).get("postgresqlSecretName",
                                                                  f"{fullname()}-postgresql-secret"),
    }
    if launcher.get("kubeconfigFile"):
        run_launcher["kubeconfig_file"] = launcher["kubeconfigFile"]
    optional = {
        "env_config_maps": [m["name"] for m in launcher.get("envConfigMaps", []) if "name" in m],
        "env_secrets": [s["name"] for s in launcher.get("envSecrets", []) if "name" in s],
        "env_vars": launcher.get("envVars"),
        "volume_mounts": launcher.get("volumeMounts"),
        "volumes": launcher.get("volumes"),
        "labels": launcher.get("labels"),
        "resources": launcher.get("resources"),
        "security_context": launcher.get("securityContext"),
    }
    run_launcher |= {key: value for key, value in optional.items() if value}
    if launcher.get("failPodOnRunFailure"):
        run_launcher["fail_pod_on_run_failure"] = True
    run_k8s = launcher.get("runK8sConfig") or {}
    renamed = {"containerConfig": "container_config", "podSpecConfig": "pod_spec_config",
               "podTemplateSpecMetadata": "pod_template_spec_metadata", "jobSpecConfig": "job_spec_config",
               "jobMetadata": "job_metadata"}
    if run_k8s:
        run_launcher["run_k8s_config"] = {renamed[k]: v for k, v in run_k8s.items() if v}

    daemon = values["dagsterDaemon"]
    config: dict[str, Any] = {
        "scheduler": _configurable("dagster._core.scheduler", "DagsterDaemonScheduler"),
        "schedule_storage": _configurable(
            "dagster_postgres.schedule_storage", "PostgresScheduleStorage", storage
        ),
        "run_storage": _configurable("dagster_postgres.run_storage", "PostgresRunStorage", storage),
        "event_log_storage": _configurable("dagster_postgres.event_log", "PostgresEventLogStorage", storage),
        "run_launcher": _configurable("dagster_k8s", "K8sRunLauncher", run_launcher),
        "telemetry": {"enabled": values["telemetry"]["enabled"]},
    }
    coordinator = daemon["runCoordinator"]
    if daemon["enabled"] and coordinator["enabled"]:
        assert coordinator["type"] == "QueuedRunCoordinator"
        queued = coordinator["config"]["queuedRunCoordinator"]
        coordinator_config: dict[str, Any] = {"max_concurrent_runs": queued.get("maxConcurrentRuns", -1)}
        if queued.get("tagConcurrencyLimits"):
            coordinator_config["tag_concurrency_limits"] = queued["tagConcurrencyLimits"]
        if queued.get("dequeueIntervalSeconds"):
            coordinator_config["dequeue_interval_seconds"] = queued["dequeueIntervalSeconds"]
        config["run_coordinator"] = _configurable(
            "dagster._core.run_coordinator", "QueuedRunCoordinator", coordinator_config
        )
    monitoring = daemon["runMonitoring"]
    if daemon["enabled"] and monitoring["enabled"]:
        config["run_monitoring"] = {
            "enabled": True,
            "start_timeout_seconds": monitoring["startTimeoutSeconds"],
            "poll_interval_seconds": monitoring["pollIntervalSeconds"],
            "free_slots_after_run_end_seconds": monitoring["freeSlotsAfterRunEndSeconds"],
        }
        for source, target in [("cancelTimeoutSeconds", "cancel_timeout_seconds"),
                               ("maxResumeRunAttempts", "max_resume_run_attempts")]:
            if monitoring.get(source) is not None:
                config["run_monitoring"][target] = monitoring[source]
    retries = daemon["runRetries"]
    if daemon["enabled"] and retries["enabled"]:
        config["run_retries"] = {"enabled": True}
        if retries.get("maxRetries"):
            config["run_retries"]["max_retries"] = retries["maxRetries"]
    for section in ("sensors", "schedules"):
        threads = daemon.get(section, {})
        if daemon["enabled"] and threads.get("useThreads"):
            config[section] = {"use_threads": True}
            if threads.get("numWorkers"):
                config[section]["num_workers"] = threads["numWorkers"]
    return config


def user_deployment(values: dict[str, Any], name: str = "icepack") -> dict[str, Any]:
    deployments = values["dagster-user-deployments"]["deployments"]
    matches = [d for d in deployments if d["name"] == name]
    assert len(matches) == 1, f"one user deployment named {name} expected: {[d['name'] for d in deployments]}"
    return matches[0]


def image_name(deployment: dict[str, Any]) -> str:
    image = deployment["image"]
    return f"{image['repository']}:{image.get('tag') or CHART_VERSION}"


def container_context(values: dict[str, Any], name: str = "icepack", namespace: str = NAMESPACE) -> dict:
    """DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT of the code server: what its runs inherit."""
    deployment = user_deployment(values, name)
    k8s: dict[str, Any] = {
        "image_pull_policy": deployment["image"]["pullPolicy"],
        "env_config_maps": [f"{fullname()}-{name}-user-env"]
        + [m["name"] for m in deployment.get("envConfigMaps") or [] if "name" in m],
        "namespace": namespace,
        "service_account_name": service_account(values, values["dagster-user-deployments"]),
    }
    secrets = [s["name"] for s in deployment.get("envSecrets") or [] if "name" in s]
    if secrets:
        k8s["env_secrets"] = secrets
    for source, target in [("volumeMounts", "volume_mounts"), ("volumes", "volumes"), ("labels", "labels"),
                           ("resources", "resources")]:
        if deployment.get(source):
            k8s[target] = deployment[source]
    if isinstance(deployment.get("env"), list) and deployment["env"]:
        k8s["env"] = deployment["env"]
    # Round-trip through JSON as the chart does (`fromYaml | toJson`).
    return json.loads(json.dumps({"k8s": k8s}))
