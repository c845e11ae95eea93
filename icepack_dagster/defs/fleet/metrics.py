"""The fleet's Prometheus metrics, built with prometheus_client from the latest `fleet_summary`.

Two ways out, one set of metric families: `serve` is a long-lived HTTP endpoint a cluster scrapes
(`python -m icepack_dagster.defs.fleet.metrics`, its own Deployment: deploy/k8s/metrics.yaml), which
reads the newest `fleet_summary` materialization from Dagster's storage at every scrape, so it is as
fresh as the last fleet refresh and costs one indexed query; `write_textfile` is the file the
`fleet_summary` asset also writes, for node-exporter's textfile collector on a single machine.
"""

from __future__ import annotations

import argparse
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from icepack_dagster.config.platform import DEFAULT_DEPLOYMENT, DEPLOYMENT_NAME_PATTERN
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.event_reads import latest, metadata_of
from icepack_dagster.defs.materialization_codec import decode_fleet
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.domain.reports.fleet import FleetSummary

DEFAULT_PORT = 9464


def fleet_metrics(summary: FleetSummary) -> list[Metric]:
    """Every metric family of one fleet summary."""
    tables = GaugeMetricFamily("icepack_tables", "Managed Iceberg tables by health state.", labels=["state"])
    for state in HealthState:
        tables.add_metric([state.value], summary.count(state))
    health = GaugeMetricFamily(
        "icepack_table_health", "Health of each table: -1 unknown, 0 healthy, 1 warning, 2 critical.",
        labels=["table"],
    )
    for table, state in sorted(summary.table_states.items()):
        health.add_metric([table], state.plot_value)
    runs = GaugeMetricFamily("icepack_maintenance_runs", "Maintenance runs in flight by phase.",
                             labels=["phase"])
    runs.add_metric(["queued"], summary.maintenance_queued)
    runs.add_metric(["running"], summary.maintenance_running)
    quarantined = GaugeMetricFamily(
        "icepack_quarantined_tables", "Tables whose automatic maintenance is stopped.",
        value=len(summary.quarantined),
    )
    files = CounterMetricFamily("icepack_reclaimed_files", "Files maintenance removed from tables.",
                                value=summary.files_reclaimed_total)
    size = CounterMetricFamily("icepack_reclaimed_bytes", "Live data bytes maintenance removed from tables.",
                               value=summary.bytes_reclaimed_total)
    generated = GaugeMetricFamily(
        "icepack_fleet_summary_timestamp_seconds", "When this summary was computed.",
        value=summary.generated_at_epoch,
    )
    return [tables, health, runs, quarantined, files, size, generated]


class FleetCollector(Collector):
    """Collects `fleet_metrics` of whatever summary `read` returns at scrape time (nothing before the
    first fleet refresh: an absent series, never a made-up zero)."""

    def __init__(self, read: Callable[[], FleetSummary | None]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        summary = self._read()
        if summary is not None:
            yield from fleet_metrics(summary)


def latest_fleet_summary(instance: dg.DagsterInstance, names: DeploymentNames) -> FleetSummary | None:
    record = latest(instance, names.fleet_summary)
    return decode_fleet(metadata_of(record)) if record is not None else None


def write_textfile(summary: FleetSummary, path: Path) -> None:
    """The metrics as a textfile; prometheus_client writes a temporary file and renames it, so the
    collector never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(lambda: summary))
    write_to_textfile(str(path), registry)


def serve(
    instance: dg.DagsterInstance, names: DeploymentNames, host: str, port: int
) -> tuple[object, threading.Thread]:
    """Serve the deployment's fleet metrics over HTTP at `host:port/metrics`; returns (server, thread)
    to stop it."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(lambda: latest_fleet_summary(instance, names)))
    return start_http_server(port, addr=host, registry=registry)


def main() -> None:
    """`python -m icepack_dagster.defs.fleet.metrics`: serve until stopped, on the instance DAGSTER_HOME
    configures (the production dagster.yaml: PostgreSQL storage)."""
    parser = argparse.ArgumentParser(description="Serve icepack's fleet metrics for Prometheus.")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on")
    parser.add_argument(
        "--deployment", default=DEFAULT_DEPLOYMENT, help="the icepack deployment whose fleet to serve"
    )
    arguments = parser.parse_args()
    with dg.DagsterInstance.get() as instance:
        if not re.fullmatch(DEPLOYMENT_NAME_PATTERN, arguments.deployment):
            parser.error(f"--deployment {arguments.deployment!r}: not a name ({DEPLOYMENT_NAME_PATTERN})")
        serve(instance, DeploymentNames(arguments.deployment), arguments.host, arguments.port)
        threading.Event().wait()


if __name__ == "__main__":
    main()
