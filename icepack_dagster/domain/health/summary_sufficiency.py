"""When a status from snapshot summaries may stand in for reading the manifests: when its health, and
what maintenance would be planned on it, are what a full read would give.

A summary status (`domain/table/appends.py`) is exact in everything but the fields only manifest entries
give, which it carries with bounds (`CarriedBounds`). Every health check other than SMALL_FILES and
FINE_PARTITIONING reads exact fields only; those two count small files, which grow monotonically with
the small-file count (a file alone in its partition is a small file too). So the status is judged at
both ends: as carried (the low ends) and with every appended file counted small and mergeable (the high
ends, no layout). When neither end has a small-file issue, no true count in between has one, and the
health is exactly a full read's. Delete files are never carried (a summary status has none), and the
manifest counts are read from the manifest list, so the plans that read the layout (compaction, delete
rewrites) or the manifests (manifest rewrites) see what a full read would show them.
"""

from __future__ import annotations

from icepack_dagster.domain.health.judging import (
    DELETE_FILE_BUILDUP,
    FINE_PARTITIONING,
    SMALL_FILES,
    assess_health,
)
from icepack_dagster.domain.health.model import TableHealth
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.status import TableStatus

# Issues whose judgement or plan needs manifest entries: the summary status never stands in for them.
NEEDS_MANIFESTS = frozenset({SMALL_FILES, FINE_PARTITIONING, DELETE_FILE_BUILDUP})


def _verdict(health: TableHealth) -> tuple[str, tuple[tuple[str, str], ...]]:
    return health.state.value, tuple((issue.code, issue.severity.value) for issue in health.issues)


def summary_falls_short(status: TableStatus, thresholds: HealthThresholds) -> str | None:
    """Why the summary status `status` cannot stand in for a full read, or None when it can."""
    carried = status.carried
    if carried is None:
        raise ValueError(f"table {status.table}: summary_falls_short needs a summary status")
    highest = status.model_copy(
        update={
            "small_file_count": carried.small_files[1],
            "small_file_bytes": carried.small_bytes[1],
            "partition_count": carried.partitions[1],
            "layout": None,  # every small file counted mergeable: the most SMALL_FILES can find
        }
    )
    ends = {
        "as carried": assess_health(status, thresholds),
        "at the high bounds": assess_health(highest, thresholds),
    }
    for end, health in ends.items():
        found = sorted({issue.code for issue in health.issues} & NEEDS_MANIFESTS)
        if found:
            return f"{', '.join(found)} {end}: the manifests must be read to judge and plan it"
    if _verdict(ends["as carried"]) != _verdict(ends["at the high bounds"]):
        return "the health differs between the ends of the carried bounds"
    return None
