"""Which launchable tables share a maintenance run.

A maintenance run pays a fixed cost before its first Spark statement: a run worker process, the
definitions import, a JVM and a Spark session (and on Kubernetes a pod). For a small table that cost
is most of the run. So tables of the smallest sizing tier are maintained in batches: one run, one
Spark session, up to `batch_size` tables one after the other, each still its own materialization,
lease and failure record. Larger tables keep a run (and a Spark) of their own size.

The sensor's budget stays counted in runs (`maintenance_runs_per_tick`, `max_maintenance_in_flight`):
taking tables in priority order, a small table joins the open batch or opens one, a larger table
takes a run of its own, until the run slots are used; the rest wait for a later tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from icepack_dagster.domain.decisions.maintenance_selection import Decision
from icepack_dagster.domain.sizing.run_sizing import SizingPolicy
from icepack_dagster.domain.table.status import TableStatus


@dataclass(frozen=True)
class PlannedRun:
    """One maintenance run: a batch of small tables, or one table of a larger tier."""

    decisions: tuple[Decision, ...]
    batch: bool


def is_small(status: TableStatus, sizing: SizingPolicy) -> bool:
    """Whether the table falls in the smallest sizing tier (batched)."""
    return sizing.tier_for(status.live_data_bytes) is sizing.tiers[0]


def plan_runs(
    launchable: Sequence[Decision], small: frozenset[str], run_slots: int, batch_size: int
) -> tuple[list[PlannedRun], list[Decision]]:
    """(runs to launch, tables over this tick's run slots), from `launchable` in priority order;
    `small` names the tables of the smallest tier."""
    runs: list[list[Decision]] = []
    batched: list[bool] = []
    open_batch: int | None = None
    deferred: list[Decision] = []
    for decision in launchable:
        if decision.partition in small and batch_size > 1:
            if open_batch is not None and len(runs[open_batch]) < batch_size:
                runs[open_batch].append(decision)
                continue
            if len(runs) < run_slots:
                open_batch = len(runs)
                runs.append([decision])
                batched.append(True)
                continue
        elif len(runs) < run_slots:
            runs.append([decision])
            batched.append(False)
            continue
        deferred.append(decision)
    return [PlannedRun(tuple(r), b) for r, b in zip(runs, batched, strict=True)], deferred
