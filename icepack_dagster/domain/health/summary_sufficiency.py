"""When a status from snapshot summaries may stand in for reading the manifests: when its health, and
what maintenance would be planned on it, are what a full read would give.

A summary status (`domain/table/appends.py`) is exact in everything but the fields only manifest entries
give, which it carries with bounds (`CarriedBounds`). Every health check other than SMALL_FILES and
FINE_PARTITIONING reads exact fields only, so it judges the summary status as a full read would. Those two
count small files: SMALL_FILES the small files that share a partition, FINE_PARTITIONING those alone in
theirs, each at most the small-file count, against the same minimum count and warning ratio, and both
only grow with it. So the status is judged at the high ends of its bounds with every small file counted
mergeable (no layout): when no small-file issue shows there, none shows at any count within the bounds,
the carried values (the low ends) included, and the health at both ends is the health of a full read.
Delete files are never carried (a summary status has none), and the manifest counts are read from the
manifest list, so the plans that read the layout (compaction, delete rewrites: they need a small-file
issue or delete files) or the manifests (manifest rewrites) see what a full read would show them.
"""

from __future__ import annotations

from icepack_dagster.domain.health.judging import (
    DELETE_FILE_BUILDUP,
    FINE_PARTITIONING,
    SMALL_FILES,
    assess_health,
)
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.status import TableStatus

# Issues whose judgement or plan needs manifest entries: the summary status never stands in for them.
NEEDS_MANIFESTS = frozenset({SMALL_FILES, FINE_PARTITIONING, DELETE_FILE_BUILDUP})


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
    found = sorted({issue.code for issue in assess_health(highest, thresholds).issues} & NEEDS_MANIFESTS)
    if found:
        return f"{', '.join(found)} at the high bounds: the manifests must be read to judge and plan it"
    return None
