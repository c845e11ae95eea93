"""The `rewrite_position_delete_files` decision: which position delete files Iceberg will rewrite, and
the options that make it do so."""

from __future__ import annotations

from math import ceil

from icepack_dagster.domain.health import DELETE_FILE_BUILDUP, format_bytes
from icepack_dagster.domain.recommendation_plan import ActionPlan, Gain, whole_table_estimate
from icepack_dagster.domain.status import TableStatus


def plan_position_deletes(
    status: TableStatus, issues: set[str], target: int, data_rewrite_applies_deletes: bool
) -> ActionPlan | str:
    """The rewrite to run, or why there is none. After a data rewrite that applies the deletes
    (`data_rewrite_applies_deletes`), the position delete files left are dangling: all are rewritten."""
    s = status
    count = s.live_position_delete_files
    if count == 0:
        return "no position delete files"
    if s.format_version >= 3:
        return (
            f"{count} deletion vectors (format v3) are already one per data file; "
            "rewrite_data_files applies them"
        )
    if count < 2 and DELETE_FILE_BUILDUP not in issues:
        return "1 position delete file: nothing to compact"
    position_bytes = s.live_delete_bytes * count // max(s.live_delete_files, 1)
    if data_rewrite_applies_deletes:
        return ActionPlan(
            f"{count} position delete files become dangling once rewrite_data_files applies them; "
            "rewriting all of them drops any left",
            {"rewrite-all": "true"},
            Gain(bytes_to_rewrite=position_bytes),
        )
    merged = max(1, ceil(position_bytes / target))
    return ActionPlan(
        f"{count} position delete files ({format_bytes(position_bytes)}) would merge into about {merged}",
        {"min-input-files": "2"},
        Gain(files_removed=max(0, count - merged), bytes_to_rewrite=position_bytes),
        whole_table_estimate(count, merged, position_bytes),
    )
