"""Health contract: each check raises its stable issue code exactly when its metric reaches the warning
or critical threshold (at or above crosses; minimum counts gate small files and delete files), the
table's state is its worst issue, a table with no snapshot is healthy, `unknown` is never healthy, and
messages state the numbers a person needs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icepack_dagster.domain.health.judging import (
    DELETE_FILE_BUILDUP,
    FINE_PARTITIONING,
    ISSUE_CODES,
    METADATA_LOG_GROWTH,
    OLD_SNAPSHOTS,
    SMALL_FILES,
    SNAPSHOT_BACKLOG,
    STALE_STATISTICS,
    TOO_MANY_MANIFESTS,
    assess_health,
    format_bytes,
    format_hours,
    unknown_health,
    worst_state,
)
from icepack_dagster.domain.health.model import HealthState, Severity
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.partition_layout import (
    PartitionCandidates,
    PartitionLayout,
    PartitionSpecLayout,
)
from tests.factories import MiB, make_statistics, make_status

DEFAULTS = HealthThresholds()



def lone_small_files(count: int, shared: int = 0) -> dict[str, Any]:
    """`count` partitions of one small file each, and one partition of `shared` small files."""
    lone = [
        PartitionCandidates(spec_id=0, values=(day,), small_files=1, small_bytes=MiB) for day in range(count)
    ]
    together = [PartitionCandidates(spec_id=0, values=(-1,), small_files=shared, small_bytes=shared * MiB)]
    layout = PartitionLayout(
        current_spec_id=0, specs=(PartitionSpecLayout(spec_id=0),), large_file_threshold_bytes=900 * MiB,
        candidates=tuple(lone + (together if shared else [])),
    )
    return dict(small_file_count=count + shared, small_file_bytes=(count + shared) * MiB, layout=layout,
                partition_count=count + (1 if shared else 0))


# code -> (overrides at warning level, overrides at critical level, overrides just below warning)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    SMALL_FILES: (
        dict(live_data_files=100, small_file_count=30),
        dict(live_data_files=100, small_file_count=70),
        dict(live_data_files=100, small_file_count=29),
    ),
    TOO_MANY_MANIFESTS: (dict(manifest_count=50), dict(manifest_count=500), dict(manifest_count=49)),
    FINE_PARTITIONING: (  # never critical: no maintenance can fix it
        dict(live_data_files=100, **lone_small_files(30)),
        dict(live_data_files=100, **lone_small_files(90)),
        dict(live_data_files=100, **lone_small_files(29)),
    ),
    DELETE_FILE_BUILDUP: (
        dict(live_data_files=100, live_position_delete_files=10),
        dict(live_data_files=100, live_position_delete_files=30, live_equality_delete_files=20),
        dict(live_data_files=100, live_position_delete_files=9),
    ),
    SNAPSHOT_BACKLOG: (dict(snapshot_count=100), dict(snapshot_count=1000), dict(snapshot_count=99)),
    OLD_SNAPSHOTS: (
        dict(oldest_snapshot_age_seconds=7 * 24 * 3600.0),
        dict(oldest_snapshot_age_seconds=30 * 24 * 3600.0),
        dict(oldest_snapshot_age_seconds=7 * 24 * 3600.0 - 1),
    ),
    METADATA_LOG_GROWTH: (
        dict(metadata_log_entries=150), dict(metadata_log_entries=500), dict(metadata_log_entries=149)
    ),
    STALE_STATISTICS: (  # never critical: stale statistics make plans worse, never results wrong
        dict(snapshot_id=100, statistics=make_statistics(table_behind=50, snapshot_id=100)),
        dict(snapshot_id=5000, statistics=make_statistics(table_behind=4000, snapshot_id=5000)),
        dict(snapshot_id=100, statistics=make_statistics(table_behind=49, snapshot_id=100)),
    ),
}
METRICS = {
    SMALL_FILES: "small_file_ratio", TOO_MANY_MANIFESTS: "manifest_count",
    DELETE_FILE_BUILDUP: "delete_file_ratio", SNAPSHOT_BACKLOG: "snapshot_count",
    OLD_SNAPSHOTS: "oldest_snapshot_age_hours",
    METADATA_LOG_GROWTH: "metadata_log_entries", FINE_PARTITIONING: "lone_small_file_ratio",
    STALE_STATISTICS: "table_statistics_commits_behind",
}
NEVER_CRITICAL = {FINE_PARTITIONING, STALE_STATISTICS}


def test_every_issue_code_has_a_case() -> None:
    assert set(CASES) == set(ISSUE_CODES) == set(METRICS)


def test_a_table_within_every_threshold_is_healthy() -> None:
    health = assess_health(make_status(), DEFAULTS)
    assert health.state is HealthState.HEALTHY
    assert health.issues == () and health.error is None and health.table == "lake.ns.t"


@pytest.mark.parametrize("code", ISSUE_CODES)
def test_metric_at_the_warning_threshold_is_a_warning(code: str) -> None:
    health = assess_health(make_status(**CASES[code][0]), DEFAULTS)
    [issue] = health.issues
    assert (issue.code, issue.severity, issue.metric) == (code, Severity.WARNING, METRICS[code])
    assert issue.value >= issue.threshold
    assert health.state is HealthState.WARNING


@pytest.mark.parametrize("code", ISSUE_CODES)
def test_metric_at_the_critical_threshold_is_critical(code: str) -> None:
    health = assess_health(make_status(**CASES[code][1]), DEFAULTS)
    [issue] = health.issues
    severity = Severity.WARNING if code in NEVER_CRITICAL else Severity.CRITICAL
    assert (issue.code, issue.severity) == (code, severity)
    assert health.state is HealthState(severity.value)


@pytest.mark.parametrize("code", ISSUE_CODES)
def test_metric_just_below_the_warning_threshold_is_no_issue(code: str) -> None:
    assert assess_health(make_status(**CASES[code][2]), DEFAULTS).issues == ()


def test_small_files_sharing_a_partition_are_small_files_not_fine_partitioning() -> None:
    """Ten partitions of one small file and one of 40: compaction can merge the 40, so SMALL_FILES
    (counting only those 40); the ten lone ones would not be an issue alone."""
    status = make_status(live_data_files=60, **lone_small_files(10, shared=40))
    [issue] = assess_health(status, DEFAULTS).issues
    assert (issue.code, issue.value) == (SMALL_FILES, 40 / 60)


def test_fine_partitioning_names_the_partitions_and_what_the_owner_can_do() -> None:
    [issue] = assess_health(make_status(live_data_files=30, **lone_small_files(30)), DEFAULTS).issues
    assert issue.code == FINE_PARTITIONING
    assert "30 of 30 data files" in issue.message and "30 partitions" in issue.message
    assert "Partition more coarsely" in issue.message


def test_issue_carries_the_value_and_the_threshold_it_crossed() -> None:
    [issue] = assess_health(make_status(manifest_count=120), DEFAULTS).issues
    assert (issue.value, issue.threshold) == (120, 50)
    [issue] = assess_health(make_status(manifest_count=900), DEFAULTS).issues
    assert (issue.value, issue.threshold) == (900, 500)
    [issue] = assess_health(make_status(oldest_snapshot_age_seconds=9 * 24 * 3600.0), DEFAULTS).issues
    assert (issue.value, issue.threshold) == (216.0, 168.0)


def test_small_files_below_the_minimum_count_are_never_an_issue() -> None:
    every_file_small = make_status(live_data_files=7, small_file_count=7, small_file_bytes=7 * MiB)
    assert assess_health(every_file_small, DEFAULTS).issues == ()
    eight = make_status(live_data_files=8, small_file_count=8, small_file_bytes=8 * MiB)
    assert [i.code for i in assess_health(eight, DEFAULTS).issues] == [SMALL_FILES]


def test_delete_files_below_the_minimum_count_are_never_an_issue() -> None:
    one_delete_for_one_file = make_status(live_data_files=1, live_position_delete_files=1)
    assert assess_health(one_delete_for_one_file, DEFAULTS).issues == ()
    raised_minimum = DEFAULTS.model_copy(update={"delete_file_min_count": 51})  # the case has 50
    assert assess_health(make_status(**CASES[DELETE_FILE_BUILDUP][1]), raised_minimum).issues == ()


def test_small_files_message_reads_like_a_sentence() -> None:
    status = make_status(
        live_data_files=400, small_file_count=312, small_file_bytes=312 * MiB,
        small_file_threshold_bytes=48 * MiB,
    )
    [issue] = assess_health(status, DEFAULTS).issues
    assert issue.message.startswith("312 of 400 data files (78%) are under 48 MiB")
    assert issue.message.endswith("compaction would merge them")


def test_messages_name_their_numbers() -> None:
    status = make_status(
        live_data_files=100, live_position_delete_files=30, live_equality_delete_files=20, manifest_count=60,
        snapshot_count=150, oldest_snapshot_age_seconds=10 * 24 * 3600.0, metadata_log_entries=200,
    )
    messages = {i.code: i.message for i in assess_health(status, DEFAULTS).issues}
    assert "60 manifests" in messages[TOO_MANY_MANIFESTS]
    assert "50 delete files (30 position, 20 equality) for 100 data files" in messages[DELETE_FILE_BUILDUP]
    assert messages[SNAPSHOT_BACKLOG].startswith("150 snapshots are retained")
    assert "10 days old (threshold 7 days)" in messages[OLD_SNAPSHOTS]
    assert "200 previous metadata files" in messages[METADATA_LOG_GROWTH]


def test_state_is_the_worst_issue_and_issues_keep_a_stable_order() -> None:
    status = make_status(manifest_count=600, snapshot_count=120, metadata_log_entries=160)
    health = assess_health(status, DEFAULTS)
    assert [i.code for i in health.issues] == [TOO_MANY_MANIFESTS, SNAPSHOT_BACKLOG, METADATA_LOG_GROWTH]
    assert [i.severity for i in health.issues] == [Severity.CRITICAL, Severity.WARNING, Severity.WARNING]
    assert health.state is HealthState.CRITICAL


def test_a_table_with_no_snapshot_is_healthy() -> None:
    empty = make_status(
        snapshot_id=None, live_data_files=0, live_data_bytes=0, manifest_count=0, snapshot_count=0,
        oldest_snapshot_age_seconds=None, newest_snapshot_age_seconds=None, metadata_log_entries=900,
    )
    assert assess_health(empty, DEFAULTS).state is HealthState.HEALTHY


def test_a_missing_snapshot_age_is_no_age_issue() -> None:
    status = make_status(oldest_snapshot_age_seconds=None, newest_snapshot_age_seconds=None)
    assert assess_health(status, DEFAULTS).issues == ()


def test_operator_thresholds_change_the_verdict() -> None:
    strict = HealthThresholds(manifest_count_warning=2, manifest_count_critical=3)
    [issue] = assess_health(make_status(manifest_count=3), strict).issues
    assert (issue.code, issue.severity, issue.threshold) == (TOO_MANY_MANIFESTS, Severity.CRITICAL, 3)


def test_unknown_health_is_never_healthy_and_says_why() -> None:
    health = unknown_health("lake.ns.t", "catalog unreachable: connection refused")
    assert health.state is HealthState.UNKNOWN
    assert health.error == "catalog unreachable: connection refused"
    assert health.issues == ()


def test_state_ordering() -> None:
    order = [HealthState.HEALTHY, HealthState.WARNING, HealthState.CRITICAL, HealthState.UNKNOWN]
    for i, lower in enumerate(order):
        for higher in order[i:]:
            assert worst_state([lower, higher]) is higher
            assert worst_state([higher, lower]) is higher
    assert worst_state([]) is HealthState.HEALTHY


def _ordered_by(order: str) -> list[HealthState]:
    return sorted(HealthState, key=lambda state: getattr(state, order))


def test_each_order_of_the_states_is_named_by_its_purpose() -> None:
    """Unknown is the worst state, plots apart below healthy, is never launched and is looked at
    right after critical: four orders, each on the state under its own name."""
    u, h, w, c = HealthState.UNKNOWN, HealthState.HEALTHY, HealthState.WARNING, HealthState.CRITICAL
    assert _ordered_by("severity") == [h, w, c, u]
    assert [s.plot_value for s in (u, h, w, c)] == [-1, 0, 1, 2]
    assert [s.launch_urgency for s in (u, h, w, c)] == [0, 0, 1, 2]
    assert _ordered_by("attention_order") == [c, u, w, h]


def test_sizes_and_ages_are_formatted_for_people() -> None:
    assert [format_bytes(v) for v in (900, 48 * MiB, 1.5 * 1024 * MiB, 2048 * 1024**4)] == [
        "900 B", "48 MiB", "1.5 GiB", "2048 TiB"
    ]
    assert [format_hours(v) for v in (3.25, 47, 240)] == ["3.2 h", "47 h", "10 days"]


@given(
    data_files=st.integers(0, 10**6),
    small=st.integers(0, 10**6),
    position=st.integers(0, 10**5),
    equality=st.integers(0, 10**5),
    manifests=st.integers(0, 10**5),
    snapshots=st.integers(0, 10**5),
    age=st.none() | st.floats(0, 10**9),
    log=st.integers(0, 10**5),
)
def test_any_status_gets_a_state_equal_to_its_worst_issue(
    data_files: int, small: int, position: int, equality: int, manifests: int, snapshots: int,
    age: float | None, log: int,
) -> None:
    status = make_status(
        live_data_files=data_files, small_file_count=min(small, data_files),
        live_position_delete_files=position, live_equality_delete_files=equality,
        manifest_count=manifests, snapshot_count=snapshots,
        oldest_snapshot_age_seconds=age, metadata_log_entries=log,
    )
    health = assess_health(status, DEFAULTS)
    assert len({i.code for i in health.issues}) == len(health.issues)
    assert all(i.value >= i.threshold for i in health.issues)
    assert health.state is worst_state(HealthState(i.severity.value) for i in health.issues)


def test_deletion_vectors_are_judged_by_the_rows_they_delete_not_by_their_count() -> None:
    """One deletion vector per data file is no buildup by itself; the share of rows deleted is. Position
    delete files a v2 to v3 upgrade left are still counted as files."""
    few_rows = make_status(
        format_version=3, live_data_files=40, live_position_delete_files=40, live_deletion_vectors=40,
        total_records=10_000, deletion_vector_records=40,
    )
    assert DELETE_FILE_BUILDUP not in {i.code for i in assess_health(few_rows, DEFAULTS).issues}
    many_rows = few_rows.model_copy(update={"deletion_vector_records": 4_000})
    [issue] = [i for i in assess_health(many_rows, DEFAULTS).issues if i.code == DELETE_FILE_BUILDUP]
    assert (issue.metric, issue.severity, issue.value) == ("deleted_row_share", Severity.CRITICAL, 0.4)
    assert issue.message.startswith("40 deletion vectors delete 4000 of 10000 rows (40.0%, threshold 30%)")
    upgraded = make_status(
        format_version=3, live_data_files=18, live_position_delete_files=18, total_records=360
    )
    [left] = [i for i in assess_health(upgraded, DEFAULTS).issues if i.code == DELETE_FILE_BUILDUP]
    assert left.metric == "delete_file_ratio" and "(18 position, 0 equality)" in left.message


def test_a_branch_only_table_is_judged_by_its_branch_snapshots() -> None:
    branch_only = make_status(
        snapshot_id=None, live_data_files=0, live_data_bytes=0, manifest_count=0, snapshot_count=250,
        branch_count=2,
    )
    health = assess_health(branch_only, DEFAULTS)
    backlog = next(i for i in health.issues if i.code == SNAPSHOT_BACKLOG)
    assert health.state is HealthState.WARNING and backlog.value == 250
    assert "only on 2 other branches (main has no snapshot)" in backlog.message


def test_a_branch_heavy_table_counts_every_branchs_snapshots() -> None:
    health = assess_health(make_status(snapshot_count=120, branch_count=1), DEFAULTS)
    [backlog] = [i for i in health.issues if i.code == SNAPSHOT_BACKLOG]
    assert backlog.value == 120 and "retained on main and 1 other branch (" in backlog.message


def test_metadata_log_advice_follows_the_tables_own_metadata_properties() -> None:
    prune, keep = "write.metadata.delete-after-commit.enabled", "write.metadata.previous-versions-max"

    def advice(properties: dict[str, str]) -> str:
        status = make_status(metadata_log_entries=200, properties=properties)
        [issue] = [i for i in assess_health(status, DEFAULTS).issues if i.code == METADATA_LOG_GROWTH]
        return issue.message

    assert f"set {prune}=true so commits prune it (to {keep}, now 100)" in advice({})
    assert f"commits prune it already; lower {keep} (now 300)" in advice({prune: "TRUE", keep: "300"})
    assert f"set {prune}=true" in advice({prune: "yes"})  # Iceberg reads "yes" as false


def test_statistics_are_stale_by_the_rows_their_commits_changed() -> None:
    """Two commits that rewrote a quarter of the rows make statistics stale; none that did not."""
    changed = make_statistics(partition_behind=2, rows_changed=250, snapshot_id=9)
    [issue] = assess_health(make_status(snapshot_id=9, statistics=changed), DEFAULTS).issues
    metric = "partition_statistics_rows_changed_share"
    assert (issue.code, issue.metric, issue.value) == (STALE_STATISTICS, metric, 0.25)
    assert issue.message.startswith("the partition statistics were computed for snapshot 7, 2 commits ago")
    fewer = make_statistics(partition_behind=2, rows_changed=249, snapshot_id=9)
    assert assess_health(make_status(snapshot_id=9, statistics=fewer), DEFAULTS).issues == ()


def test_missing_statistics_are_no_issue_but_statistics_only_off_main_are() -> None:
    """Most tables never have statistics: no issue. A table whose statistics files all belong to
    snapshots off main's lineage (a branch's, expired ones) has none for main: stale."""
    none = make_statistics()
    assert assess_health(make_status(statistics=none), DEFAULTS).issues == ()
    off_main = none.model_copy(update={"table_statistics_files": 2})
    [issue] = assess_health(make_status(statistics=off_main), DEFAULTS).issues
    assert (issue.code, issue.metric, issue.value) == (STALE_STATISTICS, "table_statistics_files_off_main", 2)
