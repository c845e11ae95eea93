"""Reading materializations back from the instance, the latest per partition, for what people see (a
check result names the materialization it judged, a run reads its own recommendation, the metrics
endpoint its latest fleet summary). No decision reads them: those read icepack's table facts
(store/table_facts.py). Public instance API only."""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg

_CHUNK = 500


def latest_per_partition(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, partitions: Iterable[str]
) -> dict[str, dg.EventLogRecord]:
    """The newest materialization record of each given partition that has one.

    Pages newest-first over only the partitions still missing, so a batch that was just materialized
    is read in one query per chunk of partitions.
    """
    wanted = sorted(set(partitions))
    records: dict[str, dg.EventLogRecord] = {}
    for start in range(0, len(wanted), _CHUNK):
        remaining = set(wanted[start : start + _CHUNK])
        before: int | None = None
        while remaining:
            page = instance.fetch_materializations(
                dg.AssetRecordsFilter(
                    asset_key=asset_key, asset_partitions=sorted(remaining), before_storage_id=before
                ),
                limit=len(remaining),
            ).records
            if not page:
                break
            for record in page:
                if record.partition_key in remaining:
                    records[record.partition_key] = record
                    remaining.discard(record.partition_key)
            before = page[-1].storage_id
    return records


def latest_of(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition: str
) -> dg.EventLogRecord | None:
    return latest_per_partition(instance, asset_key, [partition]).get(partition)


def latest(instance: dg.DagsterInstance, asset_key: dg.AssetKey) -> dg.EventLogRecord | None:
    """The newest materialization of an unpartitioned asset."""
    records = instance.fetch_materializations(asset_key, limit=1).records
    return records[0] if records else None


def metadata_of(record: dg.EventLogRecord) -> dict[str, dg.MetadataValue]:
    materialization = record.asset_materialization
    return dict(materialization.metadata) if materialization is not None else {}
