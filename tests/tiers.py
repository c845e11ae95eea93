"""The slow tiers of the suite, by what a test starts beyond the session's shared Spark and
PostgreSQL, so a quick local loop can leave them out (`pytest -m "not daemon and not jvm_servers and
not kubernetes_api"`) and CI still runs them all:

- `daemon`: Dagster's own processes (a real `dagster-daemon` or `dagster-webserver`, or runs the
  `dagster` CLI executes in processes of their own: `dagster job execute`, `dagster asset materialize`);
- `jvm_servers`: JVMs beyond the shared local Spark (Spark Connect servers, Iceberg's REST catalog
  server, a standalone Spark master and worker);
- `kubernetes_api`: the real Kubernetes control plane of tests/kubernetes (etcd, kube-apiserver,
  controllers, kwok).

The markers are registered in pyproject.toml. Each helper that starts such a process calls `require`
first, so a test that starts one without carrying its marker fails, naming the marker: leaving a tier
out always leaves out every test that starts it."""

from __future__ import annotations

_markers_of_current_test: frozenset[str] = frozenset()


def entering(markers: frozenset[str]) -> None:
    """Called by the suite's conftest before each test's fixtures are set up."""
    global _markers_of_current_test
    _markers_of_current_test = markers


def require(marker: str, what: str) -> None:
    """Fail unless the test being set up or run carries `marker`, the tier of `what` it starts."""
    if marker not in _markers_of_current_test:
        raise AssertionError(
            f"this test starts {what} without the `{marker}` marker: add `pytest.mark.{marker}` to the "
            f"module's pytestmark, so `-m 'not {marker}'` leaves it out"
        )
