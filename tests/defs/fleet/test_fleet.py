"""The fleet view: its Prometheus metrics built with prometheus_client (read back with its own parser:
escaped labels, exact integers, the textfile replaced atomically), served over HTTP from Dagster's
storage for a cluster to scrape, and the `fleet_summary` asset
over a real instance: tables by state (a table not measured yet counts as unknown, never healthy),
quarantined tables with their last error, tables a circuit breaker pauses with its reason,
maintenance runs in flight, the tables needing attention as
a sortable table with readable sizes (the refresh sensor is exercised in
tests/defs/test_dagster_loop.py)."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import dagster as dg
from prometheus_client.parser import text_string_to_metric_families

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.defs.asset_keys import DEFAULT_NAMES
from icepack_dagster.defs.event_reads import latest_of, metadata_of
from icepack_dagster.defs.fleet.metrics import serve, write_textfile
from icepack_dagster.defs.materialization_codec import ATTENTION_PAGES, NEEDS_ATTENTION, decode_status
from icepack_dagster.domain.health.judging import format_bytes
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.domain.reports.fleet import FleetSummary
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    record_failures,
    record_rewrite,
    run_health_sync,
    small_file_table,
)
from tests.network import free_port


def _summary() -> FleetSummary:
    return FleetSummary(
        generated_at_epoch=1_700_000_000.5,
        tables=3,
        by_state={HealthState.HEALTHY: 1, HealthState.CRITICAL: 1, HealthState.UNKNOWN: 1},
        table_states={
            'lake.a."quoted"': HealthState.CRITICAL,
            "lake.a.b": HealthState.HEALTHY,
            "lake.a.c\\d": HealthState.UNKNOWN,
        },
        quarantined={'lake.a."quoted"': "disk full"},
        bytes_reclaimed_total=12_345_678_901_234,
    )


def latest_status(instance: dg.DagsterInstance, partition: str) -> TableStatus:
    record = latest_of(instance, DEFAULT_NAMES.table_status, partition)
    status = decode_status(metadata_of(record)) if record is not None else None
    assert status is not None, f"no table_status for {partition}"
    return status


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, parsed by prometheus_client's own parser."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }




def test_the_textfile_holds_every_fleet_metric(tmp_path: Path) -> None:
    path = tmp_path / "collector" / "icepack.prom"
    write_textfile(_summary(), path)
    samples = _samples(path.read_text())
    assert samples[("icepack_table_health", (("table", 'lake.a."quoted"'),))] == 2
    assert samples[("icepack_table_health", (("table", "lake.a.c\\d"),))] == -1
    assert samples[("icepack_tables", (("state", "critical"),))] == 1
    assert samples[("icepack_reclaimed_bytes_total", ())] == 12_345_678_901_234
    assert samples[("icepack_quarantined_tables", ())] == 1
    assert samples[("icepack_maintenance_runs", (("phase", "queued"),))] == 0
    assert [p.name for p in path.parent.iterdir()] == ["icepack.prom"]


def test_the_metrics_endpoint_serves_the_latest_fleet_summary(
    defs: dg.Definitions, instance: dg.DagsterInstance, catalogs: CatalogSet, namespace: str
) -> None:
    """`curl host:port/metrics` answers with the gauges of the newest fleet_summary materialization,
    read from Dagster's storage at scrape time; before any refresh it serves no fleet series."""
    port = free_port()
    server, thread = serve(instance, DEFAULT_NAMES, "127.0.0.1", port)
    try:
        def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                return _samples(response.read().decode())

        assert not any(name.startswith("icepack_") for name, _ in scrape())
        small_file_table(catalogs.get("lake"), f"{namespace}.scraped", appends=3)
        apply_partition_requests(instance, evaluate_sensor(defs, "iceberg_table_discovery", instance))
        assert run_health_sync(defs, instance, [f"lake.{namespace}.scraped"]).success
        assert defs.resolve_job_def("fleet_refresh").execute_in_process(instance=instance).success
        samples = scrape()
        assert samples[("icepack_table_health", (("table", f"lake.{namespace}.scraped"),))] in (0, 1, 2)
        assert sum(v for (name, _), v in samples.items() if name == "icepack_tables") == 1
        assert ("icepack_quarantined_tables", ()) in samples
    finally:
        server.shutdown()  # type: ignore[attr-defined]
        server.server_close()  # type: ignore[attr-defined]
        thread.join(timeout=10)


def test_fleet_summary_asset(
    scoped_settings: IcepackSettings,
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
    platform: PlatformSettings,
) -> None:
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.small", appends=12)
    small_file_table(lake, f"{namespace}.fine", appends=1)
    small_file_table(lake, f"{namespace}.zz_not_measured_yet", appends=1)
    apply_partition_requests(instance, evaluate_sensor(defs, "iceberg_table_discovery", instance))
    assert run_health_sync(defs, instance, [f"lake.{namespace}.fine", f"lake.{namespace}.small"]).success
    stuck = f"lake.{namespace}.small"
    record_failures(scoped_settings, stuck, 3, days_ago=1)
    looping = f"lake.{namespace}.fine"
    record_rewrite(scoped_settings, looping, bytes_in=10**12)  # far more than 10x its bytes in a day
    result = defs.resolve_job_def("fleet_refresh").execute_in_process(instance=instance)
    (event,) = result.asset_materializations_for_node("fleet_summary")
    metadata = event.metadata
    assert metadata["tables"].value == 3
    assert metadata["tables_critical"].value == 1
    assert metadata["tables_healthy"].value == 1
    assert metadata["tables_unknown"].value == 1
    assert metadata["quarantined_tables"].value == 1
    assert metadata["quarantined"].records[0].data == {
        "table": stuck, "last_error": f"{stuck}: rewrite_data_files: disk full"
    }
    [paused] = metadata["paused_by_breakers"].records
    assert paused.data["table"] == looping
    assert paused.data["breakers"].startswith("circuit breaker (write amplification) tripped: 931.3 GiB")
    assert "**1 paused by a circuit breaker**" in metadata["summary"].value
    assert metadata["maintenance_running"].value == 0
    assert "1 critical" in metadata["summary"].value
    attention = metadata[NEEDS_ATTENTION]
    assert isinstance(attention, dg.TableMetadataValue) and attention.schema is not None
    assert {c.name: c.type for c in attention.schema.columns}["data_bytes"] == "int"
    critical, unmeasured = (row.data for row in attention.records)
    status = latest_status(instance, stuck)
    assert critical == {
        "table": stuck, "state": "critical", "issues": "SMALL_FILES",
        "size": format_bytes(status.live_data_bytes), "data_bytes": status.live_data_bytes,
        "quarantined": True, "last_error": f"{stuck}: rewrite_data_files: disk full", "refused": "",
        "page": f"/assets/table_health?view=partitions&partition={stuck}",
    }
    pages = metadata[ATTENTION_PAGES].value
    page = f"/assets/table_health?view=partitions&partition={stuck}"
    assert f"- [{stuck}]({page}): critical, quarantined" in pages
    assert f"[lake.{namespace}.zz_not_measured_yet](/assets/table_health?view=partitions&partition=" in pages
    assert unmeasured["table"] == f"lake.{namespace}.zz_not_measured_yet" and unmeasured["state"] == "unknown"
    assert (unmeasured["size"], unmeasured["data_bytes"], unmeasured["quarantined"]) == ("-", -1, False)
    prom = Path(str(platform.fleet_metrics_path)).read_text()
    assert 'icepack_tables{state="unknown"} 1' in prom
