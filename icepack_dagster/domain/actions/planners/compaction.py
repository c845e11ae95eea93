"""What Iceberg's bin-pack rewrite will do to a table, predicted from the manifest summaries status reads.

It follows `BinPackRewriteFilePlanner` and `SizeBasedFileRewritePlanner` of Iceberg 1.10:
- files are grouped by partition; a file written under another spec than the table's current one joins
  the group whose partition values are all null (Iceberg cannot place its rows in one current partition);
- a data file is a candidate when it is below min-file-size-bytes or above max-file-size-bytes (or,
  with delete-file-threshold, when deletes apply to it); `rewrite-all` makes every file a candidate;
- a group of candidates is rewritten when it has more than one file and at least min-input-files, or
  more than one file and more bytes than the target, or more bytes than max-file-size-bytes, or a file
  with too many deletes;
- a rewritten group writes `expected_output_files(bytes)` files (Iceberg's own rounding).
- `max-files-to-rewrite` takes groups until a budget is spent (`within_budget`: which, it cannot tell).
Groups larger than max-file-group-size-bytes (100 GiB) are split by Iceberg; this counts their bytes
as one group. Which data files deletes apply to is not in the summaries, so a group with delete files
is counted with one data file per delete file besides its small and large ones; and a group of earlier
specs' files is written out under the current spec, one file per current partition its rows fall in,
which the summaries cannot tell (its `files_out` is the least). Either makes the prediction inexact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from math import ceil
from typing import Any

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.table.partition_filter import display_value, excluding, partition_predicate
from icepack_dagster.domain.table.partition_layout import PartitionCandidates, PartitionLayout

OTHER_SPECS = "files of earlier partition specs"


class GroupPrediction(FrozenModel):
    """One rewrite group: a partition (or the files of earlier specs) and what Iceberg will do to it."""

    partition: str
    files_in: int = Field(ge=0)
    bytes_in: int = Field(ge=0)
    files_out: int = Field(ge=0)


class RewritePrediction(FrozenModel):
    """The groups a rewrite is expected to rewrite, and the sums; `exact` is false when deletes make
    the number of data files they touch unknowable from the summaries."""

    groups: tuple[GroupPrediction, ...] = ()
    files_in: int = Field(default=0, ge=0)
    bytes_in: int = Field(default=0, ge=0)
    files_out: int = Field(default=0, ge=0)
    exact: bool = True
    excluded_hot_partitions: tuple[str, ...] = ()


@dataclass(frozen=True)
class RewriteSizes:
    """Iceberg's size options of one rewrite: target, min-file-size and max-file-size bytes."""

    target: int
    minimum: int
    maximum: int

    def options(self) -> dict[str, str]:
        return {
            "target-file-size-bytes": str(self.target),
            "min-file-size-bytes": str(self.minimum),
            "max-file-size-bytes": str(self.maximum),
        }


@dataclass
class _Group:
    label: str
    keys: list[tuple[int, tuple[Any, ...]]] = field(default_factory=list)
    earlier_specs: bool = False
    files: int = 0
    small: int = 0
    bytes: int = 0
    deletes: int = 0
    vectors: int = 0
    deleted_rows: int = 0

    @property
    def exact(self) -> bool:
        return self.deletes == 0

    def deleted_share(self, average_records: float) -> float:
        """The share of rows the group's deletion vectors delete in the data files they point at, each
        file taken at the table's average record count (which file holds how many rows is not known)."""
        if not self.vectors or average_records <= 0:
            return 0.0
        return self.deleted_rows / (self.vectors * average_records)


def expected_output_files(size: int, sizes: RewriteSizes) -> int:
    """Iceberg's `expectedOutputFiles`: whole target-size files, keeping a remainder above the minimum
    or when spreading it would make files more than 10% too large."""
    if size < sizes.target:
        return 1
    with_remainder, without = ceil(size / sizes.target), size // sizes.target
    write_max = sizes.target + (sizes.maximum - sizes.target) // 2
    if size % sizes.target > sizes.minimum:
        return with_remainder
    if size / without < min(1.1 * sizes.target, write_max):
        return without
    return with_remainder


