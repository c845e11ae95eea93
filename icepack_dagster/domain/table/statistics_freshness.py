"""Statistics freshness: for which snapshot the table's statistics (column NDV sketches in Puffin files,
`compute_table_stats`) and partition statistics (per-partition counts, `compute_partition_stats`) were
computed, and how far main has moved on since.

Engines plan with the statistics of the snapshot they read, or of its closest ancestor that has some
(Trino; Iceberg's incremental partition statistics start from that one too), so the file that counts is
the one registered for the newest snapshot of main's lineage. "Behind" is the commits on main after it
and the rows those commits wrote or deleted, as their snapshot summaries count them; compaction's
`replace` commits change no row and count as commits only. A statistics file whose snapshot is not on
main's lineage (a branch's, or an expired snapshot's) is no statistics for main.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel

LineageStep = tuple[int, int]
"""One snapshot of main's lineage, newest first: its id and the rows it wrote or deleted."""


class RegisteredStatistics(FrozenModel):
    """The statistics file registered for the newest snapshot of main's lineage that has one."""

    snapshot_id: int
    path: str
    commits_behind: int = Field(ge=0, description="Commits on main after its snapshot")
    rows_changed: int = Field(ge=0, description="Rows those commits wrote or deleted (summaries)")


class StatisticsFreshness(FrozenModel):
    """The table's statistics and partition statistics as main sees them; None where main has none."""

    partitioned: bool = Field(description="Some partition spec partitions (partition statistics need it)")
    table_statistics: RegisteredStatistics | None = None
    partition_statistics: RegisteredStatistics | None = None
    table_statistics_files: int = Field(default=0, ge=0, description="Registered, for any snapshot")
    partition_statistics_files: int = Field(default=0, ge=0, description="Registered, for any snapshot")


def newest_on_lineage(
    lineage: Sequence[LineageStep], files: Mapping[int, str]
) -> RegisteredStatistics | None:
    """The file of the newest snapshot on `lineage` (newest first) that has one, and how far behind
    the head of the lineage it is; None when no snapshot of the lineage has one."""
    changed = 0
    for behind, (snapshot_id, rows) in enumerate(lineage):
        if snapshot_id in files:
            return RegisteredStatistics(
                snapshot_id=snapshot_id, path=files[snapshot_id], commits_behind=behind, rows_changed=changed
            )
        changed += rows
    return None


def statistics_freshness(
    lineage: Sequence[LineageStep],
    table_files: Mapping[int, str],
    partition_files: Mapping[int, str],
    partitioned: bool,
) -> StatisticsFreshness:
    """Freshness of both kinds of statistics on main's `lineage` (newest first, empty without a snapshot),
    from the files the metadata registers per snapshot id."""
    return StatisticsFreshness(
        partitioned=partitioned,
        table_statistics=newest_on_lineage(lineage, table_files),
        partition_statistics=newest_on_lineage(lineage, partition_files),
        table_statistics_files=len(table_files),
        partition_statistics_files=len(partition_files),
    )
