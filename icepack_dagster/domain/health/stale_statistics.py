"""The STALE_STATISTICS issue: the table has statistics, but main has moved on far enough since they were
computed that engines plan with counts and NDV sketches of a table that no longer is. Never critical:
stale statistics make query plans worse, never results wrong. A table that never had statistics has no
issue (most tables never do; whether one should is its policy's choice, `compute_table_stats` and
`compute_partition_stats`); one whose statistics are all for snapshots off main's lineage has none for
main, and that is stale too."""

from __future__ import annotations

from icepack_dagster.domain.health.model import HealthIssue, Severity
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.statistics_freshness import RegisteredStatistics
from icepack_dagster.domain.table.status import TableStatus

STALE_STATISTICS = "STALE_STATISTICS"


def _stale(
    kind: str, facts: RegisteredStatistics | None, files: int, s: TableStatus, t: HealthThresholds
) -> HealthIssue | None:
    label = kind.replace("_", " ")
    if facts is None:
        if not files:
            return None
        return HealthIssue(
            code=STALE_STATISTICS, severity=Severity.WARNING, metric=f"{kind}_files_off_main",
            value=files, threshold=1,
            message=f"{files} {label} files are registered, none for a snapshot of main's lineage "
            "(they belong to branches or expired snapshots); engines reading main plan without them",
        )
    share = facts.rows_changed / max(s.total_records, 1)
    metric: str
    value: float
    threshold: float
    if facts.commits_behind >= t.statistics_commits_behind_warning:
        metric, value, threshold = (
            f"{kind}_commits_behind", facts.commits_behind, t.statistics_commits_behind_warning
        )
    elif facts.commits_behind and share >= t.statistics_rows_changed_warning:
        metric, value, threshold = f"{kind}_rows_changed_share", share, t.statistics_rows_changed_warning
    else:
        return None
    return HealthIssue(
        code=STALE_STATISTICS, severity=Severity.WARNING, metric=metric, value=value, threshold=threshold,
        message=f"the {label} were computed for snapshot {facts.snapshot_id}, {facts.commits_behind} commits "
        f"ago on main, which changed {facts.rows_changed} rows ({share:.0%} of {s.total_records}); "
        f"engines plan with outdated figures. Computing them again refreshes them",
    )


def stale_statistics(s: TableStatus, t: HealthThresholds) -> HealthIssue | None:
    """The table statistics' issue, else the partition statistics', when either is stale."""
    facts = s.statistics
    if facts is None:
        return None
    table = _stale("table_statistics", facts.table_statistics, facts.table_statistics_files, s, t)
    if table is not None:
        return table
    return _stale("partition_statistics", facts.partition_statistics, facts.partition_statistics_files, s, t)
