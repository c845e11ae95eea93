"""A real `dagster-webserver` for tests: the GraphQL API that the UI's Materialize button, launchpad and
backfill dialog call, served on a free local port against the test's instance and workspace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests import tiers
from tests.network import free_port
from tests.polling import wait_until
from tests.processes import stop

WEBSERVER = str(Path(sys.executable).with_name("dagster-webserver"))

LAUNCH_RUN = """
mutation Launch($executionParams: ExecutionParams!) {
  launchRun(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""

LAUNCH_BACKFILL = """
mutation Backfill($backfillParams: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $backfillParams) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
  }
}
"""

REPOSITORIES = """
{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }
"""


class DagsterWebserver:
    """`dagster-webserver` in its own process group, stopped (with the code server it started) at the end."""

    def __init__(self, home: Path, workspace: Path, env: dict[str, str], log: Path) -> None:
        self.home, self.workspace, self.log = home, workspace, log
        self.env = {**os.environ, **env, "DAGSTER_HOME": str(home)}
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180) -> None:
        tiers.require("daemon", "a dagster-webserver")
        with self.log.open("a") as out:
            self.process = subprocess.Popen(
                [WEBSERVER, "-h", "127.0.0.1", "-p", str(self.port), "-w", str(self.workspace)],
                cwd=self.workspace.parent,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_until(self._serving, "the webserver to serve the code location", timeout=timeout, every=1)

    def _serving(self) -> tuple[str, str] | None:
        """The served code location; fails at once, with the webserver's output, when the process has
        exited (its port taken by another process after `free_port` probed it, say) instead of
        waiting out the deadline and reporting only a timeout."""
        assert self.process is not None
        if self.process.poll() is not None:
            output = self.log.read_text()[-3000:] if self.log.exists() else ""
            raise AssertionError(f"dagster-webserver exited with {self.process.returncode}:\n{output}")
        return self._repository()

    def _repository(self) -> tuple[str, str] | None:
        try:
            nodes = self.graphql(REPOSITORIES)["repositoriesOrError"].get("nodes") or []
        except (urllib.error.URLError, ConnectionError):
            return None
        return (nodes[0]["location"]["name"], nodes[0]["name"]) if nodes else None

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert not answer.get("errors"), answer["errors"]
        return dict(answer["data"])

    def launch_assets(self, assets: list[list[str]], partition: str) -> str:
        """What Materialize on one partition of an asset page sends: `__ASSET_JOB` with the asset
        selection and the partition as a run tag; the new run's id."""
        location, repository = self._repository() or ("", "")
        params = {
            "selector": {"repositoryLocationName": location, "repositoryName": repository,
                         "jobName": "__ASSET_JOB", "assetSelection": [{"path": p} for p in assets]},
            "runConfigData": {},
            "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
        }
        launched = self.graphql(LAUNCH_RUN, {"executionParams": params})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        return str(launched["run"]["runId"])

    def backfill(self, assets: list[list[str]], partitions: list[str]) -> str:
        """What the Materialize dialog sends for several partitions: an asset backfill; its id."""
        params = {"partitionNames": partitions, "assetSelection": [{"path": p} for p in assets],
                  "fromFailure": False}
        launched = self.graphql(LAUNCH_BACKFILL, {"backfillParams": params})["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        return str(launched["backfillId"])

    def stop(self) -> None:
        if self.process is None:
            return
        stop(self.process, group=True)
        self.process = None
        # Its code server is in the same process group; anything else with this DAGSTER_HOME is
        # the daemon's to end (stop the webserver first, then the daemon).
