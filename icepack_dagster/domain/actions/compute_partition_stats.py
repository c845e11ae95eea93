"""`compute_partition_stats`: per-partition counts (rows, files, delete files, last update) in one
statistics file for the snapshot main is at, registered in the table's metadata. Reads manifests only,
and from Iceberg 1.10 on only those committed since the partition statistics it starts from; changes no
row and no snapshot. Iceberg refuses an unpartitioned table, so it is never planned on one. Planned by
policy only (`icepack.stats.partition.*`, `planners/statistics.py`); the procedure exists from Iceberg
1.10.0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from icepack_dagster.domain.actions.definition import ActionDefinition, ActionEstimate, PlanningContext
from icepack_dagster.domain.actions.maintenance_action import ActionImpact, MaintenanceAction
from icepack_dagster.domain.actions.planners.statistics import (
    STATISTICS_RULES,
    SWEPT,
    WRITTEN,
    StatisticsKind,
    plan_statistics,
    read_statistics_outcome,
    verify_statistics,
)
from icepack_dagster.domain.table.status import TableStatus

KIND = StatisticsKind(
    label="partition statistics",
    setting="partition",
    output_column="partition_statistics_file",
    facts=lambda freshness: freshness.partition_statistics,
    policy=lambda c: (c.policy.partition_stats_commits_behind, c.policy.partition_stats_rows_changed),
)


def plan(context: PlanningContext) -> ActionEstimate | str:
    """Never on an unpartitioned table (Iceberg: "Table must be partitioned")."""
    facts = context.status.statistics
    if facts is not None and not facts.partitioned:
        return "the table is not partitioned: partition statistics have nothing to count"
    return plan_statistics(KIND, context)


def read_outcome(rows: Sequence[Mapping[str, object]], options: Mapping[str, str]) -> ActionImpact:
    return read_statistics_outcome(KIND, rows)


def verify(output: Mapping[str, object], before: TableStatus | None, after: TableStatus | None) -> str | None:
    return verify_statistics(KIND, output, before, after)


DEFINITION: ActionDefinition = ActionDefinition(
    action=MaintenanceAction.COMPUTE_PARTITION_STATS,
    plan=plan,
    options={},
    output_fields=(WRITTEN, None, None),
    read_outcome=read_outcome,
    sweep_cadence_hours=SWEPT,
    min_runtime=(1, 10, 0),
    verify=verify,
    commit_rules=STATISTICS_RULES,
)
