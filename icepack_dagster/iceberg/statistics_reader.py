"""The statistics facts of one table from its metadata file alone: the `statistics` and
`partition-statistics` lists (which snapshot each file was computed for) and main's lineage with the rows
each of its commits wrote or deleted (snapshot summaries). Freshness is judged in
`domain/table/statistics_freshness.py`."""

from __future__ import annotations

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot, ancestors_of

from icepack_dagster.domain.table.statistics_freshness import (
    LineageStep,
    StatisticsFreshness,
    statistics_freshness,
)

# What a commit's summary says it wrote or deleted, rows and delete positions alike.
_CHANGED_ROWS = ("added-records", "deleted-records", "added-position-deletes", "added-equality-deletes")


def _summary_count(snapshot: Snapshot, name: str) -> int:
    value = snapshot.summary[name] if snapshot.summary is not None else None
    try:
        return max(0, int(value)) if value is not None else 0
    except ValueError:  # a summary is informational: a writer's odd value counts as nothing
        return 0


def _rows_changed(snapshot: Snapshot) -> int:
    """Rows the commit changed; a `replace` (compaction, a delete-file rewrite) changes none."""
    if snapshot.summary is not None and snapshot.summary.operation == Operation.REPLACE:
        return 0
    return sum(_summary_count(snapshot, name) for name in _CHANGED_ROWS)


def main_lineage(metadata: TableMetadata) -> list[LineageStep]:
    """Main's snapshots, newest first, back to the oldest one still retained."""
    current = metadata.snapshot_by_id(metadata.current_snapshot_id) if metadata.current_snapshot_id else None
    return [(snapshot.snapshot_id, _rows_changed(snapshot)) for snapshot in ancestors_of(current, metadata)]


def read_statistics_freshness(metadata: TableMetadata) -> StatisticsFreshness:
    return statistics_freshness(
        main_lineage(metadata),
        {stats.snapshot_id: stats.statistics_path for stats in metadata.statistics},
        {stats.snapshot_id: stats.statistics_path for stats in metadata.partition_statistics},
        partitioned=any(not spec.is_unpartitioned() for spec in metadata.partition_specs),
    )
