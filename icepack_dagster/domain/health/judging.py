"""Health: judge one table's status against the operator's thresholds.

Each check yields at most one issue with a stable code; the table's state is its worst issue. A metric
at or above a threshold crosses it. Pure and policy-independent: the same status and thresholds always
give the same health, in microseconds, so it can run for every table on every sync.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from icepack_dagster.domain.actions.planners.compaction import lone_small_files
from icepack_dagster.domain.health.model import HealthIssue, HealthState, Severity, TableHealth
from icepack_dagster.domain.health.stale_statistics import STALE_STATISTICS, stale_statistics
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.iceberg_properties import (
    METADATA_DELETE_AFTER_COMMIT,
    METADATA_PREVIOUS_VERSIONS_MAX,
    iceberg_value,
)
from icepack_dagster.domain.table.status import TableStatus

SMALL_FILES = "SMALL_FILES"
TOO_MANY_MANIFESTS = "TOO_MANY_MANIFESTS"
DELETE_FILE_BUILDUP = "DELETE_FILE_BUILDUP"
SNAPSHOT_BACKLOG = "SNAPSHOT_BACKLOG"
OLD_SNAPSHOTS = "OLD_SNAPSHOTS"
METADATA_LOG_GROWTH = "METADATA_LOG_GROWTH"
FINE_PARTITIONING = "FINE_PARTITIONING"

ISSUE_CODES: tuple[str, ...] = (
    SMALL_FILES,
    TOO_MANY_MANIFESTS,
    DELETE_FILE_BUILDUP,
    SNAPSHOT_BACKLOG,
    OLD_SNAPSHOTS,
    METADATA_LOG_GROWTH,
    FINE_PARTITIONING,
    STALE_STATISTICS,
)

# `unknown` ranks above `critical`: a table that cannot be measured needs a person most.


def format_bytes(size: float) -> str:
    """Binary units as people read them: `48 MiB`, `1.5 GiB`, `900 B`."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            text = f"{value:.1f}".removesuffix(".0")
            return f"{text} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_hours(hours: float) -> str:
    """`5.5 h` below two days, `9.5 days` above, so ages read naturally."""
    if hours < 48:
        return f"{hours:.1f}".removesuffix(".0") + " h"
    return f"{hours / 24:.1f}".removesuffix(".0") + " days"


def worst_state(states: Iterable[HealthState]) -> HealthState:
    """The most severe of several states (healthy < warning < critical < unknown); healthy if none."""
    return max(states, key=lambda state: state.severity, default=HealthState.HEALTHY)


def _issue(
    code: str, metric: str, value: float, levels: tuple[float, float], message: Callable[[float], str]
) -> HealthIssue | None:
    """An issue when `value` reaches the (warning, critical) levels; the message gets the level crossed."""
    warning, critical = levels
    if value < warning:  # critical is never below warning (HealthThresholds checks it)
        return None
    severity, threshold = (Severity.CRITICAL, critical) if value >= critical else (Severity.WARNING, warning)
    return HealthIssue(
        code=code, severity=severity, metric=metric, value=value, threshold=threshold,
        message=message(threshold),
    )


def _file_share(
    code: str,
    metric: str,
    files: int,
    min_files: int,
    ratio: float,
    levels: tuple[float, float],
    message: Callable[[float], str],
) -> HealthIssue | None:
    """A ratio of some files to the data files, judged only from `min_files` such files on: a handful
    of small or delete files is never worth a rewrite, however small the table."""
    return None if files < min_files else _issue(code, metric, ratio, levels, message)


