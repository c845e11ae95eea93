"""Maintenance actions: the list of them in their canonical order, and what running one reports.
What each action is (options, plan, guards, outcome) is its own module's, named as its value;
`registry.py` loads them in this order."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.outcomes.prediction import PredictedActual


class MaintenanceAction(StrEnum):
    """The actions, each one Iceberg Spark procedure. Declaration order is execution order: rewrite
    data first (it also drops applied deletes), then deletes, then manifests, then compute statistics
    for the snapshot the rewrites leave (expiry and orphan removal never move it), then expire what the
    rewrites replaced, and only then look for orphans. This is the registry's list: each value
    names its module in this package, whose `DEFINITION` `registry.py` loads, so a new action is its
    module and one line here."""

    REWRITE_DATA_FILES = "rewrite_data_files"
    REWRITE_POSITION_DELETE_FILES = "rewrite_position_delete_files"
    REWRITE_MANIFESTS = "rewrite_manifests"
    COMPUTE_TABLE_STATS = "compute_table_stats"
    COMPUTE_PARTITION_STATS = "compute_partition_stats"
    EXPIRE_SNAPSHOTS = "expire_snapshots"
    REMOVE_ORPHAN_FILES = "remove_orphan_files"


ACTION_ORDER: tuple[MaintenanceAction, ...] = tuple(MaintenanceAction)

# no_effect: ran without error but did nothing where the prediction planned work (neither success nor
# failure: never counts towards quarantine, and is not recommended again until the table changes).
# deferred: not run because the catalog or storage kept failing transiently, or another maintenance
# holds the table; retried later, never a failure.
# conflict: a concurrent writer's commit made Iceberg refuse this action's commit; nothing committed,
# never a failure (`domain/recommendation/commit_cadence.py` decides when to try again).
# violated: the action committed, and its commit changed what the action may not change
# (`domain/outcomes/commit_invariants.py`); the table is paused until a person releases it.
# refused: the Spark's Iceberg runtime cannot run it safely on this table (not a failure of the table:
# a person must give it another Spark); it never ran.
ActionStatus = Literal[
    "succeeded", "no_effect", "failed", "skipped", "dry_run", "deferred", "conflict", "violated", "refused"
]


class ActionImpact(FrozenModel):
    """What an action changed, from the procedure's output and from status before and after."""

    procedure_output: dict[str, int | float | str | None] = Field(default_factory=dict)
    data_files_before: int | None = None
    data_files_after: int | None = None
    delete_files_before: int | None = None
    delete_files_after: int | None = None
    data_bytes_before: int | None = None
    data_bytes_after: int | None = None
    manifests_before: int | None = None
    manifests_after: int | None = None
    snapshots_before: int | None = None
    snapshots_after: int | None = None
    orphan_files_removed: int | None = None


class ActionResult(FrozenModel):
    """One action on one table: what ran (the exact SQL), how it ended, and its impact."""

    action: MaintenanceAction
    status: ActionStatus
    statements: tuple[str, ...] = Field(description="Spark SQL statements, in order (SETs then CALL)")
    impact: ActionImpact = Field(default_factory=ActionImpact)
    duration_seconds: float = Field(ge=0)
    error: str | None = None
    reason: str | None = Field(default=None, description="Why the action was skipped, when it was")
    predicted_actual: PredictedActual | None = Field(
        default=None, description="The recommendation's prediction next to what the procedure reported"
    )
