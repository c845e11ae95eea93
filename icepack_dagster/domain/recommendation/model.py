"""Recommendation: which maintenance actions one table should get now, in order, and why; and an
explicit reason for every action left out. Field names are a public contract (`icepack recommend
--json`, Dagster metadata, the maintenance sensor)."""

from __future__ import annotations

from pydantic import Field

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.planners.compaction import RewritePrediction
from icepack_dagster.domain.frozen_model import FrozenModel


class RecommendedAction(FrozenModel):
    action: MaintenanceAction
    reason: str
    priority: float = Field(ge=0, description="Higher runs first across tables")
    options: dict[str, str] = Field(default_factory=dict, description="Procedure options, as strings")
    prediction: RewritePrediction | None = Field(
        default=None, description="What Iceberg is expected to do (rewrite_data_files), per group"
    )


class SkippedAction(FrozenModel):
    action: MaintenanceAction
    reason: str


class Recommendation(FrozenModel):
    table: str
    actions: tuple[RecommendedAction, ...] = ()
    skipped: tuple[SkippedAction, ...] = ()
    priority: float = Field(default=0.0, ge=0, description="Table-level priority: expected gain over cost")
    expected_files_removed: int = Field(default=0, ge=0)
    expected_bytes_reclaimed: int = Field(default=0, ge=0)
    estimated_bytes_to_rewrite: int = Field(default=0, ge=0)

    @property
    def needs_work(self) -> bool:
        return bool(self.actions)
