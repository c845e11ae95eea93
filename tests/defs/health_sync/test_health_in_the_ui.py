"""What the Dagster UI shows about health, read through Dagster's own GraphQL API (the webserver's
schema and resolvers, over a real code server that loads the code location, against a real instance):
after a health sync of a critical, a warning and a healthy table, the `healthy` check of
`table_health` has one result per table (the critical table failed with severity ERROR, the warning
one failed with WARN, the healthy one succeeded); a scheduled sync that skips unchanged tables leaves
those results as they are; `healthy_after_maintenance` is partitioned too; every asset shows its
owners and code version; the maintenance sensor targets `maintained_table`, and the health-sync
schedule and the discovery sensor link the assets their runs materialize, and those assets name
the schedules and sensors that materialize them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

from icepack_dagster import __version__
from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.defs.dagster_testkit import discover, run_health_sync, small_file_table
from tests.factories import settings_with_platform

CHECKS = """
query Checks($assetKey: AssetKeyInput!) {
  assetNodeOrError(assetKey: $assetKey) {
    ... on AssetNode {
      owners { ... on TeamAssetOwner { team } }
      opVersion
      metadataEntries { label ... on MarkdownMetadataEntry { mdStr } }
      targetingInstigators { ... on Sensor { name } ... on Schedule { name } }
      assetChecksOrError {
        ... on AssetChecks {
          checks {
            name
            partitionDefinition { name }
            partitionStatuses {
              ... on AssetCheckDefaultPartitionStatuses { succeededPartitions failedPartitions }
            }
          }
        }
      }
    }
  }
}
"""
EXECUTIONS = """
query Executions($assetKey: AssetKeyInput!, $partition: String) {
  assetCheckExecutions(assetKey: $assetKey, checkName: "healthy", partition: $partition, limit: 10) {
    partition
    status
    evaluation { severity description success }
  }
}
"""
INSTIGATORS = """
query Instigators($selector: RepositorySelector!) {
  schedulesOrError(repositorySelector: $selector) {
    ... on Schedules {
      results { name metadataEntries { label ... on AssetMetadataEntry { assetKey { path } } } }
    }
  }
  sensorsOrError(repositorySelector: $selector) {
    ... on Sensors {
      results { name metadataEntries { label ... on AssetMetadataEntry { assetKey { path } } } }
    }
  }
}
"""


@pytest.fixture
def ui(tmp_path: Path, instance: dg.DagsterInstance) -> Iterator[Any]:
    """A GraphQL context over a code server (a subprocess, as the webserver's) loading icepack's code
    location, reading the test's instance."""
    location = tmp_path / "location.py"
    location.write_text(
        "from icepack_dagster.definitions import build_definitions\n"
        "from icepack_dagster.config.settings import load_settings\n\n"
        f"defs = build_definitions(load_settings(home={str(tmp_path / 'home')!r}))\n"
    )
    with define_out_of_process_context(str(location), "defs", instance) as context, context:
        yield context  # entered, as the webserver enters each request's context


def _query(ui: Any, query: str, **variables: Any) -> dict[str, Any]:
    result = execute_dagster_graphql(ui, query, variables)
    assert not result.errors, result.errors
    return result.data


def _checks(ui: Any, asset: str) -> dict[str, Any]:
    node = _query(ui, CHECKS, assetKey={"path": [asset]})["assetNodeOrError"]
    return node | {"checks": {c["name"]: c for c in node["assetChecksOrError"]["checks"]}}


def _executions(ui: Any, partition: str) -> list[dict[str, Any]]:
    return _query(ui, EXECUTIONS, assetKey={"path": ["table_health"]}, partition=partition)[
        "assetCheckExecutions"
    ]


def test_the_partitions_view_shows_which_tables_are_unhealthy(
    scoped_settings: IcepackSettings,
    platform: PlatformSettings,
    instance: dg.DagsterInstance,
    catalogs: CatalogSet,
    namespace: str,
    ui: Any,
) -> None:
    # Five snapshots are a backlog worth a warning here (and five small files too few to matter).
    strict = scoped_settings.model_copy(update={"thresholds": HealthThresholds(snapshot_count_warning=4)})
    defs = build_definitions(settings_with_platform(strict, platform))
    lake = catalogs.get("lake")
    small_file_table(lake, f"{namespace}.crowded", appends=12)
    small_file_table(lake, f"{namespace}.tidy", appends=1)
    small_file_table(lake, f"{namespace}.warm", appends=5)
    crowded, tidy, warm = (f"lake.{namespace}.{name}" for name in ("crowded", "tidy", "warm"))
    assert discover(defs, instance) == [crowded, tidy, warm]
    assert run_health_sync(defs, instance, [crowded, tidy, warm]).success

    healthy = _checks(ui, "table_health")["checks"]["healthy"]
    assert healthy["partitionDefinition"]["name"] == "iceberg_tables"
    expected = {"succeededPartitions": [tidy], "failedPartitions": [crowded, warm]}
    assert healthy["partitionStatuses"] == expected
    (failed,) = _executions(ui, crowded)
    assert failed["partition"] == crowded and failed["status"] == "FAILED"
    assert failed["evaluation"]["severity"] == "ERROR" and not failed["evaluation"]["success"]
    assert failed["evaluation"]["description"].startswith("critical: SMALL_FILES: ")
    (warned,) = _executions(ui, warm)
    assert warned["status"] == "FAILED" and warned["evaluation"]["severity"] == "WARN"
    assert warned["evaluation"]["description"].startswith("warning: SNAPSHOT_BACKLOG: ")
    (passed,) = _executions(ui, tidy)
    assert passed["status"] == "SUCCEEDED" and passed["evaluation"]["description"] == "healthy: no issue"

    # A scheduled sync writes nothing for unchanged tables: their results stand, none is added.
    assert run_health_sync(defs, instance, [crowded, tidy, warm], writes="changes").success
    assert [len(_executions(ui, table)) for table in (crowded, tidy, warm)] == [1, 1, 1]
    assert _checks(ui, "table_health")["checks"]["healthy"]["partitionStatuses"] == expected


def test_assets_show_owners_code_version_and_what_materializes_them(ui: Any) -> None:
    for asset in ("table_status", "table_health", "maintenance_recommendation", "maintained_table",
                  "fleet_summary"):
        node = _checks(ui, asset)
        assert node["owners"] == [{"team": "icepack"}] and node["opVersion"] == __version__, asset
    maintained = _checks(ui, "maintained_table")
    after = maintained["checks"]["healthy_after_maintenance"]
    assert after["partitionDefinition"]["name"] == "iceberg_tables"
    assert {"name": "maintenance_sensor"} in maintained["targetingInstigators"]
    selector = {"repositoryName": "__repository__", "repositoryLocationName": "test_location"}
    found = _query(ui, INSTIGATORS, selector=selector)
    instigators = found["schedulesOrError"]["results"] + found["sensorsOrError"]["results"]
    links = {
        i["name"]: {e["label"]: e["assetKey"]["path"] for e in i["metadataEntries"] if "assetKey" in e}
        for i in instigators
    }
    expected = {"materializes table_status": ["table_status"], "materializes table_health": ["table_health"]}
    assert links["health_sync_schedule"] == expected and links["iceberg_table_discovery"] == expected
    # ... and the assets name them back, since Dagster links instigators to assets only via asset jobs.
    syncs = ("health_sync_schedule", "iceberg_table_discovery", "post_maintenance_health_sensor")
    existing = {i["name"] for i in instigators} | {"maintenance_batch"}  # a job, the others instigators
    for asset, named in (("table_status", syncs), ("table_health", syncs),
                         ("maintained_table", ("maintenance_sensor", "maintenance_batch"))):
        entries = {e["label"]: e.get("mdStr") for e in _checks(ui, asset)["metadataEntries"]}
        assert all(name in entries["materialized by"] and name in existing for name in named), asset
