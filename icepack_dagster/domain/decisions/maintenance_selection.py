"""Which tables the maintenance sensor launches this tick: the pure part of its decision.

Candidates are ordered by urgency from their health (critical first, then by how far past the
thresholds they are); each is judged (launch, wait, drop) by the sensor; the launchable ones run in
order of their recommendation's priority (expected gain over cost) until the tick's slots run out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Literal

from pydantic import Field

from icepack_dagster.domain.decisions.sensor_cursors import PendingTable
from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.health.model import Severity, TableHealth

Verdict = Literal["launch", "wait", "drop"]


class Decision(FrozenModel):
    """One table's verdict this tick. `wait` keeps it pending (busy, cap, window); `drop` forgets it
    until its next health event (cadence, quarantine, nothing to do, disabled)."""

    partition: str
    verdict: Verdict
    reason: str
    health_storage_id: int = Field(ge=0)
    priority: float = Field(default=0.0, ge=0)
    quarantined: bool = Field(default=False, description="Quarantined tables never use the tick's budget")
    run_tags: dict[str, str] = Field(default_factory=dict, description="Sizing tags for a launched run")
    urgency: int = Field(default=0, ge=0, description="Its health's launch urgency: critical 2, warning 1, "
                         "0 for a healthy table's orphan sweep")


def needs_attention(health: TableHealth) -> bool:
    """Only warning and critical tables are maintained automatically; unknown never is."""
    return health.state.launch_urgency > 0


def health_score(health: TableHealth) -> float:
    """How far past its thresholds a table is: sum of value/threshold, critical issues counted twice."""
    score = 0.0
    for issue in health.issues:
        ratio = issue.value / issue.threshold if issue.threshold > 0 else 1.0
        score += max(ratio, 0.0) * (2.0 if issue.severity is Severity.CRITICAL else 1.0)
    return round(score, 6)


def order_candidates(pending: Mapping[str, PendingTable]) -> list[str]:
    """Most urgent first; ties by partition key, so the order is deterministic."""
    return sorted(pending, key=lambda p: (-pending[p].state.launch_urgency, -pending[p].score, p))


def sweep_page(
    partitions: Sequence[str], after: str | None, count: int, skip: Set[str]
) -> tuple[list[str], str | None]:
    """The next `count` partitions after `after` in partition order, wrapping around, without those in
    `skip`; and where the next page starts. Every table comes round once per pass over the fleet."""
    if not partitions or count <= 0:
        return [], after
    start = partitions.index(after) + 1 if after in partitions else 0
    rotated = [*partitions[start:], *partitions[:start]]
    page: list[str] = []
    last = after
    for partition in rotated[: count + len(skip)]:
        last = partition
        if partition not in skip:
            page.append(partition)
        if len(page) == count:
            break
    return page, last


def run_priority(decisions: Sequence[Decision]) -> int:
    """The `dagster/priority` of the run launching `decisions`: its most urgent table's launch urgency
    (critical 2, warning 1, an orphan sweep 0), so Dagster's queue dequeues critical tables first.
    Runs launched by Materialize or a backfill carry no priority tag: Dagster's default, 0."""
    return max((d.urgency for d in decisions), default=0)


def choose(decisions: Sequence[Decision], slots: int) -> tuple[list[Decision], list[Decision]]:
    """(to launch now, launchable but over this tick's slots), highest priority first."""
    launchable = [d for d in decisions if d.verdict == "launch"]
    launchable.sort(key=lambda d: (-d.priority, d.partition))
    return launchable[: max(slots, 0)], launchable[max(slots, 0) :]


def explain(decisions: Sequence[Decision], deferred: Sequence[Decision], limit: int = 8) -> str:
    """A SkipReason-sized account of why nothing (more) was launched."""
    parts = [f"{d.partition}: {d.reason}" for d in decisions if d.verdict != "launch"]
    parts += [f"{d.partition}: over this tick's budget (priority {d.priority:.3g})" for d in deferred]
    shown = "; ".join(parts[:limit])
    more = f" (and {len(parts) - limit} more)" if len(parts) > limit else ""
    return f"{shown}{more}" if parts else "no candidate"
