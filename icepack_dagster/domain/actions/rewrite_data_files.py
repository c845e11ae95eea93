"""`rewrite_data_files`: compaction of small data files, and applying delete files to the data they
delete from. Its options, its plan (from the table's partition layout, Iceberg's own grouping predicted
by `planners/compaction.py`; without a layout, whole-table estimates) and how its output is counted.

- Sizes are passed explicitly (target, and min/max file size equal to the thresholds status counted
  with), so Iceberg picks exactly the files the prediction counts.
- `min-input-files` is the policy's, lowered to the fewest candidates of any partition that holds two
  or more when small files are an issue: a partition's three small files are worth one file.
- Partitions written within the policy's hot window are left out with a `where` filter, so compaction
  does not conflict with the writers still appending to them. After conflicts in a row with concurrent
  writers the window widens (`hot_window_minutes`): the next compaction narrows to colder partitions.
- When no group can shrink (one small file per partition), nothing is recommended, and the reason
  says so; health names the cause (FINE_PARTITIONING).
- Partial progress always runs with no failed commit tolerated (Iceberg would report a failed file
  group as success), so a failed file group fails the action.
- Delete files and position deletes left from format v2 are applied wherever they are
  (`delete-file-threshold` 1). Deletion vectors (format v3, one per data file) are applied where they
  delete the policy's share of rows (`delete-ratio-threshold`): a vector deleting a row or two is
  cheaper to keep than its data file is to rewrite.
- `max-files-to-rewrite` (the policy's per-run budget) bounds one run's work; files in are then the
  budget and the prediction inexact (`planners.compaction.within_budget`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from math import ceil

from icepack_dagster.domain.actions.definition import (
    ActionDefinition,
    ActionEstimate,
    Gain,
    PlanningContext,
    ProcedureOption,
)
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.option_values import REWRITE_OPTIONS, boolean, int_between, one_of, ratio
from icepack_dagster.domain.actions.planners.compaction import (
    RewritePrediction,
    RewriteSizes,
    hot_partitions,
    leave_out_filter,
    lone_small_files,
    predict_rewrite,
    settled_partitions,
    smallest_mergeable_group,
    within_budget,
)
from icepack_dagster.domain.health.judging import FINE_PARTITIONING, SMALL_FILES, format_bytes
from icepack_dagster.domain.outcomes.commit_invariants import rewrite_rules
from icepack_dagster.domain.policy.model import Policy
from icepack_dagster.domain.table.partition_layout import PartitionLayout
from icepack_dagster.domain.table.status import TableStatus

PARTIAL_PROGRESS = "partial-progress.enabled"
WIDENED_FROM_MINUTES = 60.0  # the least a hot window widens from after conflicts
MAX_HOT_MINUTES = 7 * 24 * 60.0
MAX_FAILED_COMMITS = "partial-progress.max-failed-commits"


def _where(value: str) -> str:
    """The planner's partition filter (leaving hot partitions out), one line."""
    if not value.strip() or "\n" in value or len(value) > 20_000:
        raise ValueError("must be one non-empty line of at most 20000 characters")
    return value


def _no_failed_commits(value: str) -> str:
    if value != "0":
        raise ValueError("expected 0: Iceberg reports up to this many failed commits as success")
    return value


def _no_failed_commit_tolerated(options: dict[str, str]) -> dict[str, str]:
    if options.get(PARTIAL_PROGRESS) == "true":
        options.setdefault(MAX_FAILED_COMMITS, "0")  # a failed file group then fails the action
    return options


_MAP_OPTIONS = REWRITE_OPTIONS | {
    "delete-file-threshold": int_between(0, 1_000_000),
    "delete-ratio-threshold": ratio,
    "use-starting-sequence-number": boolean,
    "remove-dangling-deletes": boolean,
    MAX_FAILED_COMMITS: _no_failed_commits,
}
OPTIONS = {
    "strategy": ProcedureOption(one_of("binpack", "sort"), "string"),
    "where": ProcedureOption(_where, "string"),
    **{name: ProcedureOption(check, "map") for name, check in _MAP_OPTIONS.items()},
    # a per-run budget; absent from 1.8.1's planner
    "max-files-to-rewrite": ProcedureOption(int_between(1, 1_000_000), "map", min_runtime=(1, 10, 0)),
}

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


def _nothing_to_merge(status: TableStatus, layout: PartitionLayout, settled: list[str]) -> str:
    if settled:
        return (
            f"the small files of {_listed(settled)} would be written back as just as many files: a "
            "rewrite cannot make them fewer"
        )
    lone = lone_small_files(layout)
    if lone:
        return (
            f"{lone} small data files are each alone in their partition: no rewrite group can merge "
            "them (see FINE_PARTITIONING)"
        )
    return f"no partition holds files a rewrite would merge ({status.small_file_count} small files)"


