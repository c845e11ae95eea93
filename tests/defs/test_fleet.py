"""The fleet view: Prometheus text format that node-exporter's textfile collector accepts (HELP and
TYPE per family, escaped labels, exact integers, atomic replacement), and the `fleet_summary` asset
over a real instance: tables by state (a table not measured yet counts as unknown, never healthy),
quarantined tables with their last error, maintenance runs in flight (the refresh sensor is
exercised in tests/integration/test_dagster_loop.py)."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg

from icepack_dagster.defs.fleet.fleet_summary import write_prometheus_file
from icepack_dagster.domain.fleet import FleetSummary, prometheus_text
from icepack_dagster.domain.health_model import HealthState
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.platform_settings import PlatformSettings
from icepack_dagster.settings import IcepackSettings
from tests.defs.dagster_testkit import (
    apply_partition_requests,
    evaluate_sensor,
    record_failures,
    run_health_sync,
    small_file_table,
)

SAMPLE = re.compile(r'^[a-z_]+(\{[a-z_]+="(?:[^"\\\n]|\\["\\n])*"\})? -?[0-9.e+]+$')


def test_prometheus_text_format(tmp_path: Path) -> None:
    summary = FleetSummary(
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
    text = prometheus_text(summary)
    families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(families) == len(set(families)) == 7
    for line in text.splitlines():
        assert line.startswith("# ") or SAMPLE.match(line), line
    assert 'icepack_table_health{table="lake.a.\\"quoted\\""} 2' in text
    assert 'icepack_table_health{table="lake.a.c\\\\d"} -1' in text
    assert "icepack_reclaimed_bytes_total 12345678901234" in text
    assert "icepack_quarantined_tables 1" in text
    path = tmp_path / "collector" / "icepack.prom"
    write_prometheus_file(summary, path)
    assert path.read_text() == text
    assert [p.name for p in path.parent.iterdir()] == ["icepack.prom"]


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
    assert metadata["maintenance_running"].value == 0
    assert "1 critical" in metadata["summary"].value
    prom = Path(str(platform.fleet_metrics_path)).read_text()
    assert 'icepack_tables{state="unknown"} 1' in prom
