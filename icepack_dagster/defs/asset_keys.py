"""The asset keys, in one place, so sensors and assets that read each other's events agree."""

from __future__ import annotations

import dagster as dg

TABLE_STATUS = dg.AssetKey("table_status")
TABLE_HEALTH = dg.AssetKey("table_health")
MAINTENANCE_RECOMMENDATION = dg.AssetKey("maintenance_recommendation")
MAINTAINED_TABLE = dg.AssetKey("maintained_table")
FLEET_SUMMARY = dg.AssetKey("fleet_summary")
