"""Which tables a health sync writes materializations for.

Every event costs a database commit in Dagster's storage, and a fleet of 10,000 tables refreshed every
15 minutes cannot afford two per table per sync. Most tables do not change between syncs: their
metadata file is the same, so their status is the same (only snapshot ages move) and so, almost always,
is their health. A scheduled sync therefore writes a table's `table_status` and `table_health` pair only
when something a reader would act on changed, plus a periodic rewrite so every table's latest
materialization stays recent (and the maintenance sensor reconsiders tables that need attention).

Written when any of these holds (scheduled syncs; other runs write every table):
- the table has no materialization yet, or its last one is unreadable;
- its metadata file changed (the status was read again);
- its health changed: state, issue codes and severities, or the status error;
- whether it needs a person changed (`needs_operator`: quarantined, released, a failure streak begun);
- its periodic rewrite is due: once every `attention_hours` for a table in warning, critical or
  unknown, every `rewrite_hours` otherwise, each table at its own moment of the interval.

Why each table has its own moment: a fleet written in one sync (its first, or an outage that turned
every table unknown) would otherwise be rewritten all in one sync an interval later, and again every
interval after that (1,000 tables in one run rewritten together every hour). A table's rewrite moments
are `(k + phase) * interval` hours since the Unix epoch, and it is due when one of them passed since
half an interval after its last write (so a table written out of phase, for a change, waits for its
next moment rather than being rewritten minutes later). Phases are spread evenly over the tables of
one run that share an interval, in the order of a hash of their keys: a run's rewrites are then split
evenly between the syncs of an interval (at most a quarter of the run per sync with the 15-minute
schedule and the hourly attention interval), where a phase hashed from each key alone lets chance put
26-28% of 1,000 tables in one sync. A table joining or leaving the group moves the others' phases by
1/n of the interval at most.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from icepack_dagster.domain.health.model import HealthState, TableHealth

SyncWrites = Literal["changes", "all"]


@dataclass(frozen=True)
class RewriteSlot:
    """One table's periodic rewrite: every `interval_hours`, at `phase` (0 to 1) of the interval."""

    interval_hours: float
    phase: float

    def due(self, last_written_at: datetime, now: datetime) -> bool:
        """Whether one of this table's rewrite moments passed since half an interval after its last
        write (a write out of phase waits for the next moment, not for the one just after it)."""
        earliest = _epoch_hours(last_written_at) + self.interval_hours / 2
        return self._moments_before(_epoch_hours(now)) > self._moments_before(earliest)

    def _moments_before(self, hours: float) -> int:
        return math.floor(hours / self.interval_hours - self.phase)


@dataclass(frozen=True)
class RewritePolicy:
    """How long an unchanged table goes without a new materialization."""

    rewrite_hours: float = 24.0
    attention_hours: float = 1.0

    def interval_hours(self, health: TableHealth) -> float:
        return self.rewrite_hours if health.state is HealthState.HEALTHY else self.attention_hours

    def slots(self, healths: Mapping[str, TableHealth]) -> dict[str, RewriteSlot]:
        """Each table's rewrite slot: phases spread evenly over the tables sharing an interval, in the
        order of their keys' hash (stable as tables come and go, unlike an order by name)."""
        groups: dict[float, list[str]] = {}
        for partition, health in healths.items():
            groups.setdefault(self.interval_hours(health), []).append(partition)
        slots = {}
        for interval, partitions in groups.items():
            ordered = sorted(partitions, key=lambda p: (zlib.crc32(p.encode()), p))
            for rank, partition in enumerate(ordered):
                slots[partition] = RewriteSlot(interval, (rank + 0.5) / len(ordered))
        return slots


@dataclass(frozen=True)
class LastWrite:
    """What the table's latest `table_health` materialization said, and when it was written."""

    health: TableHealth | None  # None: unreadable (another codec version) or a record without health
    written_at: datetime
    operator_verdict: str | None = None  # the needs_operator reason recorded, "no"; None: not recorded


def health_signature(health: TableHealth) -> tuple[object, ...]:
    """What a reader acts on: the state, each issue's code and severity, and the error. Measured
    values (a snapshot age growing by the minute) are left out on purpose."""
    issues = tuple(sorted((issue.code, issue.severity.value) for issue in health.issues))
    return health.state.value, issues, health.error


def write_reason(
    health: TableHealth,
    status_read: bool,
    last: LastWrite | None,
    now: datetime,
    slot: RewriteSlot,
    operator_verdict: str = "no",
) -> str | None:
    """Why this table's pair is written in a scheduled sync, or None to write nothing.
    `operator_verdict` is the table's needs_operator reason now, or "no"."""
    if last is None or last.health is None:
        return "first materialization"
    if status_read:
        return "metadata changed"
    if health_signature(health) != health_signature(last.health):
        return "health changed"
    if (last.operator_verdict or "no") != operator_verdict:
        return f"needs a person changed ({last.operator_verdict or 'no'} -> {operator_verdict})"
    if slot.due(last.written_at, now):
        hours = (now - last.written_at).total_seconds() / 3600
        return f"periodic rewrite (last {hours:.1f} h ago)"
    return None


def _epoch_hours(moment: datetime) -> float:
    return moment.timestamp() / 3600
