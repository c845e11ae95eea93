"""What Iceberg's `rewrite_position_delete_files` will rewrite, predicted per partition from the
manifest summaries status reads (no Spark, no extra metadata pass).

It follows `RewritePositionDeletesGroupPlanner` and `SizeBasedFileRewritePlanner` of Iceberg 1.10:
- position delete files (not deletion vectors) are grouped by partition, each file's partition coerced
  to the table's combined partition type (a field its spec lacks is null): unlike data files, files of
  earlier specs keep their own partition. Here the fields are matched by name, Iceberg matches them by
  field id: the two differ only for a field dropped and re-added under the same name;
- a file is a candidate when it is below min-file-size-bytes or above max-file-size-bytes (`rewrite-all`
  makes every file one); the sizes default to 0.75 and 1.8 times `write.delete.target-file-size-bytes`;
- a group is rewritten when it has more than one file and at least min-input-files, or more than one
  file and more bytes than the target, or more bytes than max-file-size-bytes;
- a rewritten group writes `expected_output_files(bytes)` files.
Only counts and bytes per partition are known, not each file's size: a group whose files add up to
less than min-file-size-bytes has every file a candidate (exact); a larger group may hold a file inside
the size range that Iceberg leaves alone, and is counted whole (inexact). Iceberg drops the deletes of
data files that no longer exist while rewriting, so fewer files may come out than predicted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icepack_dagster.domain.actions.planners.compaction import (
    GroupPrediction,
    RewritePrediction,
    RewriteSizes,
    expected_output_files,
    partition_label,
)
from icepack_dagster.domain.table.partition_layout import PartitionCandidates, PartitionLayout

MIN_FILE_RATIO = 0.75  # Iceberg's min-file-size-bytes default, of the target
MAX_FILE_RATIO = 1.8  # Iceberg's max-file-size-bytes default, of the target


def delete_rewrite_sizes(target: int) -> RewriteSizes:
    """Iceberg's default size options for a delete-file target: passed explicitly, so the rewrite uses
    exactly the thresholds the prediction assumed."""
    return RewriteSizes(target, int(target * MIN_FILE_RATIO), int(target * MAX_FILE_RATIO))


@dataclass
class _Group:
    label: str
    files: int = 0
    bytes: int = 0


def coerced_partition(layout: PartitionLayout, found: PartitionCandidates) -> tuple[Any, ...]:
    """The partition as a value per field name of every spec (null where this spec has no such field):
    how Iceberg groups position delete files."""
    names = list(dict.fromkeys(f.name for spec in layout.specs for f in spec.fields))
    own = {f.name: v for f, v in zip(layout.spec(found.spec_id).fields, found.values, strict=True)}
    return tuple(own.get(name) for name in names)


def position_delete_groups(layout: PartitionLayout) -> list[_Group] | None:
    """Position delete files and bytes per coerced partition; None when the layout was measured before
    position delete files were counted per partition."""
    groups: dict[tuple[Any, ...], _Group] = {}
    for found in layout.candidates:
        files, size = found.position_delete_files, found.position_delete_bytes
        if files is None or size is None:
            return None
        if not files:
            continue
        label = partition_label(layout, found.spec_id, found.values)
        group = groups.setdefault(coerced_partition(layout, found), _Group(label))
        group.files += files
        group.bytes += size
    return sorted(groups.values(), key=lambda g: g.label)


def _rewritten(group: _Group, sizes: RewriteSizes, min_input_files: int) -> bool:
    several = group.files > 1
    return (
        (several and group.files >= min_input_files)
        or (several and group.bytes > sizes.target)
        or group.bytes > sizes.maximum
    )


def predict_position_delete_rewrite(
    layout: PartitionLayout, sizes: RewriteSizes, min_input_files: int
) -> RewritePrediction | None:
    """The groups `rewrite_position_delete_files` with these options rewrites; None when the layout
    cannot tell (no per-partition position delete counts)."""
    groups = position_delete_groups(layout)
    if groups is None:
        return None
    predicted = [
        GroupPrediction(
            partition=g.label,
            files_in=g.files,
            bytes_in=g.bytes,
            files_out=expected_output_files(g.bytes, sizes) if g.bytes else 1,
        )
        for g in groups
        if _rewritten(g, sizes, min_input_files)
    ]
    return RewritePrediction(
        groups=tuple(predicted),
        files_in=sum(g.files_in for g in predicted),
        bytes_in=sum(g.bytes_in for g in predicted),
        files_out=sum(g.files_out for g in predicted),
        exact=all(g.bytes_in < sizes.minimum for g in predicted),
    )