def applies_delete_files(status: TableStatus) -> bool:
    """Whether compaction applies every delete file (delete-file-threshold 1): delete files other than
    deletion vectors, position deletes of format v2 (also those a v3 upgrade left) and equality deletes."""
    return status.leftover_position_delete_files + status.live_equality_delete_files > 0


def hot_window_minutes(policy_minutes: float, conflicts: int) -> float:
    """The hot window after `conflicts` maintenances in a row conflicted with a concurrent writer: the
    policy's until the second, then doubling with each (from at least `WIDENED_FROM_MINUTES`, so a
    window of 0 widens too), up to `MAX_HOT_MINUTES`. A writer that keeps committing to partitions
    older than the policy's window is then left alone, and the colder partitions get compacted."""
    if conflicts < 2:
        return policy_minutes
    widened = max(policy_minutes, WIDENED_FROM_MINUTES) * 2 ** (conflicts - 1)
    return max(policy_minutes, min(widened, MAX_HOT_MINUTES))


def choose_compaction(
    status: TableStatus,
    policy: Policy,
    target: int,
    issues: frozenset[str],
    now: datetime,
    conflicts: int = 0,
) -> CompactionChoice | str:
    """The rewrite to run, with options and prediction, or why there is none; `conflicts` is the number
    of maintenances in a row that conflicted with a concurrent writer (they widen the hot window)."""
    layout = status.layout
    assert layout is not None  # the caller checks: without a layout there is nothing to plan
    apply_deletes = applies_delete_files(status)
    ratio = policy.delete_ratio_threshold if status.live_deletion_vectors and not apply_deletes else None
    small_files_issue = SMALL_FILES in issues
    if FINE_PARTITIONING in issues and not small_files_issue and not apply_deletes and ratio is None:
        return _nothing_to_merge(status, layout, [])
    if not small_files_issue and not apply_deletes and ratio is None:
        return (
            f"{status.small_files_known} of {status.live_data_files} data files are small, under the "
            "SMALL_FILES thresholds, and no delete files apply"
        )
    sizes = rewrite_sizes(status, layout, target)
    hot_minutes = hot_window_minutes(policy.hot_partition_minutes, conflicts)
    widened = hot_minutes != policy.hot_partition_minutes
    window = f"{hot_minutes:g} minutes" + (
        f" (widened from {policy.hot_partition_minutes:g} after {conflicts} maintenances in a row "
        "conflicted with a concurrent writer)" if widened else ""
    )
    since = int((now - timedelta(minutes=hot_minutes)).timestamp() * 1000)
    hot, hot_labels, predicates = hot_partitions(layout, since)
    if hot and not predicates:
        return (
            f"partitions {_listed(hot_labels)} were written in the last {window} "
            "and their partition transform cannot be left out by a filter; compaction waits "
            "until they are quiet"
        )
    settled, settled_labels, settled_predicates = settled_partitions(layout, sizes, hot)
    leave_out = hot | settled
    min_input = policy.min_input_files
    notes = []
    smallest = smallest_mergeable_group(layout, leave_out=leave_out)
    if small_files_issue and smallest is not None and smallest < min_input:
        notes.append(
            f"min-input-files lowered from {min_input} to {smallest} so partitions with {smallest} or more "
            "small files are merged"
        )
        min_input = smallest
    average = status.total_records / status.live_data_files if status.live_data_files else 0.0
    prediction = predict_rewrite(
        layout, sizes, min_input, apply_deletes=apply_deletes, leave_out=leave_out, delete_ratio=ratio,
        average_records=average,
    )
    if not prediction.groups and hot and smallest_mergeable_group(layout, leave_out=settled) is not None:
        return (
            f"every partition with files to merge was written in the last {window} "
            f"({_listed(hot_labels)}); compaction waits until they are quiet "
            "(icepack.compaction.hot-minutes)"
        )
    if not prediction.groups and ratio is not None:
        return (
            f"{_nothing_to_merge(status, layout, settled_labels)}; deletion vectors delete "
            f"{status.deleted_row_share:.1%} of the rows, in no partition {ratio:g} or more of its files' "
            "rows (delete-ratio-threshold, icepack.compaction.delete-ratio-threshold)"
        )
    if not prediction.groups:
        return _nothing_to_merge(status, layout, settled_labels)
    options = {**sizes.options(), "min-input-files": str(min_input)}
    if apply_deletes:
        options.update({"delete-file-threshold": "1", "remove-dangling-deletes": "true"})
    elif ratio is not None:
        options.update({"delete-ratio-threshold": repr(ratio), "remove-dangling-deletes": "true"})
    where = leave_out_filter(predicates + settled_predicates)
    if where is not None:
        options["where"] = where
    if hot_labels:
        notes.append(f"partitions written in the last {window} are left out: {_listed(hot_labels)}")
    if settled_labels:
        notes.append(
            "partitions whose small files a rewrite would write back as just as many files are left out: "
            f"{_listed(settled_labels)}"
        )
    groups = len(prediction.groups)
    reason = (
        f"{prediction.files_in} data files ({format_bytes(prediction.bytes_in)}) in {groups} "
        f"partition group{'s' if groups != 1 else ''} would be rewritten into about {prediction.files_out}"
    )
    if apply_deletes:
        reason += f"; {status.live_delete_files} delete files apply and are folded into the rewritten data"
    elif ratio is not None:
        reason += (
            f"; deletion vectors delete {status.deleted_row_share:.1%} of the rows: data files where they "
            f"delete {ratio:g} or more are rewritten without them (delete-ratio-threshold)"
        )
    prediction = prediction.model_copy(update={"excluded_hot_partitions": tuple(hot_labels)})
    budget = policy.max_files_per_run
    if budget is not None and prediction.files_in > budget:
        options["max-files-to-rewrite"] = str(budget)
        notes.append(
            f"at most {budget} files this run (icepack.compaction.max-files-per-run): Iceberg takes groups "
            "in its own order up to the budget, the rest waits for the next run"
        )
        prediction = within_budget(prediction, budget)
    return CompactionChoice("; ".join([reason, *notes]), options, prediction)


