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
- its last pair is older than the rewrite interval: `attention_hours` for a table in warning, critical
  or unknown, `rewrite_hours` (spread per table between half and all of it) otherwise.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from icepack_dagster.domain.health_model import HealthState, TableHealth

SyncWrites = Literal["changes", "all"]


@dataclass(frozen=True)
class RewritePolicy:
    """How long an unchanged table goes without a new materialization."""

    rewrite_hours: float = 24.0
    attention_hours: float = 1.0

    def interval_hours(self, partition: str, health: TableHealth) -> float:
        if health.state is not HealthState.HEALTHY:
            return self.attention_hours
        # Spread per table, so a fleet first written in one sync is not rewritten all in one sync.
        spread = zlib.crc32(partition.encode()) / 2**32
        return self.rewrite_hours * (0.5 + 0.5 * spread)


@dataclass(frozen=True)
class LastWrite:
    """What the table's latest `table_health` materialization said, and when it was written."""

    health: TableHealth | None  # None: unreadable (another codec version) or a record without health
    written_at: datetime


def health_signature(health: TableHealth) -> tuple[object, ...]:
    """What a reader acts on: the state, each issue's code and severity, and the error. Measured
    values (a snapshot age growing by the minute) are left out on purpose."""
    issues = tuple(sorted((issue.code, issue.severity.value) for issue in health.issues))
    return health.state.value, issues, health.error


def write_reason(
    partition: str,
    health: TableHealth,
    status_read: bool,
    last: LastWrite | None,
    now: datetime,
    policy: RewritePolicy,
) -> str | None:
    """Why this table's pair is written in a scheduled sync, or None to write nothing."""
    if last is None or last.health is None:
        return "first materialization"
    if status_read:
        return "metadata changed"
    if health_signature(health) != health_signature(last.health):
        return "health changed"
    hours = (now - last.written_at).total_seconds() / 3600
    if hours >= policy.interval_hours(partition, health):
        return f"periodic rewrite (last {hours:.1f} h ago)"
    return None
