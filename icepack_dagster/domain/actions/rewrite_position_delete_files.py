"""`rewrite_position_delete_files`: merging small position delete files. Its options (the rewrite options
without partial progress, which would hide a failed commit), its plan (which position delete files
Iceberg will rewrite, per partition, as `planners/position_deletes.py` predicts) and how its output is
counted.

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
- Format v3: deletion vectors are told from position delete files by the manifests (file format
  Puffin), never by the table's format version: a table upgraded with `'format-version'='3'` keeps
  every v2 delete file it had until something rewrites it. Iceberg (1.9 and later) rewrites position
  deletes of a v3 table into deletion vectors, one per data file, and does nothing once none is left.
  Its size rules still pick which files a rewrite takes, and a lone delete file is never picked, so
  `rewrite-all` is passed: every position delete of the table is rewritten, deletion vectors of the
  same partitions included. Files in are therefore every live position delete file; files out one
  per data file they point at, which the manifests summarised do not tell (one per file in is
  assumed: file-scoped deletes, as Spark writes them, point at one data file each), so the
  prediction is inexact. When `rewrite_data_files` applies every delete file first (no partition
  left out), nothing is left to convert; when it leaves hot partitions out, what it leaves is
  converted.
"""

from __future__ import annotations

from math import ceil
from typing import Any

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
from icepack_dagster.domain.actions.planners.compaction import (
    GroupPrediction,
    RewritePrediction,
    RewriteSizes,
    partition_label,
)
from icepack_dagster.domain.actions.planners.position_deletes import (
    coerced_partition,
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
from icepack_dagster.domain.table.partition_layout import PartitionLayout
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
        # a data rewrite leaving hot partitions out leaves their delete files too
        return _conversion_to_vectors(s, context.deletes_applied and not context.hot_partitions_left_out)
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


REWRITE_ALL = {"rewrite-all": "true"}


def _predicted_conversion(layout: PartitionLayout) -> RewritePrediction | None:
    """Every partition's position delete files and deletion vectors, rewritten into one deletion vector
    per file; None when the layout was measured before position deletes were counted per partition."""
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for found in layout.candidates:
        if found.position_delete_files is None or found.position_delete_bytes is None:
            return None
        files = found.position_delete_files + found.deletion_vectors
        if not files:
            continue
        label = partition_label(layout, found.spec_id, found.values)
        group = groups.setdefault(coerced_partition(layout, found), [label, 0, 0])
        group[1] += files
        group[2] += found.position_delete_bytes
    predicted = tuple(
        GroupPrediction(partition=label, files_in=files, bytes_in=size, files_out=files)
        for label, files, size in sorted(groups.values())
    )
    return RewritePrediction(
        groups=predicted,
        files_in=sum(g.files_in for g in predicted),
        bytes_in=sum(g.bytes_in for g in predicted),
        files_out=sum(g.files_out for g in predicted),
        exact=False,
    )


def _conversion_to_vectors(status: TableStatus, data_rewrite_applies_all: bool) -> ActionEstimate | str:
    """The conversion of leftover v2 position delete files into deletion vectors, or why there is none."""
    s = status
    leftover, vectors = s.leftover_position_delete_files, s.live_deletion_vectors
    if leftover == 0:
        return (
            f"{vectors} deletion vectors (Puffin, as the manifests list them) are already one per data "
            "file and no position delete file is left from format v2; rewrite_data_files applies them"
        )
    if data_rewrite_applies_all:
        return (
            f"{leftover} position delete files left from format v2 are applied by rewrite_data_files "
            "first, which rewrites every data file they point at; none is left to convert"
        )
    reason = (
        f"{leftover} position delete files left from format v2 (Parquet, Avro or ORC, not deletion "
        f"vectors) would become deletion vectors, one per data file; every position delete file is "
        f"rewritten ({vectors} deletion vectors besides)"
    )
    position_bytes = s.live_delete_bytes * leftover // max(s.live_delete_files, 1)
    gain = Gain(bytes_to_rewrite=position_bytes)
    prediction = _predicted_conversion(s.layout) if s.layout is not None else None
    if prediction is None:  # a status measured before position deletes were counted per partition
        estimate = whole_table_estimate(s.live_position_delete_files)
        return ActionEstimate(reason, dict(REWRITE_ALL), gain, estimate)
    return ActionEstimate(
        f"{reason}: {prediction.files_in} files ({format_bytes(prediction.bytes_in)} of position deletes) "
        f"in {len(prediction.groups)} partition groups",
        dict(REWRITE_ALL),
        gain,
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
