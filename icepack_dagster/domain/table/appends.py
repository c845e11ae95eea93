"""What the commits on main since a known status did, from their snapshot summaries alone, and what that
leaves known of the fields only manifest entries give.

Iceberg writers record in each snapshot's summary what the commit added and removed and the table's
totals after it (key names as in PyIceberg's `table/snapshots.py` and Iceberg's `SnapshotSummary`). A run
of plain appends (operation `append`, nothing deleted or removed, no delete file added) leaves every file
of before in place, so the small files, partitions and size histogram of before are all still there, and
the files appended can only add to them: that gives the bounds (`CarriedBounds`). Anything else, or a
summary without the keys needed, is a reason to read the manifests instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.table.status import CarriedBounds, TableStatus

APPEND = "append"
# Each commit must say what it added.
PER_COMMIT = ("added-data-files", "added-records", "added-files-size")
# Any of these above zero: the commit removed or deleted something, or added a delete file.
NOT_AN_APPEND = (
    "deleted-data-files",
    "deleted-records",
    "removed-files-size",
    "added-delete-files",
    "added-position-delete-files",
    "added-equality-delete-files",
    "added-dvs",
    "added-position-deletes",
    "added-equality-deletes",
    "removed-delete-files",
    "removed-position-delete-files",
    "removed-equality-delete-files",
    "removed-dvs",
    "removed-position-deletes",
    "removed-equality-deletes",
    "deleted-duplicate-files",
)
TOTALS = (
    "total-data-files",
    "total-delete-files",
    "total-records",
    "total-files-size",
    "total-position-deletes",
    "total-equality-deletes",
)
CHANGED_PARTITIONS = "changed-partition-count"


class Appends(FrozenModel):
    """What a run of append commits added, summed over their summaries."""

    commits: int = Field(ge=0)
    data_files: int = Field(ge=0)
    records: int = Field(ge=0)
    files_size: int = Field(ge=0)
    partitions_touched: int = Field(ge=0, description="At most this many partitions got their first file")


class Totals(FrozenModel):
    """A snapshot summary's `total-*` fields: the table after the commit."""

    data_files: int = Field(ge=0)
    delete_files: int = Field(ge=0)
    records: int = Field(ge=0)
    files_size: int = Field(ge=0)
    position_deletes: int = Field(ge=0)
    equality_deletes: int = Field(ge=0)


def _count(summary: Mapping[str, str], name: str) -> int | None:
    value = summary.get(name)
    try:
        return int(value) if value is not None and int(value) >= 0 else None
    except ValueError:
        return None


def appends(summaries: Sequence[Mapping[str, str]]) -> Appends | str:
    """The appends of `summaries` (one per commit, `operation` included) summed, or why they are not a
    run of plain appends with every count needed."""
    files = records = size = touched = 0
    for index, summary in enumerate(summaries):
        what = f"commit {index + 1} of {len(summaries)} since the known status"
        if summary.get("operation") != APPEND:
            return f"{what} is a {summary.get('operation') or 'commit without operation'}, not an append"
        counts = {name: _count(summary, name) for name in PER_COMMIT}
        missing = [name for name, count in counts.items() if count is None]
        if missing:
            return f"{what} has no usable {', '.join(missing)} in its summary"
        removed = [name for name in NOT_AN_APPEND if (_count(summary, name) or 0) > 0]
        if removed:
            return f"{what} reports {', '.join(removed)}"
        added = counts["added-data-files"] or 0
        changed = _count(summary, CHANGED_PARTITIONS)
        files += added
        records += counts["added-records"] or 0
        size += counts["added-files-size"] or 0
        touched += added if changed is None else min(added, changed)
    return Appends(
        commits=len(summaries), data_files=files, records=records, files_size=size, partitions_touched=touched
    )


def totals(summary: Mapping[str, str]) -> Totals | str:
    """The summary's totals, or which are missing."""
    found = {name: _count(summary, name) for name in TOTALS}
    missing = [name for name, count in found.items() if count is None]
    if missing:
        return f"the current snapshot's summary has no usable {', '.join(missing)}"
    named = {name.removeprefix("total-").replace("-", "_"): count or 0 for name, count in found.items()}
    return Totals(**named)


def totals_disagree(known: TableStatus, appended: Appends, now: Totals) -> str | None:
    """Why the current totals are not the known status's exact figures plus the appends (a writer that
    kept no totals, or wrong ones), or None when every one agrees. Delete files must stay at none."""
    expected = {
        "total-data-files": (now.data_files, known.live_data_files + appended.data_files),
        "total-records": (now.records, known.total_records + appended.records),
        "total-files-size": (
            now.files_size, known.live_data_bytes + known.live_delete_bytes + appended.files_size
        ),
        "total-delete-files": (now.delete_files, 0),
        "total-position-deletes": (now.position_deletes, 0),
        "total-equality-deletes": (now.equality_deletes, 0),
    }
    wrong = [f"{name} {got} (expected {wanted})" for name, (got, wanted) in expected.items() if got != wanted]
    return f"the current snapshot's summary says {', '.join(wrong)}" if wrong else None


def carried_bounds(known: TableStatus, appended: Appends) -> CarriedBounds:
    """The bounds of the carried fields after `appended`, from the known status's own (exact values for a
    full status): nothing was removed, so the low ends stay; each appended file may be small, and may be
    the first of its partition."""
    prior = known.carried or CarriedBounds(
        data_files_added=0,
        small_files=(known.small_file_count, known.small_file_count),
        small_bytes=(known.small_file_bytes, known.small_file_bytes),
        partitions=(known.partition_count, known.partition_count),
    )
    small_bytes = min(appended.files_size, appended.data_files * (known.small_file_threshold_bytes - 1))
    return CarriedBounds(
        data_files_added=prior.data_files_added + appended.data_files,
        small_files=(prior.small_files[0], prior.small_files[1] + appended.data_files),
        small_bytes=(prior.small_bytes[0], prior.small_bytes[1] + small_bytes),
        partitions=(prior.partitions[0], prior.partitions[1] + appended.partitions_touched),
    )
