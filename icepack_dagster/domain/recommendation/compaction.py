"""The `rewrite_data_files` decision from the table's partition layout: the options that make the
planned rewrite happen, and the rewrite Iceberg is expected to do with them (`compaction_planner`).

- Sizes are passed explicitly (target, and min/max file size equal to the thresholds status counted
  with), so Iceberg picks exactly the files the prediction counts.
- `min-input-files` is the policy's, lowered to the fewest candidates of any partition that holds two
  or more when small files are an issue: a partition's three small files are worth one file.
- Partitions written within the policy's hot window are left out with a `where` filter, so compaction
  does not conflict with the writers still appending to them.
- When no group can shrink (one small file per partition), nothing is recommended, and the reason
  says so; health names the cause (FINE_PARTITIONING).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from icepack_dagster.domain.actions.compaction_planner import (
    RewritePrediction,
    RewriteSizes,
    hot_filter,
    hot_partitions,
    lone_small_files,
    predict_rewrite,
    smallest_mergeable_group,
)
from icepack_dagster.domain.health.judging import FINE_PARTITIONING, SMALL_FILES, format_bytes
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.table.partition_layout import PartitionLayout
from icepack_dagster.domain.table.status import TableStatus

MAX_LISTED = 5


@dataclass(frozen=True)
class CompactionChoice:
    reason: str
    options: dict[str, str] = field(default_factory=dict)
    prediction: RewritePrediction = RewritePrediction()


def rewrite_sizes(status: TableStatus, layout: PartitionLayout, target: int) -> RewriteSizes:
    """The thresholds status counted with, when Iceberg accepts them (min < target < max); else
    Iceberg's own ratios of the target."""
    minimum, maximum = status.small_file_threshold_bytes, layout.large_file_threshold_bytes
    if minimum < target < maximum:
        return RewriteSizes(target, minimum, maximum)
    return RewriteSizes(target, int(target * 0.75), int(target * 1.8))


def _listed(labels: list[str]) -> str:
    shown = ", ".join(labels[:MAX_LISTED])
    return shown + (f" and {len(labels) - MAX_LISTED} more" if len(labels) > MAX_LISTED else "")


def _nothing_to_merge(status: TableStatus, layout: PartitionLayout) -> str:
    lone = lone_small_files(layout)
    if lone:
        return (
            f"{lone} small data files are each alone in their partition: no rewrite group can merge "
            "them (see FINE_PARTITIONING)"
        )
    return f"no partition holds files a rewrite would merge ({status.small_file_count} small files)"


def choose_compaction(
    status: TableStatus, policy: Policy, target: int, issues: set[str], now: datetime
) -> CompactionChoice | str:
    """The rewrite to run, with options and prediction, or why there is none."""
    layout = status.layout
    assert layout is not None  # the caller checks: without a layout there is nothing to plan
    apply_deletes = status.live_delete_files > 0
    small_files_issue = SMALL_FILES in issues
    if FINE_PARTITIONING in issues and not small_files_issue and not apply_deletes:
        return _nothing_to_merge(status, layout)
    if not small_files_issue and not apply_deletes:
        return (
            f"{status.small_file_count} of {status.live_data_files} data files are small, under the "
            "SMALL_FILES thresholds, and no delete files apply"
        )
    sizes = rewrite_sizes(status, layout, target)
    since = int((now - timedelta(minutes=policy.hot_partition_minutes)).timestamp() * 1000)
    hot, hot_labels, predicates = hot_partitions(layout, since)
    if hot and not predicates:
        return (
            f"partitions {_listed(hot_labels)} were written in the last {policy.hot_partition_minutes:g} "
            "minutes and their partition transform cannot be left out by a filter; compaction waits "
            "until they are quiet"
        )
    min_input = policy.min_input_files
    notes = []
    smallest = smallest_mergeable_group(layout, leave_out=hot)
    if small_files_issue and smallest is not None and smallest < min_input:
        notes.append(
            f"min-input-files lowered from {min_input} to {smallest} so partitions with {smallest} or more "
            "small files are merged"
        )
        min_input = smallest
    prediction = predict_rewrite(layout, sizes, min_input, apply_deletes=apply_deletes, leave_out=hot)
    if not prediction.groups and hot and smallest_mergeable_group(layout) is not None:
        return (
            f"every partition with files to merge was written in the last {policy.hot_partition_minutes:g} "
            f"minutes ({_listed(hot_labels)}); compaction waits until they are quiet "
            "(icepack.compaction.hot-minutes)"
        )
    if not prediction.groups:
        return _nothing_to_merge(status, layout)
    options = {**sizes.options(), "min-input-files": str(min_input)}
    if apply_deletes:
        options.update({"delete-file-threshold": "1", "remove-dangling-deletes": "true"})
    where = hot_filter(predicates)
    if where is not None:
        options["where"] = where
        notes.append(
            f"partitions written in the last {policy.hot_partition_minutes:g} minutes are left out: "
            f"{_listed(hot_labels)}"
        )
    groups = len(prediction.groups)
    reason = (
        f"{prediction.files_in} data files ({format_bytes(prediction.bytes_in)}) in {groups} "
        f"partition group{'s' if groups != 1 else ''} would be rewritten into about {prediction.files_out}"
    )
    if apply_deletes:
        reason += f"; {status.live_delete_files} delete files apply and are folded into the rewritten data"
    prediction = prediction.model_copy(update={"excluded_hot_partitions": tuple(hot_labels)})
    return CompactionChoice("; ".join([reason, *notes]), options, prediction)