def partition_label(layout: PartitionLayout, spec_id: int, values: tuple[Any, ...]) -> str:
    fields = layout.spec(spec_id).fields
    if not fields:
        return "unpartitioned"
    return "/".join(display_value(field, value) for field, value in zip(fields, values, strict=True))


def _groups(layout: PartitionLayout, candidates: Iterable[PartitionCandidates]) -> list[_Group]:
    """Candidates grouped the way Iceberg groups them: by current-spec partition, earlier specs together
    with the all-null partition."""
    current = layout.spec(layout.current_spec_id).fields
    empty = (None,) * len(current)
    groups: dict[tuple[Any, ...], _Group] = {}
    for found in candidates:
        values = found.values if found.spec_id == layout.current_spec_id else empty
        label = (
            partition_label(layout, layout.current_spec_id, values) if values != empty or not current else ""
        )
        group = groups.setdefault(values, _Group(label or OTHER_SPECS))
        group.keys.append((found.spec_id, found.values))
        group.earlier_specs = group.earlier_specs or found.spec_id != layout.current_spec_id
        group.files += found.small_files + found.large_files
        group.small += found.small_files
        group.bytes += found.small_bytes + found.large_bytes
        group.deletes += found.delete_files
        group.vectors += found.deletion_vectors
        group.deleted_rows += found.deleted_rows
    return list(groups.values())


def _rewritten(group: _Group, sizes: RewriteSizes, min_input_files: int, apply_deletes: bool) -> bool:
    if apply_deletes and group.deletes:
        return True
    several = group.files > 1
    return (
        (several and group.files >= min_input_files)
        or (several and group.bytes > sizes.target)
        or (group.bytes > sizes.maximum)
    )


def predict_rewrite(
    layout: PartitionLayout,
    sizes: RewriteSizes,
    min_input_files: int,
    *,
    apply_deletes: bool = False,
    leave_out: frozenset[tuple[int, tuple[Any, ...]]] = frozenset(),
    delete_ratio: float | None = None,
    average_records: float = 0.0,
) -> RewritePrediction:
    """What a bin-pack `rewrite_data_files` with these options rewrites; `leave_out` partitions
    ((spec id, values)) are excluded by the rewrite's `where`. With `apply_deletes`
    (delete-file-threshold 1) a data file with deletes is a candidate whatever its size. With
    `delete_ratio` (delete-ratio-threshold, format v3) a data file whose deletion vector deletes that
    share of its rows is one; `average_records` per data file stands for each file's own count."""
    kept = [c for c in layout.candidates if (c.spec_id, c.values) not in leave_out]
    predicted = []
    exact = True
    for group in _groups(layout, kept):
        by_ratio = delete_ratio is not None and group.deleted_share(average_records) >= delete_ratio
        if apply_deletes and group.deletes:
            group.files += group.deletes  # assume each delete file touches one more data file
        elif by_ratio:  # one data file per deletion vector, taken to be among the small ones if any
            group.files = max(group.files, group.vectors)
        if not (by_ratio or _rewritten(group, sizes, min_input_files, apply_deletes)):
            continue
        exact = exact and (group.exact or not (apply_deletes or by_ratio)) and not group.earlier_specs
        out = expected_output_files(group.bytes, sizes) if group.bytes else 1
        predicted.append(
            GroupPrediction(partition=group.label, files_in=group.files, bytes_in=group.bytes, files_out=out)
        )
    predicted.sort(key=lambda g: g.partition)
    return RewritePrediction(
        groups=tuple(predicted),
        files_in=sum(g.files_in for g in predicted),
        bytes_in=sum(g.bytes_in for g in predicted),
        files_out=sum(g.files_out for g in predicted),
        exact=exact,
    )


