"""Contract: deploy/k8s/metrics.yaml runs icepack's fleet metrics endpoint beside the official chart.

Its pod reads Dagster's storage with the very instance ConfigMap and PostgreSQL secret the rendered
release gives the daemon, runs the release's user-code image without an API token and under the same
restricted security context, and serves on the port its Service's scrape annotations and its
NetworkPolicy name. The command it runs really serves `/metrics`: started here as the pod starts it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from icepack_dagster.defs.fleet.metrics import DEFAULT_PORT
from tests.deploy import helm_chart
from tests.deploy.testkit import selects
from tests.network import answers, free_port
from tests.polling import wait_until
from tests.processes import stop

MANIFEST = helm_chart.REPO / "deploy" / "k8s" / "metrics.yaml"
PROD = ("values.yaml", "values-prod.yaml")


def _manifest(kind: str) -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all(MANIFEST.read_text()) if d and d["kind"] == kind)


def _pod() -> dict[str, Any]:
    return _manifest("Deployment")["spec"]["template"]


def test_the_metrics_pod_reads_dagster_storage_as_the_daemon_does() -> None:
    release = helm_chart.render(*PROD)
    daemon = release.get("Deployment", "icepack-dagster-daemon")["spec"]["template"]["spec"]
    pod = _pod()["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    daemon_env = {e["name"]: e for e in daemon["containers"][0]["env"]}
    assert env["DAGSTER_PG_PASSWORD"]["valueFrom"] == daemon_env["DAGSTER_PG_PASSWORD"]["valueFrom"]
    instance_volume = next(v for v in daemon["volumes"] if v["name"] == "dagster-instance")
    assert {"name": "dagster-instance", "configMap": instance_volume["configMap"]} in pod["volumes"]
    assert release.get("ConfigMap", instance_volume["configMap"]["name"])
    mount = next(m for m in container["volumeMounts"] if m["name"] == "dagster-instance")
    assert mount["mountPath"] == f"{env['DAGSTER_HOME']['value']}/dagster.yaml"
    code_server = release.code_server()["spec"]["template"]["spec"]
    assert container["image"] == code_server["containers"][0]["image"]
    assert pod["securityContext"] == code_server["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False


def test_the_scrape_port_is_the_served_port_everywhere() -> None:
    container = _pod()["spec"]["containers"][0]
    command = container["command"]
    assert command[:3] == ["python", "-m", "icepack_dagster.defs.fleet.metrics"]
    port = int(command[command.index("--port") + 1])
    assert port == DEFAULT_PORT == container["ports"][0]["containerPort"]
    service = _manifest("Service")
    assert service["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    assert service["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert selects({"matchLabels": service["spec"]["selector"]}, _pod()["metadata"]["labels"])
    policy = _manifest("NetworkPolicy")
    assert selects(policy["spec"]["podSelector"], _pod()["metadata"]["labels"])
    assert [p["port"] for p in policy["spec"]["ingress"][0]["ports"]] == [port]


def test_the_pods_command_serves_metrics(tmp_path: Path) -> None:
    port = free_port()
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    command = _pod()["spec"]["containers"][0]["command"]
    args = [sys.executable, *command[1:command.index("--port")], "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(args, env={**os.environ, "DAGSTER_HOME": str(home)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/metrics"

    def serving() -> bool:
        assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
        return answers(url)

    try:
        wait_until(serving, "the metrics endpoint to answer", timeout=60, every=0.2)
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.status == 200
            assert "text/plain" in response.headers["Content-Type"]
    finally:
        stop(server)
        if server.stdout:
            server.stdout.close()