def _small_files(s: TableStatus, t: HealthThresholds) -> HealthIssue | None:
    """Small files a rewrite can merge; those alone in their partition are FINE_PARTITIONING's."""
    lone = lone_small_files(s.layout) if s.layout is not None else 0
    count = s.small_file_count - lone
    ratio = count / s.live_data_files if s.live_data_files else 0.0
    return _file_share(
        SMALL_FILES, "small_file_ratio", count, t.small_file_min_count, ratio,
        (t.small_file_ratio_warning, t.small_file_ratio_critical),
        lambda threshold: (
            f"{count} of {s.live_data_files} data files ({ratio:.0%}) are under "
            f"{format_bytes(s.small_file_threshold_bytes)} (threshold {threshold:.0%}) and share a "
            "partition with other small files; compaction would merge them"
        ),
    )


def _fine_partitioning(s: TableStatus, t: HealthThresholds) -> HealthIssue | None:
    """Small files that no rewrite can merge, each the only small file of its partition, when they are
    enough to be a SMALL_FILES issue on their own: the partitioning is finer than the data volume.
    Never critical: no maintenance can fix it; the table's owner can."""
    if s.layout is None or _small_files(s, t) is not None:
        return None
    lone = lone_small_files(s.layout)
    ratio = lone / s.live_data_files if s.live_data_files else 0.0
    per_partition = s.live_data_bytes / max(s.partition_count, 1)
    return _file_share(
        FINE_PARTITIONING, "lone_small_file_ratio", lone, t.small_file_min_count, ratio,
        (t.small_file_ratio_warning, float("inf")),
        lambda threshold: (
            f"{lone} of {s.live_data_files} data files ({ratio:.0%}, threshold {threshold:.0%}) are small "
            f"and each the only small file of its partition: {s.partition_count} partitions hold "
            f"{format_bytes(per_partition)} each on average, against a target file size of "
            f"{format_bytes(s.target_file_size_bytes)}. The partitioning is finer than the data volume, "
            "so compaction cannot merge them. Partition more coarsely (for example by month instead of "
            "by day), or accept files this size with icepack.small-file-threshold-bytes"
        ),
    )


def _manifests(s: TableStatus, t: HealthThresholds) -> HealthIssue | None:
    levels = (t.manifest_count_warning, t.manifest_count_critical)
    return _issue(
        TOO_MANY_MANIFESTS, "manifest_count", s.manifest_count, levels,
        lambda threshold: (
            f"the current snapshot has {s.manifest_count} manifests (threshold {threshold:g}), "
            f"{format_bytes(s.manifest_bytes)} in all; every query plans over each of them, "
            "rewriting manifests would merge them"
        ),
    )


def _deletes(s: TableStatus, t: HealthThresholds) -> HealthIssue | None:
    """Delete files per data file; deletion vectors (one per data file, format v3) are judged by the
    share of rows they delete instead, from their cardinalities in the manifests. The worse of both."""
    files = s.leftover_position_delete_files + s.live_equality_delete_files
    ratio = files / max(s.live_data_files, 1) if files else 0.0
    kinds = f"{s.leftover_position_delete_files} position, "
    if s.live_deletion_vectors:
        kinds += f"{s.live_deletion_vectors} deletion vectors, "
    by_files = _file_share(
        DELETE_FILE_BUILDUP, "delete_file_ratio", files, t.delete_file_min_count, ratio,
        (t.delete_file_ratio_warning, t.delete_file_ratio_critical),
        lambda threshold: (
            f"{s.live_delete_files} delete files ({kinds}{s.live_equality_delete_files} equality) for "
            f"{s.live_data_files} data files ({ratio:.2g} per data file, threshold {threshold:g}); every "
            "read applies them, rewriting would fold them into the data"
        ),
    )
    share = s.deleted_row_share
    by_rows = None if not s.live_deletion_vectors else _issue(
        DELETE_FILE_BUILDUP, "deleted_row_share", share,
        (t.deleted_row_share_warning, t.deleted_row_share_critical),
        lambda threshold: (
            f"{s.live_deletion_vectors} deletion vectors delete {s.deletion_vector_records} of "
            f"{s.total_records} rows ({share:.1%}, threshold {threshold:.0%}); every read skips them, "
            "compaction with delete-ratio-threshold would drop them from the data"
        ),
    )
    found = [issue for issue in (by_files, by_rows) if issue is not None]
    return max(found, key=lambda issue: issue.severity == Severity.CRITICAL, default=None)


