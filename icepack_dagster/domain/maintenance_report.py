"""What one maintenance of one table did: its action results and an overall outcome that the CLI's
exit code and the platform's quarantine both read."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from icepack_dagster.domain.actions import ActionResult

Outcome = Literal["nothing_to_do", "succeeded", "failed", "dry_run"]


class MaintenanceReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    table: str
    started_at: datetime
    finished_at: datetime
    results: tuple[ActionResult, ...] = ()

    @property
    def outcome(self) -> Outcome:
        statuses = {r.status for r in self.results}
        if "failed" in statuses:
            return "failed"
        if "succeeded" in statuses:
            return "succeeded"
        if "dry_run" in statuses:
            return "dry_run"
        return "nothing_to_do"

    @property
    def first_error(self) -> str | None:
        return next((r.error for r in self.results if r.error), None)
