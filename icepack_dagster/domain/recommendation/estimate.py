"""What the recommendation planner decides for one action before it becomes a `RecommendedAction`: the
reason, the procedure options, the expected gain (for priority) and the prediction the outcome is
checked against. Shared by the per-action planners (the other modules of this package)."""

from __future__ import annotations

from dataclasses import dataclass, field

from icepack_dagster.domain.actions.compaction_planner import RewritePrediction

FIXED_COST = 1.0  # per action: planning, a commit, a Spark job
COST_BYTES = 1024**3  # one cost unit per GiB read and rewritten
GAIN_BYTES = 128 * 1024**2  # reclaiming 128 MiB is worth as much as removing one file


@dataclass(frozen=True)
class Gain:
    files_removed: int = 0
    bytes_reclaimed: int = 0
    bytes_to_rewrite: int = 0


@dataclass(frozen=True)
class ActionEstimate:
    """What one action is expected to do and why, before it becomes a `RecommendedAction` (the SQL that
    runs it is another thing: `spark/prepared_actions.py`'s `PreparedAction`)."""

    reason: str
    options: dict[str, str] = field(default_factory=dict)
    gain: Gain = Gain()
    prediction: RewritePrediction | None = None


def whole_table_estimate(
    files_in: int, files_out: int | None = None, bytes_in: int | None = None
) -> RewritePrediction:
    """A whole-table estimate (no groups): the outcome check only tells "no effect" from "some"."""
    return RewritePrediction(files_in=files_in, files_out=files_out or 0, bytes_in=bytes_in or 0, exact=False)


def priority(gains: list[Gain], boost: float) -> float:
    """Expected gain over cost: files removed (plus bytes reclaimed, weighted) per unit of work."""
    gain = sum(g.files_removed + g.bytes_reclaimed / GAIN_BYTES for g in gains)
    cost = FIXED_COST * len(gains) + sum(g.bytes_to_rewrite for g in gains) / COST_BYTES
    return round(gain / cost * boost, 6) if gains else 0.0