def _refs(s: TableStatus) -> str:
    """Which refs hold the snapshots: main and the other branches (main may have none)."""
    branches = f"{s.branch_count} other branch{'es' if s.branch_count != 1 else ''}"
    if s.snapshot_id is None:
        return f"only on {branches} (main has no snapshot)" if s.branch_count else "on no branch"
    return f"on main and {branches}" if s.branch_count else "on main"


def _snapshot_count(s: TableStatus, t: HealthThresholds) -> HealthIssue | None:
    levels = (t.snapshot_count_warning, t.snapshot_count_critical)
    return _issue(
        SNAPSHOT_BACKLOG, "snapshot_count", s.snapshot_count, levels,
        lambda threshold: (
            f"{s.snapshot_count} snapshots are retained {_refs(s)} (threshold {threshold:g}); they keep "
            "replaced files on storage and grow the metadata, expiring snapshots would release them"
        ),
    )


def _snapshot_age(s: TableStatus, t: HealthThresholds) -> HealthIssue | None:
    if s.oldest_snapshot_age_seconds is None:
        return None
    hours = s.oldest_snapshot_age_seconds / 3600
    levels = (t.snapshot_age_warning_hours, t.snapshot_age_critical_hours)
    return _issue(
        OLD_SNAPSHOTS, "oldest_snapshot_age_hours", hours, levels,
        lambda threshold: (
            f"the oldest retained snapshot is {format_hours(hours)} old "
            f"(threshold {format_hours(threshold)}); files only it references stay on storage "
            "until it is expired"
        ),
    )


def _metadata_log_fix(s: TableStatus) -> str:
    """What the table's own metadata properties, as Iceberg reads them, leave to change."""
    pruning = iceberg_value(s.properties, METADATA_DELETE_AFTER_COMMIT)
    kept = iceberg_value(s.properties, METADATA_PREVIOUS_VERSIONS_MAX)
    if not pruning.value:
        return (
            f"set {METADATA_DELETE_AFTER_COMMIT}=true so commits prune it "
            f"(to {METADATA_PREVIOUS_VERSIONS_MAX}, now {kept.value})"
        )
    return f"commits prune it already; lower {METADATA_PREVIOUS_VERSIONS_MAX} (now {kept.value})"


def _metadata_log(s: TableStatus, t: HealthThresholds) -> HealthIssue | None:
    levels = (t.metadata_log_warning, t.metadata_log_critical)
    return _issue(
        METADATA_LOG_GROWTH, "metadata_log_entries", s.metadata_log_entries, levels,
        lambda threshold: (
            f"the metadata log lists {s.metadata_log_entries} previous metadata files (threshold "
            f"{threshold:g}); {_metadata_log_fix(s)}"
        ),
    )


_CHECKS = (
    _small_files, _fine_partitioning, _manifests, _deletes, _snapshot_count, _snapshot_age, _metadata_log,
    stale_statistics,
)


def assess_health(status: TableStatus, thresholds: HealthThresholds) -> TableHealth:
    """Judge a measured table; a table with no snapshot on any ref holds nothing to maintain and is
    healthy. Snapshots on branches count whether or not main has one: they hold files all the same."""
    if status.snapshot_count == 0:
        return TableHealth(table=status.table, state=HealthState.HEALTHY)
    issues = tuple(issue for check in _CHECKS if (issue := check(status, thresholds)) is not None)
    state = worst_state(HealthState(issue.severity.value) for issue in issues)
    return TableHealth(table=status.table, state=state, issues=issues)


def unknown_health(table: str, error: str) -> TableHealth:
    """Health of a table whose status could not be measured: never healthy, never maintained."""
    return TableHealth(table=table, state=HealthState.UNKNOWN, error=error)
