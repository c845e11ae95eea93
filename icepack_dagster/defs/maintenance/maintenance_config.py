"""What a person may ask of one maintenance run, as run config of `maintained_table` (the launchpad and
Materialize's config editor show each field with its description). The sensor's runs use the defaults:
maintain what is recommended, within cadence and window."""

from __future__ import annotations

import dagster as dg
from pydantic import Field, field_validator

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction


class MaintenanceConfig(dg.Config):
    """Dry run, force and a subset of actions for one table's maintenance run."""

    dry_run: bool = Field(
        default=False,
        description="Show exactly what would run (each action and its Spark SQL) and change nothing: "
        "no Spark session, no table lease, nothing recorded in the maintenance history.",
    )
    force: bool = Field(
        default=False,
        description="Run even when the table's cadence has not elapsed or it is outside its maintenance "
        "window. Never overrides a safety gate: the orphan age floor, gc.enabled=false, a disabled "
        "action, or quarantine (release it first with the release_quarantine_job).",
    )
    actions: list[str] = Field(
        default_factory=list,
        description="Only these actions, of those recommended: "
        f"{', '.join(a.value for a in MaintenanceAction)}. Empty: every recommended action.",
    )

    @field_validator("actions")
    @classmethod
    def _known_actions(cls, actions: list[str]) -> list[str]:
        known = {a.value for a in MaintenanceAction}
        unknown = [a for a in actions if a not in known]
        if unknown:
            names = ", ".join(map(repr, unknown))
            raise ValueError(f"actions: {names} not one of {', '.join(sorted(known))}")
        return actions

    @property
    def only(self) -> list[MaintenanceAction] | None:
        """The engine's `only`: None for every recommended action."""
        return [MaintenanceAction(a) for a in self.actions] or None