def smallest_mergeable_group(
    layout: PartitionLayout, leave_out: frozenset[tuple[int, tuple[Any, ...]]] = frozenset()
) -> int | None:
    """The fewest candidate files in any group with more than one (`leave_out` partitions aside): the
    min-input-files that makes every group that can shrink be rewritten (None when no group holds two)."""
    kept = [c for c in layout.candidates if (c.spec_id, c.values) not in leave_out]
    counts = [g.files for g in _groups(layout, kept) if g.files > 1]
    return min(counts) if counts else None


def lone_small_files(layout: PartitionLayout) -> int:
    """Small files that are the only candidate of their group, with no deletes: no rewrite can merge
    them with anything, whatever its options."""
    groups = _groups(layout, layout.candidates)
    return sum(1 for g in groups if g.files == 1 and g.small == 1 and not g.deletes)


def settled_partitions(
    layout: PartitionLayout, sizes: RewriteSizes, leave_out: frozenset[tuple[int, tuple[Any, ...]]]
) -> tuple[frozenset[tuple[int, tuple[Any, ...]]], list[str], list[str]]:
    """Current-spec partitions whose candidates are all small, with no deletes (deletion vectors
    included: a rewrite applies them, and one above the delete ratio must stay in reach), that a rewrite
    would write back as just as many files (Iceberg spreads a remainder evenly, so two 280 MiB files,
    560 MiB over a 512 MiB target, come out as two 280 MiB files again): their keys, labels and the
    predicates a `where` needs to leave them out (empty when one cannot be expressed). Rewriting them
    changes nothing but the snapshot, so compaction leaves them out, or it would ask for them forever."""
    fields = layout.spec(layout.current_spec_id).fields
    if not fields:
        return frozenset(), [], []
    kept = [c for c in layout.candidates if (c.spec_id, c.values) not in leave_out]
    settled = [
        g
        for g in _groups(layout, kept)
        if g.files > 1 and g.small == g.files and not (g.deletes or g.vectors) and not g.earlier_specs
        and expected_output_files(g.bytes, sizes) >= g.files
    ]
    keys = frozenset(key for g in settled for key in g.keys)
    labels = sorted(g.label for g in settled)
    predicates = [partition_predicate(fields, values) for _, values in keys]
    if any(p is None for p in predicates):
        return frozenset(), [], []
    return keys, labels, sorted(p for p in predicates if p is not None)


def hot_partitions(
    layout: PartitionLayout, since_ms: int
) -> tuple[frozenset[tuple[int, tuple[Any, ...]]], list[str], list[str]]:
    """Current-spec partitions written at or after `since_ms`: their keys, their labels, and the
    predicates a `where` needs to leave them out (empty when one cannot be expressed). An unpartitioned
    table has no partition to leave out: leaving it out would never compact a table that is always
    written, so it has none."""
    fields = layout.spec(layout.current_spec_id).fields
    if not fields:
        return frozenset(), [], []
    hot = [
        c
        for c in layout.candidates
        if c.spec_id == layout.current_spec_id and c.last_write_ms is not None and c.last_write_ms >= since_ms
    ]
    keys = frozenset((c.spec_id, c.values) for c in hot)
    labels = sorted(partition_label(layout, c.spec_id, c.values) for c in hot)
    predicates = [partition_predicate(fields, c.values) for c in hot]
    if any(p is None for p in predicates):
        return keys, labels, []
    return keys, labels, sorted(p for p in predicates if p is not None)


def leave_out_filter(predicates: list[str]) -> str | None:
    """The rewrite's `where` leaving out the partitions `predicates` select (hot ones and settled ones);
    None when none is left out."""
    return excluding(predicates) if predicates else None


def within_budget(prediction: RewritePrediction, budget: int) -> RewritePrediction:
    """Iceberg's max-files-to-rewrite: groups are taken until the budget is spent, the last one cut to
    what is left, in the order of its partition map (not predictable here): files in are the budget
    exactly, which groups and the files out are not known."""
    share = budget / prediction.files_in
    return RewritePrediction(
        files_in=budget,
        bytes_in=int(prediction.bytes_in * share),
        files_out=max(1, round(prediction.files_out * share)),
        exact=False,
        excluded_hot_partitions=prediction.excluded_hot_partitions,
    )
