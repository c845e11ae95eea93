"""The maintenance actions, one module each, in execution order (the declaration order of
`MaintenanceAction`): the one list that recommendation, SQL rendering, the runner, outcome comparison,
the engine and the Dagster layer iterate over. A new action is its module, its name in
`MaintenanceAction`, one line here, and its tests."""

from __future__ import annotations

from icepack_dagster.domain.actions import (
    compute_partition_stats,
    compute_table_stats,
    expire_snapshots,
    remove_orphan_files,
    rewrite_data_files,
    rewrite_manifests,
    rewrite_position_delete_files,
)
from icepack_dagster.domain.actions.definition import ActionDefinition
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction

ACTIONS: tuple[ActionDefinition, ...] = (
    rewrite_data_files.DEFINITION,
    rewrite_position_delete_files.DEFINITION,
    rewrite_manifests.DEFINITION,
    compute_table_stats.DEFINITION,
    compute_partition_stats.DEFINITION,
    expire_snapshots.DEFINITION,
    remove_orphan_files.DEFINITION,
)
_BY_ACTION = {spec.action: spec for spec in ACTIONS}


def definition(action: MaintenanceAction) -> ActionDefinition:
    """Everything `action` is (`definition.py`)."""
    return _BY_ACTION[action]
