"""`rewrite_position_delete_files`: merging small position delete files. Its options (the rewrite options
without partial progress, which would hide a failed commit), its plan (which position delete files
Iceberg will rewrite, per partition, as `position_delete_planner` predicts) and how its output is counted.

- Sizes are passed explicitly (the delete target, `write.delete.target-file-size-bytes` as Iceberg
  reads it, and Iceberg's default ratios of it), so Iceberg picks the files the prediction counts.
- Iceberg writes the rewritten deletes at the table's `write.delete.granularity`: with `partition`, one
  file per group (as predicted); with `file` (Iceberg's default) one file per data file the deletes
  point at, so a rewrite merges only delete files of the same data file, which Spark's own writers
  already keep as one. On such a table no merge is recommended (rewrite_data_files applies the
  deletes instead), and the reason says how to opt in.
- `min-input-files` is 2: a partition's two delete files are worth one. A partition with a single
  position delete file has nothing to merge it with; when every partition is like that, nothing is
  recommended (Iceberg would rewrite nothing).
- After a data rewrite that applies the deletes, the position delete files left are dangling: all are
  rewritten (`rewrite-all`), and what is left then is unknown, so there is no prediction.
"""

from __future__ import annotations

from math import ceil

from icepack_dagster.domain.actions.compaction_planner import RewriteSizes
from icepack_dagster.domain.actions.definition import (
    ActionDefinition,
    ActionEstimate,
    Gain,
    PlanningContext,
    ProcedureOption,
    whole_table_estimate,
)
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.option_values import REWRITE_OPTIONS
from icepack_dagster.domain.actions.position_delete_planner import (
    delete_rewrite_sizes,
    predict_position_delete_rewrite,
)
from icepack_dagster.domain.health.judging import DELETE_FILE_BUILDUP, format_bytes
from icepack_dagster.domain.outcomes.commit_invariants import rewrite_rules
from icepack_dagster.domain.table.iceberg_properties import (
    DELETE_GRANULARITY,
    DELETE_TARGET_FILE_SIZE_BYTES,
    delete_granularity,
    iceberg_value,
)
from icepack_dagster.domain.table.status import TableStatus

_HIDES_FAILED_COMMITS = (
    "with partial progress Iceberg drops a file group whose commit fails and still reports success; "
    "icepack reports outcomes honestly, so it rewrites position deletes in one commit"
)
OPTIONS = {
    name: ProcedureOption(check, "map")
    for name, check in REWRITE_OPTIONS.items()
    if not name.startswith("partial-progress.")
}
REFUSED_OPTIONS = {
    "partial-progress.enabled": _HIDES_FAILED_COMMITS,
    "partial-progress.max-commits": _HIDES_FAILED_COMMITS,
}

MIN_INPUT_FILES = 2


def plan(context: PlanningContext) -> ActionEstimate | str:
    """The rewrite to run, or why there is none (a whole-table estimate for a status measured before
    position deletes were counted per partition)."""
    s, issues = context.status, context.issues
    count = s.live_position_delete_files
    if count == 0:
        return "no position delete files"
    if s.format_version >= 3:
        return (
            f"{count} deletion vectors (format v3) are already one per data file; "
            "rewrite_data_files applies them"
        )
    position_bytes = s.live_delete_bytes * count // max(s.live_delete_files, 1)
    if context.deletes_applied:
        return ActionEstimate(
            f"{count} position delete files become dangling once rewrite_data_files applies them; "
            "rewriting all of them drops any left",
            {"rewrite-all": "true"},
            Gain(bytes_to_rewrite=position_bytes),
        )
    if count < 2 and DELETE_FILE_BUILDUP not in issues:
        return "1 position delete file: nothing to compact"
    granularity = delete_granularity(s.properties)
    if granularity is None:
        return (
            f"table property {DELETE_GRANULARITY}={s.properties.get(DELETE_GRANULARITY)!r} cannot be read by "
            "Iceberg (it takes 'file' or 'partition'), so rewriting the position delete files would fail"
        )
    if granularity != "partition":
        return (
            f"{count} position delete files, but {DELETE_GRANULARITY} is '{granularity}': a rewrite writes "
            "one delete file per data file they point at, so it cannot merge them (rewrite_data_files "
            f"applies them; set {DELETE_GRANULARITY}=partition to have them merged per partition)"
        )
    sizes = delete_rewrite_sizes(int(iceberg_value(s.properties, DELETE_TARGET_FILE_SIZE_BYTES).value))
    planned = _planned(s, sizes)
    if planned is not None:
        return planned
    merged = max(1, ceil(position_bytes / sizes.target))
    return ActionEstimate(
        f"{count} position delete files ({format_bytes(position_bytes)}) would merge into about {merged}",
        {"min-input-files": str(MIN_INPUT_FILES)},
        Gain(files_removed=max(0, count - merged), bytes_to_rewrite=position_bytes),
        whole_table_estimate(count, merged, position_bytes),
    )


def _planned(status: TableStatus, sizes: RewriteSizes) -> ActionEstimate | str | None:
    """From the partition layout: Iceberg's own grouping, predicted; None without per-partition counts."""
    if status.layout is None:
        return None
    prediction = predict_position_delete_rewrite(status.layout, sizes, MIN_INPUT_FILES)
    if prediction is None:
        return None
    count = status.live_position_delete_files
    if not prediction.groups:
        return (
            f"{count} position delete file{'s are' if count != 1 else ' is'} each alone in its partition "
            "or already well sized: no rewrite group can merge them"
        )
    groups = len(prediction.groups)
    return ActionEstimate(
        f"{prediction.files_in} position delete files ({format_bytes(prediction.bytes_in)}) in {groups} "
        f"partition group{'s' if groups != 1 else ''} would be rewritten into about {prediction.files_out}",
        {**sizes.options(), "min-input-files": str(MIN_INPUT_FILES)},
        Gain(
            files_removed=max(0, prediction.files_in - prediction.files_out),
            bytes_to_rewrite=prediction.bytes_in,
        ),
        prediction,
    )


DEFINITION: ActionDefinition = ActionDefinition(
    action=MaintenanceAction.REWRITE_POSITION_DELETE_FILES,
    plan=plan,
    options=OPTIONS,
    refused_options=REFUSED_OPTIONS,
    output_fields=("rewritten_delete_files_count", "added_delete_files_count", "rewritten_bytes_count"),
    commit_rules=rewrite_rules("rewritten_delete_files_count", "removed-delete-files", applies_deletes=False,
                               removes_data_files=False),
    counts_rewritten_bytes=True,
)