def plan(context: PlanningContext) -> ActionEstimate | str:
    """From the partition layout when status has one, else from whole-table estimates."""
    return _planned(context) if context.status.layout is not None else _estimated(context)


def _planned(context: PlanningContext) -> ActionEstimate | str:
    s = context.status
    choice = choose_compaction(
        s, context.policy, context.target_file_size_bytes, context.issues, context.now, context.conflicts
    )
    if isinstance(choice, str):
        return choice
    applies_deletes = applies_delete_files(s)
    p = choice.prediction
    deletes = s.live_delete_files if applies_deletes else 0
    gain = Gain(
        files_removed=max(0, p.files_in - p.files_out) + deletes,
        bytes_reclaimed=s.live_delete_bytes if applies_deletes else 0,
        bytes_to_rewrite=p.bytes_in,
    )
    return ActionEstimate(
        choice.reason,
        choice.options,
        gain,
        p,
        applies_deletes=applies_deletes,
        rewrites_data_files=True,
        leaves_out_hot_partitions=bool(p.excluded_hot_partitions),
    )


def _estimated(context: PlanningContext) -> ActionEstimate | str:
    """Without a partition layout (a status from before it was measured): whole-table estimates."""
    s, min_files, target = context.status, context.policy.min_input_files, context.target_file_size_bytes
    compact = SMALL_FILES in context.issues and s.small_file_count >= min_files
    if not compact and not s.live_delete_files:
        if SMALL_FILES in context.issues:
            return f"{s.small_file_count} small data files, fewer than min_input_files {min_files}"
        return (
            f"{s.small_files_known} of {s.live_data_files} data files are small, under the SMALL_FILES "
            "thresholds, and no delete files apply"
        )
    options = {"target-file-size-bytes": str(target), "min-input-files": str(min_files)}
    reasons, removed, rewrite, reclaimed = [], 0, 0, 0
    if compact:
        merged = max(1, ceil(s.small_file_bytes / target))
        removed, rewrite = max(0, s.small_file_count - merged), s.small_file_bytes
        reasons.append(
            f"{s.small_file_count} data files under {format_bytes(s.small_file_threshold_bytes)} "
            f"({format_bytes(s.small_file_bytes)}) would merge into about {merged}"
        )
    if s.live_delete_files:
        options.update({"delete-file-threshold": "1", "remove-dangling-deletes": "true"})
        removed += s.live_delete_files
        reclaimed = s.live_delete_bytes
        affected = min(s.live_data_bytes, ceil(s.live_delete_files * s.average_data_file_bytes))
        rewrite = max(rewrite, affected)  # assume each delete file touches about one data file
        reasons.append(
            f"{s.live_delete_files} delete files apply to the data; rewriting the affected data files "
            "applies them so reads stop merging them"
        )
    gain = Gain(files_removed=removed, bytes_reclaimed=reclaimed, bytes_to_rewrite=rewrite)
    return ActionEstimate(
        "; ".join(reasons),
        options,
        gain,
        applies_deletes=bool(s.live_delete_files),
        rewrites_data_files=True,
    )


DEFINITION: ActionDefinition = ActionDefinition(
    action=MaintenanceAction.REWRITE_DATA_FILES,
    plan=plan,
    options=OPTIONS,
    completed_options=_no_failed_commit_tolerated,
    output_fields=("rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count"),
    commit_rules=rewrite_rules("rewritten_data_files_count", "deleted-data-files", applies_deletes=True,
                               removes_data_files=True),
    counts_rewritten_bytes=True,
)
