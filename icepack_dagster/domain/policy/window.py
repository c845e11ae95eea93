"""Maintenance windows: days of the week and whole UTC hours when maintenance may start."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, field_validator, model_serializer, model_validator

from icepack_dagster.domain.frozen_model import FrozenModel

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_HOURS = re.compile(r"^(?P<start>[0-9]{1,2})(:00)?-(?P<end>[0-9]{1,2})(:00)?$", re.ASCII)


def _day(name: str) -> int:
    lowered = name.lower()
    for index, (short, full) in enumerate(zip(_DAYS, _FULL_DAYS, strict=True)):
        if lowered in (short, full):
            return index
    raise ValueError(f"{name!r} is not a day of the week ({', '.join(_DAYS)})")


def _window_fields(text: str) -> dict[str, Any]:
    """`[days] [HH-HH]`: days like `sat,sun` or `mon-fri` (default every day), hours default 00-24."""
    tokens = text.split()
    if not tokens or len(tokens) > 2:
        raise ValueError(f"{text!r} is not a window: write days and hours, e.g. 'mon-fri 22-06' or 'sat,sun'")
    fields: dict[str, Any] = {}
    if hours := _HOURS.match(tokens[-1]):
        fields.update(start_hour=int(hours["start"]), end_hour=int(hours["end"]))
        tokens.pop()
    elif any(c.isdigit() for c in tokens[-1]):
        raise ValueError(f"{tokens[-1]!r} is not an hour range: write whole UTC hours like 22-06 or 00-24")
    if tokens:
        days: set[int] = set()
        for part in tokens[0].split(","):
            first, dash, last = part.partition("-")
            start = _day(first)
            span = (_day(last) - start) % 7 if dash else 0
            days.update((start + step) % 7 for step in range(span + 1))
        fields["days"] = tuple(sorted(days))
    return fields


class MaintenanceWindow(FrozenModel):
    """Days of the week and whole hours [start, end) in UTC, written `mon-fri 22-06` or `sat,sun`.

    An end before the start wraps past midnight: the window opens on each listed day at the start hour
    and closes the next morning, so `fri 22-06` includes Saturday 03:00 but not Friday 03:00.
    """

    days: tuple[Annotated[int, Field(ge=0, le=6)], ...] = Field(
        default=tuple(range(7)), min_length=1, description="0 = Monday ... 6 = Sunday"
    )
    start_hour: int = Field(default=0, ge=0, le=23)
    end_hour: int = Field(default=24, ge=1, le=24)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        return _window_fields(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _not_empty(self) -> MaintenanceWindow:
        if self.start_hour == self.end_hour:
            raise ValueError("start and end hour are equal, so the window is empty; write 00-24 for all day")
        return self

    @field_validator("days")
    @classmethod
    def _sorted_days(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(set(value)))

    @model_serializer(mode="plain")
    def _as_text(self) -> str:
        return self.text

    @property
    def text(self) -> str:
        """The window as written in properties and the policy file; parsing it gives the same window."""
        runs: list[list[int]] = []
        for day in self.days:
            if runs and runs[-1][-1] == day - 1:
                runs[-1].append(day)
            else:
                runs.append([day])
        days = ",".join(
            f"{_DAYS[r[0]]}-{_DAYS[r[-1]]}" if len(r) > 2 else ",".join(_DAYS[d] for d in r) for r in runs
        )
        return f"{days} {self.start_hour:02d}-{self.end_hour:02d}"

    def contains(self, moment: datetime) -> bool:
        """Whether a UTC moment falls inside the window."""
        day, hour = moment.weekday(), moment.hour
        if self.start_hour < self.end_hour:
            return day in self.days and self.start_hour <= hour < self.end_hour
        return (day in self.days and hour >= self.start_hour) or (
            (day - 1) % 7 in self.days and hour < self.end_hour
        )


def parse_windows(text: str) -> tuple[MaintenanceWindow, ...]:
    """Windows separated by `;` (the form of the `icepack.window` property)."""
    parts = [part.strip() for part in text.split(";")]
    if not any(parts):
        raise ValueError("no window given: write e.g. 'mon-fri 22-06' or 'sat,sun'; leave unset for any time")
    return tuple(MaintenanceWindow.model_validate(part) for part in parts if part)
