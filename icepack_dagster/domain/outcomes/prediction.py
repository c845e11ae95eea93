"""An action's prediction next to what Iceberg did: files in, files out and bytes in, planned and done.
Field names are a public contract (`icepack maintain --json`, history, `icepack accuracy`)."""

from __future__ import annotations

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel

INEXACT_TOLERANCE = 0.5  # an inexact prediction is "near" within half of what was planned


class ActionFigures(FrozenModel):
    """Files in, files out and bytes in of one action: planned or done."""

    files_in: int = Field(ge=0)
    files_out: int | None = Field(default=None, ge=0)
    bytes_in: int | None = Field(default=None, ge=0)


class PredictedActual(FrozenModel):
    """One action's prediction next to what Iceberg did."""

    planned: ActionFigures
    done: ActionFigures | None = Field(description="None when the procedure reported nothing countable")
    exact: bool = Field(description="The prediction claimed exact file counts")

    @property
    def no_effect(self) -> bool:
        return self.done is not None and self.planned.files_in > 0 and self.done.files_in == 0

    @property
    def near(self) -> bool:
        """Files in as planned (exact), or within INEXACT_TOLERANCE of it (inexact)."""
        if self.done is None:
            return False
        if self.exact:
            return self.done.files_in == self.planned.files_in
        return abs(self.done.files_in - self.planned.files_in) <= INEXACT_TOLERANCE * self.planned.files_in

    def describe(self) -> str:
        done = "nothing countable" if self.done is None else f"{self.done.files_in} files"
        return f"planned {self.planned.files_in} files, Iceberg processed {done}"


class PredictionAccuracy(FrozenModel):
    """Planned against done, summed over the recorded runs of one action (one table or the fleet)."""

    action: str
    runs: int = Field(ge=0)
    no_effect_runs: int = Field(ge=0)
    planned_files_in: int = Field(ge=0)
    done_files_in: int = Field(ge=0)
    planned_files_out: int = Field(ge=0)
    done_files_out: int = Field(ge=0)
    planned_bytes_in: int = Field(ge=0)
    done_bytes_in: int = Field(ge=0)

    @property
    def files_ratio(self) -> float | None:
        """Done over planned input files: 1.0 is a perfect prediction."""
        return self.done_files_in / self.planned_files_in if self.planned_files_in else None
