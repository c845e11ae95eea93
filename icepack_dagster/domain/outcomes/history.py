"""Maintenance history as recommendation and quarantine need it: when each action last succeeded on a
table, how many maintenance runs in a row have failed, how many in a row conflicted with a concurrent
writer (never a failure), and whether a commit broke an invariant (the table is then paused until a
person releases it)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.frozen_model import FrozenModel


class RecentRewrite(FrozenModel):
    """One rewrite of the table's files by icepack in the circuit breakers' window (since the last
    release) that rewrote files: what the same-files breaker follows back through the snapshots."""

    action: MaintenanceAction
    planned_on: int | None = Field(description="The snapshot of main it was planned on (current at start)")
    finished_at: datetime
    files_rewritten: int = Field(ge=0)
    bytes_rewritten: int = Field(ge=0)


class TableHistory(FrozenModel):
    table: str
    last_succeeded: dict[MaintenanceAction, datetime] = Field(default_factory=dict)
    last_run_at: datetime | None = None
    consecutive_failures: int = Field(default=0, ge=0)
    last_error: str | None = None
    quarantined: bool = False
    quarantined_at: datetime | None = None
    refused: str | None = Field(
        default=None,
        description="Why the latest maintenance was refused by its Spark's Iceberg runtime, if it was",
    )
    no_effect_on: dict[MaintenanceAction, int] = Field(
        default_factory=dict,
        description="Per action whose latest run had no effect, the snapshot it was planned on",
    )
    consecutive_conflicts: int = Field(
        default=0, ge=0, description="Newest maintenances in a row that conflicted with a concurrent writer"
    )
    last_conflict_at: datetime | None = None
    last_conflict: str | None = None
    bytes_rewritten_24h: int = Field(
        default=0, ge=0,
        description="Bytes its rewrites read in the last 24 hours, since the last release (breakers)",
    )
    recent_rewrites: tuple[RecentRewrite, ...] = Field(
        default=(), description="Its rewrites in the last 24 hours that read bytes, newest first (breakers)"
    )
    violation: str | None = Field(
        default=None,
        description="The evidence of a commit that broke an invariant; the table is paused (quarantined) "
        "until a person releases it",
    )

    @staticmethod
    def empty(table: str) -> TableHistory:
        return TableHistory(table=table)
