"""Run tags: the contract between the sensors, the queued run coordinator's limits in dagster.yaml,
and anyone filtering runs in the UI.

`icepack/table` (limit 1 per unique value) makes maintenance of one table exclusive; `icepack/kind`
separates maintenance from observation so status and health runs never wait behind maintenance.
"""

from __future__ import annotations

TABLE_TAG = "icepack/table"
KIND_TAG = "icepack/kind"
MAINTENANCE = "maintenance"
OBSERVATION = "observation"
HEALTH_EVENT_TAG = "icepack/health_event"
# Dagster's own run tags (public names in its docs): retries and partition ranges.
MAX_RETRIES_TAG = "dagster/max_retries"
RETRY_ON_FAILURE_TAG = "dagster/retry_on_asset_or_op_failure"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


def maintenance_tags(partition: str, health_storage_id: int | None = None) -> dict[str, str]:
    """Tags of one table's maintenance run. A crashed run worker is retried once; a failed maintenance
    is not (it is recorded in history and counts towards quarantine instead)."""
    tags = {
        TABLE_TAG: partition,
        KIND_TAG: MAINTENANCE,
        MAX_RETRIES_TAG: "1",
        RETRY_ON_FAILURE_TAG: "false",
    }
    if health_storage_id is not None:
        tags[HEALTH_EVENT_TAG] = str(health_storage_id)
    return tags


def observation_tags() -> dict[str, str]:
    """Tags of status/health/fleet runs: read-only, retried freely, never blocking maintenance."""
    return {KIND_TAG: OBSERVATION, MAX_RETRIES_TAG: "2"}


def range_tags(first: str, last: str) -> dict[str, str]:
    """One run over a contiguous range of table partitions (the health-sync batch)."""
    return {RANGE_START_TAG: first, RANGE_END_TAG: last}
