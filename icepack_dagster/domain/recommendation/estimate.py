"""The recommendation's priority: expected gain over cost, per action and for the whole table, from the
gains the actions' planners expect (`actions/definition.py`)."""

from __future__ import annotations

from icepack_dagster.domain.actions.definition import Gain

FIXED_COST = 1.0  # per action: planning, a commit, a Spark job
COST_BYTES = 1024**3  # one cost unit per GiB read and rewritten
GAIN_BYTES = 128 * 1024**2  # reclaiming 128 MiB is worth as much as removing one file


def priority(gains: list[Gain], boost: float) -> float:
    """Expected gain over cost: files removed (plus bytes reclaimed, weighted) per unit of work."""
    gain = sum(g.files_removed + g.bytes_reclaimed / GAIN_BYTES for g in gains)
    cost = FIXED_COST * len(gains) + sum(g.bytes_to_rewrite for g in gains) / COST_BYTES
    return round(gain / cost * boost, 6) if gains else 0.0
