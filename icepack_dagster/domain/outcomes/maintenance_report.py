"""What one maintenance of one table did: its action results and an overall outcome that the CLI's
exit code and the platform's quarantine both read."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from icepack_dagster.domain.actions.maintenance_action import ActionResult
from icepack_dagster.domain.frozen_model import FrozenModel

Outcome = Literal[
    "nothing_to_do", "succeeded", "no_effect", "failed", "dry_run", "table_gone", "deferred", "refused",
    "conflict", "violated",
]


class MaintenanceReport(FrozenModel):
    table: str
    snapshot_id: int | None = Field(
        default=None, description="The table's current snapshot when its actions were planned"
    )
    started_at: datetime
    finished_at: datetime
    results: tuple[ActionResult, ...] = ()
    table_gone: bool = Field(
        default=False, description="The table was not in its catalog when maintenance began: nothing ran"
    )
    interrupted: str | None = Field(
        default=None,
        description="Why the maintenance ended before it could report its actions (its run worker died)",
    )

    @property
    def outcome(self) -> Outcome:
        if self.table_gone:
            return "table_gone"
        if self.interrupted is not None:
            return "failed"
        statuses = {r.status for r in self.results}
        if "violated" in statuses:  # a commit broke an invariant: worse than any failure
            return "violated"
        if "failed" in statuses:
            return "failed"
        if "refused" in statuses:  # the Spark's runtime cannot do it: a person must act, no table fault
            return "refused"
        if "conflict" in statuses:  # another writer committed meanwhile: try again later, no failure
            return "conflict"
        if "deferred" in statuses:
            return "deferred"
        if "no_effect" in statuses:  # did not do what it said: not a success, and not a failure either
            return "no_effect"
        if "succeeded" in statuses:
            return "succeeded"
        if "dry_run" in statuses:
            return "dry_run"
        return "nothing_to_do"

    @property
    def first_error(self) -> str | None:
        return self.interrupted or next((r.error for r in self.results if r.error), None)

    @property
    def refusal(self) -> str | None:
        """Why the Spark's Iceberg runtime refused an action (table, runtime, minimum); None if none was."""
        return next((r.reason for r in self.results if r.status == "refused"), None)

    @property
    def conflict(self) -> str | None:
        """Why the maintenance conflicted with a concurrent writer, when it did."""
        return next((f"{r.action}: {r.reason}" for r in self.results if r.status == "conflict"), None)
