"""Sensor cursors: typed, versioned JSON. A cursor from another version or in a broken shape is not
guessed at: the sensor starts from the beginning, and deterministic run keys keep that harmless."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypeVar

from pydantic import Field, ValidationError

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.health.model import HealthState
from icepack_dagster.domain.reports.alerts import StreakSeen


class _Cursor(FrozenModel):
    def encode(self) -> str:
        return self.model_dump_json()


class DiscoveryCursor(_Cursor):
    """How many times the partition set changed (names the first health-sync runs of new tables), and
    the newest partition whose first sync was requested: partitions after it in Dagster's order were
    added by a tick whose cursor was never saved (the daemon died in between) or by hand."""

    version: Literal[1] = 1
    generation: int = Field(default=0, ge=0)
    last_partition: str | None = Field(default=None, description="None: unknown, every partition is owed one")


class PendingTable(_Cursor):
    """A table whose latest health asks for maintenance and that has not been launched yet."""

    health_event: int = Field(ge=0, description="The number of the health write that made it pending")
    state: HealthState
    score: float = Field(ge=0, description="Urgency from the health issues; orders the candidates")


class MaintenanceCursor(_Cursor):
    """Where the maintenance sensor stopped reading the healths recorded in icepack's state database
    (their write numbers; version 1 counted Dagster storage ids), and what still waits."""

    version: Literal[2] = 2
    after_health_event: int = Field(default=0, ge=0)
    pending: dict[str, PendingTable] = Field(default_factory=dict)
    sweep_after: str | None = Field(
        default=None, description="The last healthy table checked for an orphan sweep (round robin)"
    )
    sweep_waiting: list[str] = Field(
        default_factory=list,
        description="Healthy tables due a sweep that waited (window, no slot): checked again every tick",
    )


class AlertCursor(_Cursor):
    """What the alert sensor has already told the operator: each failing or quarantined table's streak,
    and the failed health-sync runs alerted on (by the time Dagster last updated them)."""

    version: Literal[1] = 1
    streaks: dict[str, StreakSeen] = Field(default_factory=dict)
    runs_updated_after: datetime | None = Field(
        default=None, description="None: look back one day for failed health-sync runs"
    )
    alerted_runs: list[str] = Field(default_factory=list, description="The newest run ids alerted on")


C = TypeVar("C", bound=_Cursor)


def decode_cursor(model: type[C], text: str | None) -> C:
    """The cursor stored by a previous tick, or a fresh one when there is none or it does not parse."""
    if not text:
        return model()
    try:
        return model.model_validate_json(text)
    except ValidationError:
        return model()
