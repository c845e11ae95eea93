"""`compute_table_stats`: column statistics (NDV sketches of every primitive column, a Puffin file)
for the snapshot main is at, registered in the table's metadata so engines estimate joins and filters
better. Reads every row of the snapshot; changes no row and no snapshot. Planned by policy only
(`icepack.stats.table.*`, `planners/statistics.py`); the procedure exists from Iceberg 1.8.0.
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
    label="table statistics",
    setting="table",
    output_column="statistics_file",
    facts=lambda freshness: freshness.table_statistics,
    policy=lambda c: (c.policy.table_stats_commits_behind, c.policy.table_stats_rows_changed),
)


def plan(context: PlanningContext) -> ActionEstimate | str:
    return plan_statistics(KIND, context)


def read_outcome(rows: Sequence[Mapping[str, object]], options: Mapping[str, str]) -> ActionImpact:
    return read_statistics_outcome(KIND, rows)


def verify(output: Mapping[str, object], before: TableStatus | None, after: TableStatus | None) -> str | None:
    return verify_statistics(KIND, output, before, after)


DEFINITION: ActionDefinition = ActionDefinition(
    action=MaintenanceAction.COMPUTE_TABLE_STATS,
    plan=plan,
    options={},
    refused_options={"columns": "icepack computes every primitive column's statistics, as Iceberg does"},
    output_fields=(WRITTEN, None, None),
    read_outcome=read_outcome,
    sweep_cadence_hours=SWEPT,
    min_runtime=(1, 8, 0),
    verify=verify,
    commit_rules=STATISTICS_RULES,
)
