"""Recommendation contract: every action is decided exactly once, in ACTION_ORDER, either recommended
with a reason and string options or skipped with an explicit reason (unknown health, table disabled,
quarantine, no snapshot, disabled by policy, gc.enabled=false, cadence, nothing to gain). Orphan removal
runs on its own weekly cadence and keeps files younger than the policy age. Priority is gain over cost
times the boost. Everything is deterministic given `now`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icepack_dagster.domain.actions import rewrite_position_delete_files
from icepack_dagster.domain.actions.definition import ActionEstimate, PlanningContext
from icepack_dagster.domain.actions.maintenance_action import ACTION_ORDER, MaintenanceAction
from icepack_dagster.domain.actions.rewrite_data_files import hot_window_minutes
from icepack_dagster.domain.health.judging import assess_health, unknown_health
from icepack_dagster.domain.health.model import TableHealth
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.recommendation.model import Recommendation, RecommendedAction, SkippedAction
from icepack_dagster.domain.recommendation.recommender import gc_disabled_reason, recommend
from icepack_dagster.domain.table.partition_layout import (
    PartitionCandidates,
    PartitionField,
    PartitionLayout,
    PartitionSpecLayout,
)
from icepack_dagster.domain.table.status import TableStatus
from tests.factories import NOW, MiB, make_statistics, make_status

A = MaintenanceAction
DESTRUCTIVE = (A.EXPIRE_SNAPSHOTS, A.REMOVE_ORPHAN_FILES)



def small_files(count: int, total: int | None = None, each: int = MiB) -> dict[str, Any]:
    total = count if total is None else total
    return dict(live_data_files=total, small_file_count=count, small_file_bytes=count * each,
                live_data_bytes=count * each + (total - count) * 400 * MiB)


def history(**fields: Any) -> TableHistory:
    return TableHistory(table="lake.ns.t", **fields)


DISK_FULL = "rewrite failed: disk full"
ORPHANS_DONE = history(last_succeeded={A.REMOVE_ORPHAN_FILES: NOW - timedelta(days=1)})


def run(
    status: TableStatus,
    policy: Policy | None = None,
    past: TableHistory | None = None,
    now: datetime = NOW,
    health: TableHealth | None = None,
    force: bool = False,
) -> Recommendation:
    health = health or assess_health(status, HealthThresholds())
    past = past or TableHistory.empty(status.table)
    return recommend(status, health, policy or Policy(), past, now, ignore_cadence=force)


def decisions(r: Recommendation) -> dict[MaintenanceAction, RecommendedAction | SkippedAction]:
    return {d.action: d for d in (*r.actions, *r.skipped)}


def recommended(r: Recommendation) -> dict[MaintenanceAction, RecommendedAction]:
    return {a.action: a for a in r.actions}


def skip_reason(r: Recommendation, action: MaintenanceAction) -> str:
    decision = decisions(r)[action]
    assert isinstance(decision, SkippedAction), f"{action} was recommended: {decision}"
    return decision.reason


# --- what gets recommended -------------------------------------------------------------------------


def test_small_files_are_compacted_to_the_table_target() -> None:
    r = run(make_status(**small_files(80, 100)), past=ORPHANS_DONE)
    action = recommended(r)[A.REWRITE_DATA_FILES]
    assert action.options == {"target-file-size-bytes": str(512 * MiB), "min-input-files": "5"}
    assert action.reason.startswith("80 data files under 384 MiB (80 MiB) would merge into about 1")
    assert [a.action for a in r.actions] == [A.REWRITE_DATA_FILES]
    assert (r.expected_files_removed, r.estimated_bytes_to_rewrite) == (79, 80 * MiB)


def test_policy_target_file_size_and_min_input_files_reach_the_options() -> None:
    policy = Policy(target_file_size_bytes=64 * MiB, min_input_files=8)
    action = recommended(run(make_status(**small_files(80, 100)), policy))[A.REWRITE_DATA_FILES]
    assert action.options == {"target-file-size-bytes": str(64 * MiB), "min-input-files": "8"}


def daily_layout(files_per_day: int, days: int) -> dict[str, Any]:
    """A table partitioned by day whose every file is a 1 MiB small file, with its partition layout."""
    day = PartitionField(name="ts_day", transform="day", source_column="ts", source_type="timestamptz")
    found = tuple(
        PartitionCandidates(spec_id=0, values=(20000 + d,), small_files=files_per_day,
                            small_bytes=files_per_day * MiB)
        for d in range(days)
    )
    layout = PartitionLayout(current_spec_id=0, specs=(PartitionSpecLayout(spec_id=0, fields=(day,)),),
                             large_file_threshold_bytes=921 * MiB, candidates=found)
    return {**small_files(files_per_day * days), "layout": layout, "partition_count": days}


def test_with_a_partition_layout_the_rewrite_is_planned_per_partition() -> None:
    action = recommended(run(make_status(**daily_layout(3, 4))))[A.REWRITE_DATA_FILES]
    assert action.options == {
        "target-file-size-bytes": str(512 * MiB), "min-file-size-bytes": str(384 * MiB),
        "max-file-size-bytes": str(921 * MiB), "min-input-files": "3",
    }
    assert action.reason == (
        "12 data files (12 MiB) in 4 partition groups would be rewritten into about 4; min-input-files "
        "lowered from 5 to 3 so partitions with 3 or more small files are merged"
    )
    assert action.prediction is not None and len(action.prediction.groups) == 4
    assert action.prediction.groups[0].partition == "ts_day=2024-10-04"


def test_when_only_hot_partitions_could_merge_compaction_waits_and_says_so() -> None:
    status = make_status(**daily_layout(3, 4))
    assert status.layout is not None
    written = int(NOW.timestamp() * 1000)
    hot = tuple(c.model_copy(update={"last_write_ms": written}) for c in status.layout.candidates)
    status = status.model_copy(update={"layout": status.layout.model_copy(update={"candidates": hot})})
    assert skip_reason(run(status), A.REWRITE_DATA_FILES) == (
        "nothing to gain: every partition with files to merge was written in the last 60 minutes "
        "(ts_day=2024-10-04, ts_day=2024-10-05, ts_day=2024-10-06, ts_day=2024-10-07); compaction waits "
        "until they are quiet "
        "(icepack.compaction.hot-minutes)"
    )


def test_after_conflicts_in_a_row_compaction_narrows_to_colder_partitions() -> None:
    """A writer committing to a partition written 90 minutes ago conflicts with compaction; from the
    second conflict in a row the hot window doubles per conflict, and that partition is left out."""
    status = make_status(**daily_layout(3, 4))
    assert status.layout is not None
    written = int((NOW - timedelta(minutes=90)).timestamp() * 1000)
    *cold, warm = status.layout.candidates
    candidates = (*cold, warm.model_copy(update={"last_write_ms": written}))
    status = status.model_copy(update={"layout": status.layout.model_copy(update={"candidates": candidates})})
    once = recommended(run(status, past=history(consecutive_conflicts=1)))[A.REWRITE_DATA_FILES]
    assert once.prediction is not None and len(once.prediction.groups) == 4 and "where" not in once.options
    twice = recommended(run(status, past=history(consecutive_conflicts=2)))[A.REWRITE_DATA_FILES]
    assert twice.prediction is not None and len(twice.prediction.groups) == 3
    assert twice.options["where"] == (
        "NOT ((`ts` >= TIMESTAMP '2024-10-07 00:00:00+00:00' "
        "AND `ts` < TIMESTAMP '2024-10-08 00:00:00+00:00'))"
    )
    assert twice.prediction.excluded_hot_partitions == ("ts_day=2024-10-07",)
    assert (
        "partitions written in the last 120 minutes (widened from 60 after 2 maintenances in a row "
        "conflicted with a concurrent writer) are left out: ts_day=2024-10-07"
    ) in twice.reason


def test_the_widened_hot_window_doubles_per_conflict_up_to_a_week() -> None:
    assert [hot_window_minutes(60, n) for n in (0, 1, 2, 3, 4)] == [60, 60, 120, 240, 480]
    assert hot_window_minutes(0, 2) == 120  # a window of 0 widens too
    assert hot_window_minutes(60, 40) == 7 * 24 * 60
    assert hot_window_minutes(20_000, 3) == 20_000  # never narrower than the policy's


def test_one_small_file_per_partition_is_not_compacted() -> None:
    r = run(make_status(**daily_layout(1, 11)))
    assert skip_reason(r, A.REWRITE_DATA_FILES) == (
        "nothing to gain: 11 small data files are each alone in their partition: no rewrite group can "
        "merge them (see FINE_PARTITIONING)"
    )


def test_a_rewrite_without_effect_is_not_repeated_on_the_same_snapshot() -> None:
    past = history(no_effect_on={A.REWRITE_DATA_FILES: 1})
    reason = skip_reason(run(make_status(**small_files(80), snapshot_id=1), past=past), A.REWRITE_DATA_FILES)
    assert reason == (
        "its last run on this same table state (snapshot 1) had no effect; "
        "not repeated until the table changes"
    )
    assert A.REWRITE_DATA_FILES in recommended(run(make_status(**small_files(80), snapshot_id=2), past=past))


def test_position_deletes_are_applied_by_the_data_rewrite_and_then_dropped() -> None:
    status = make_status(live_position_delete_files=4, live_delete_bytes=4000)
    actions = recommended(run(status))
    assert actions[A.REWRITE_DATA_FILES].options == {
        "target-file-size-bytes": str(512 * MiB), "min-input-files": "5",
        "delete-file-threshold": "1", "remove-dangling-deletes": "true",
    }
    assert "4 delete files apply to the data" in actions[A.REWRITE_DATA_FILES].reason
    assert actions[A.REWRITE_POSITION_DELETE_FILES].options == {"rewrite-all": "true"}
    assert "dangling" in actions[A.REWRITE_POSITION_DELETE_FILES].reason


NO_DATA_REWRITE = Policy(actions={A.REWRITE_DATA_FILES: False})  # position deletes planned on their own
PARTITION_DELETES = {"write.delete.granularity": "Partition"}  # any letter case, as Iceberg reads it


def test_position_deletes_are_compacted_when_the_data_rewrite_is_off() -> None:
    status = make_status(live_position_delete_files=4, live_delete_bytes=4000, properties=PARTITION_DELETES)
    action = recommended(run(status, NO_DATA_REWRITE))[A.REWRITE_POSITION_DELETE_FILES]
    assert action.options == {"min-input-files": "2"}
    assert action.reason.startswith("4 position delete files")


@pytest.mark.parametrize("granularity", [None, "file", "FILE", "partitions"])
def test_file_scoped_position_deletes_are_not_merged(granularity: str | None) -> None:
    """Iceberg rewrites them one delete file per data file: a rewrite cannot merge them."""
    properties = {} if granularity is None else {"write.delete.granularity": granularity}
    status = make_status(live_position_delete_files=4, live_delete_bytes=4000, properties=properties)
    reason = skip_reason(run(status, NO_DATA_REWRITE), A.REWRITE_POSITION_DELETE_FILES)
    if granularity == "partitions":
        assert "write.delete.granularity='partitions' cannot be read by Iceberg" in reason
    else:
        assert "cannot merge them" in reason and "write.delete.granularity=partition" in reason


def delete_layout(*per_day: tuple[int, int]) -> PartitionLayout:
    """A days(ts) table whose day `i` holds per_day[i] = (position delete files, their bytes)."""
    day = PartitionField(name="ts_day", transform="day", source_column="ts", source_type="timestamptz")
    return PartitionLayout(
        current_spec_id=0,
        specs=(PartitionSpecLayout(spec_id=0, fields=(day,)),),
        large_file_threshold_bytes=1000 * MiB,
        candidates=tuple(
            PartitionCandidates(
                spec_id=0, values=(20_000 + i,), delete_files=files, position_delete_files=files,
                position_delete_bytes=size,
            )
            for i, (files, size) in enumerate(per_day)
        ),
    )


def test_position_deletes_are_planned_per_partition() -> None:
    layout = delete_layout((3, 3000), (2, 2000), (1, 1000))
    status = make_status(
        live_position_delete_files=6, live_delete_files=6, live_delete_bytes=6000, layout=layout,
        properties=PARTITION_DELETES,
    )
    action = recommended(run(status, NO_DATA_REWRITE))[A.REWRITE_POSITION_DELETE_FILES]
    prediction = action.prediction
    assert prediction is not None and prediction.exact
    assert [(g.partition, g.files_in, g.files_out) for g in prediction.groups] == [
        ("ts_day=2024-10-04", 3, 1), ("ts_day=2024-10-05", 2, 1)
    ]
    assert action.options == {
        "target-file-size-bytes": str(64 * MiB), "min-file-size-bytes": str(48 * MiB),
        "max-file-size-bytes": str(int(64 * MiB * 1.8)), "min-input-files": "2",
    }
    lone = make_status(
        live_position_delete_files=3, live_delete_files=3, live_delete_bytes=3000,
        layout=delete_layout((1, 10), (1, 10), (1, 10)), properties=PARTITION_DELETES,
    )
    reason = skip_reason(run(lone, NO_DATA_REWRITE), A.REWRITE_POSITION_DELETE_FILES)
    assert reason == (
        "nothing to gain: 3 position delete files are each alone in its partition or already well sized: "
        "no rewrite group can merge them"
    )


def test_many_small_manifests_are_rewritten() -> None:
    action = recommended(run(make_status(manifest_count=60, manifest_bytes=60 * 8000)))[A.REWRITE_MANIFESTS]
    assert action.options == {}
    assert action.reason.startswith("60 manifests (468.8 KiB) would fit in about 1")
    assert A.REWRITE_MANIFESTS in recommended(run(make_status(manifest_count=10, manifest_bytes=80_000)))
    assert action.prediction is not None
    assert (action.prediction.files_in, action.prediction.files_out) == (60, 1)


def test_a_manifest_rewrite_after_a_data_rewrite_predicts_nothing() -> None:
    """The data rewrite's commit replaces the manifests: what is left to merge is unknown."""
    status = make_status(**small_files(80, 100), manifest_count=60, manifest_bytes=60 * 8000)
    actions = recommended(run(status))
    assert actions[A.REWRITE_DATA_FILES].prediction is None  # no layout: whole-table estimate only
    assert actions[A.REWRITE_MANIFESTS].prediction is None


def test_old_snapshots_beyond_retain_last_are_expired() -> None:
    status = make_status(
        snapshot_count=50, oldest_snapshot_age_seconds=240 * 3600.0, newest_snapshot_age_seconds=3600.0
    )
    r = run(status, past=ORPHANS_DONE)
    action = recommended(r)[A.EXPIRE_SNAPSHOTS]
    assert action.options == {"older_than": "2025-03-09T12:00:00+00:00", "retain_last": "5"}
    assert action.reason.startswith("about 25 of 50 snapshots are older than 5 days")
    assert r.expected_files_removed == 25


def test_expire_uses_the_policy_age_and_retention() -> None:
    status = make_status(
        snapshot_count=120, oldest_snapshot_age_seconds=7200.0, newest_snapshot_age_seconds=10.0
    )
    policy = Policy(snapshot_max_age_hours=0.5, snapshot_retain_last=10)
    action = recommended(run(status, policy, now=NOW.replace(microsecond=999_999)))[A.EXPIRE_SNAPSHOTS]
    assert action.options == {"older_than": "2025-03-14T11:30:00+00:00", "retain_last": "10"}


def test_orphans_are_looked_for_weekly_keeping_young_files() -> None:
    never = recommended(run(make_status()))[A.REMOVE_ORPHAN_FILES]
    assert never.options == {"older_than": "2025-03-11T12:00:00+00:00"}  # now - 72 h
    assert never.priority == 0
    recent = history(last_succeeded={A.REMOVE_ORPHAN_FILES: NOW - timedelta(days=3)})
    assert skip_reason(run(make_status(), past=recent), A.REMOVE_ORPHAN_FILES) == (
        "cadence not elapsed: last ran 72.0 h ago, cadence 168 h"
    )
    week_ago = history(last_succeeded={A.REMOVE_ORPHAN_FILES: NOW - timedelta(days=7)})
    assert A.REMOVE_ORPHAN_FILES in recommended(run(make_status(), past=week_ago))
    slower = Policy(cadence_hours=240, orphan_older_than_hours=100)
    assert "cadence 240 h" in skip_reason(run(make_status(), slower, past=week_ago), A.REMOVE_ORPHAN_FILES)
    old = history(last_succeeded={A.REMOVE_ORPHAN_FILES: NOW - timedelta(days=11)})
    assert recommended(run(make_status(), slower, past=old))[A.REMOVE_ORPHAN_FILES].options == {
        "older_than": "2025-03-10T08:00:00+00:00"
    }


# --- every skip reason -----------------------------------------------------------------------------


def test_nothing_to_gain_names_what_was_measured() -> None:
    r = run(make_status())
    assert skip_reason(r, A.REWRITE_DATA_FILES) == (
        "nothing to gain: 0 of 10 data files are small, under the SMALL_FILES thresholds, "
        "and no delete files apply"
    )
    assert skip_reason(r, A.REWRITE_POSITION_DELETE_FILES) == "nothing to gain: no position delete files"
    assert skip_reason(r, A.REWRITE_MANIFESTS) == "nothing to gain: 2 manifests (19.5 KiB), about 1 ideally"
    assert skip_reason(r, A.EXPIRE_SNAPSHOTS) == (
        "nothing to gain: 3 snapshots, no more than snapshot_retain_last 5"
    )


def test_nothing_to_gain_edges() -> None:
    few = run(make_status(**small_files(10)), Policy(min_input_files=20))
    assert skip_reason(few, A.REWRITE_DATA_FILES) == (
        "nothing to gain: 10 small data files, fewer than min_input_files 20"
    )
    one = run(make_status(live_position_delete_files=1), Policy(actions={A.REWRITE_DATA_FILES: False}))
    assert skip_reason(one, A.REWRITE_POSITION_DELETE_FILES) == (
        "nothing to gain: 1 position delete file: nothing to compact"
    )
    v3 = make_status(
        format_version=3, live_position_delete_files=40, live_deletion_vectors=40, live_data_files=40
    )
    assert skip_reason(run(v3), A.REWRITE_POSITION_DELETE_FILES).startswith(
        "nothing to gain: 40 deletion vectors (Puffin, as the manifests list them) are already one per data"
    )
    young = run(make_status(snapshot_count=150, oldest_snapshot_age_seconds=3600.0))
    assert skip_reason(young, A.EXPIRE_SNAPSHOTS).startswith(
        "nothing to gain: the oldest of 150 snapshots is 1 h old, within snapshot_max_age_hours 120; lower"
    )
    big_manifests = make_status(manifest_count=60, manifest_bytes=60 * 8 * MiB)  # an issue, but all full
    assert skip_reason(run(big_manifests), A.REWRITE_MANIFESTS).startswith("nothing to gain: 60 manifests")


def test_position_delete_files_left_by_an_upgrade_to_v3_are_converted_not_taken_for_vectors() -> None:
    """A v2 table upgraded to v3 keeps its Parquet position delete files: the manifests, not the format
    version, say they are not deletion vectors. With compaction off they are rewritten into deletion
    vectors (rewrite-all: Iceberg's size rules never pick a lone file); when compaction applies every
    delete file first, nothing is left to convert and nothing is recommended."""
    upgraded = make_status(
        format_version=3, live_position_delete_files=18, live_deletion_vectors=2, live_data_files=18,
        live_delete_bytes=18_000,
    )
    no_compaction = Policy(actions={A.REWRITE_DATA_FILES: False})
    actions = run(upgraded, no_compaction).actions
    [convert] = [a for a in actions if a.action is A.REWRITE_POSITION_DELETE_FILES]
    assert convert.options == {"rewrite-all": "true"}
    assert convert.reason.startswith("16 position delete files left from format v2 (Parquet, Avro or ORC")
    assert convert.prediction is not None and convert.prediction.files_in == 18
    assert skip_reason(run(upgraded), A.REWRITE_POSITION_DELETE_FILES) == (
        "nothing to gain: 16 position delete files left from format v2 are applied by rewrite_data_files "
        "first, which rewrites every data file they point at; none is left to convert"
    )


def test_position_delete_files_a_data_rewrite_leaves_in_hot_partitions_are_still_converted() -> None:
    """A data rewrite that leaves hot partitions out leaves their delete files too: the planning context
    carries that fact to the position delete rewrite, which then still converts what an upgrade to v3
    left (with no prediction of what the data rewrite leaves)."""
    upgraded = make_status(
        format_version=3, live_position_delete_files=18, live_deletion_vectors=2, live_data_files=18,
        live_delete_bytes=18_000,
    )
    compaction = ActionEstimate("compaction", applies_deletes=True, leaves_out_hot_partitions=True)
    context = PlanningContext(upgraded, Policy(), frozenset(), NOW).after(compaction)
    assert context.deletes_applied and context.hot_partitions_left_out
    convert = rewrite_position_delete_files.plan(context)
    assert isinstance(convert, ActionEstimate) and convert.options == {"rewrite-all": "true"}
    everything_applied = PlanningContext(upgraded, Policy(), frozenset(), NOW, deletes_applied=True)
    assert isinstance(rewrite_position_delete_files.plan(everything_applied), str)


def test_an_action_disabled_by_policy_is_skipped() -> None:
    policy = Policy(actions={A.REWRITE_DATA_FILES: False})
    assert skip_reason(run(make_status(**small_files(80)), policy), A.REWRITE_DATA_FILES) == (
        "disabled by policy (icepack.action.rewrite_data_files.enabled=false)"
    )


def test_a_disabled_table_gets_nothing() -> None:
    r = run(make_status(**small_files(80)), Policy(enabled=False))
    assert r.actions == () and r.priority == 0
    assert {s.reason for s in r.skipped} == {"table disabled"} and len(r.skipped) == len(ACTION_ORDER)


@pytest.mark.parametrize(
    ("past", "policy"),
    [
        (history(consecutive_failures=3, last_error=DISK_FULL), Policy()),
        (history(consecutive_failures=3, last_error=DISK_FULL, quarantined=True), Policy()),
        (history(consecutive_failures=3, last_error=DISK_FULL), Policy(quarantine_after_failures=2)),
    ],
)
def test_a_quarantined_table_gets_nothing_and_says_why(past: TableHistory, policy: Policy) -> None:
    r = run(make_status(**small_files(80)), policy, past)
    assert r.actions == ()
    assert {s.reason for s in r.skipped} == {f"quarantined after 3 consecutive failures: {DISK_FULL}"}


def test_failures_below_the_quarantine_count_do_not_stop_maintenance() -> None:
    r = run(make_status(**small_files(80)), past=history(consecutive_failures=2, last_error="boom"))
    assert A.REWRITE_DATA_FILES in recommended(r)
    assert "no error recorded" in run(make_status(), past=history(quarantined=True)).skipped[0].reason


def test_cadence_not_elapsed_says_when_it_last_ran() -> None:
    ran = history(last_succeeded={A.REWRITE_DATA_FILES: NOW - timedelta(hours=3.2)})
    assert skip_reason(run(make_status(**small_files(80)), past=ran), A.REWRITE_DATA_FILES) == (
        "cadence not elapsed: last ran 3.2 h ago, cadence 24 h"
    )
    day = history(last_succeeded={A.REWRITE_DATA_FILES: NOW - timedelta(hours=24)})
    assert A.REWRITE_DATA_FILES in recommended(run(make_status(**small_files(80)), past=day))
    naive = history(last_succeeded={A.REWRITE_DATA_FILES: datetime(2025, 3, 14, 10, 0)})
    naive_run = run(make_status(**small_files(80)), past=naive)
    assert "last ran 2.0 h ago" in skip_reason(naive_run, A.REWRITE_DATA_FILES)


def test_ignoring_the_cadence_drops_only_the_cadence_gate() -> None:
    """A person's forced run: past the cadence, never past quarantine, gc.enabled or a disabled action."""
    status = make_status(**small_files(80), snapshot_count=50, oldest_snapshot_age_seconds=900_000.0)
    ran = history(last_succeeded={a: NOW - timedelta(hours=1) for a in ACTION_ORDER})
    assert not recommended(run(status, past=ran)), "the cadence gate did not hold without force"
    forced = recommended(run(status, past=ran, force=True))
    assert {A.REWRITE_DATA_FILES, A.EXPIRE_SNAPSHOTS, A.REMOVE_ORPHAN_FILES} <= set(forced)
    unforced_orphans = recommended(run(status))[A.REMOVE_ORPHAN_FILES]
    assert forced[A.REMOVE_ORPHAN_FILES].options == unforced_orphans.options, "the orphan age floor moved"

    quarantined = history(consecutive_failures=3, last_error=DISK_FULL, quarantined=True)
    assert run(status, past=quarantined, force=True).actions == ()
    gc_off = run(status.model_copy(update={"properties": {"gc.enabled": "false"}}), past=ran, force=True)
    assert all(skip_reason(gc_off, action) == gc_disabled_reason("false") for action in DESTRUCTIVE)
    off = run(status, Policy(actions={A.REWRITE_DATA_FILES: False}), ran, force=True)
    assert skip_reason(off, A.REWRITE_DATA_FILES).startswith("disabled by policy")


# Iceberg reads gc.enabled with Java's Boolean.parseBoolean: only "true", in any letter case, is true.
@pytest.mark.parametrize("value", ["false", "FALSE", " False ", "no", "0", "1", "yes", "true ", " true", ""])
def test_gc_disabled_tables_never_get_destructive_actions(value: str) -> None:
    status = make_status(
        **small_files(80), snapshot_count=50, oldest_snapshot_age_seconds=900_000.0,
        properties={"gc.enabled": value},
    )
    r = run(status)
    assert all(skip_reason(r, action) == gc_disabled_reason(value) for action in DESTRUCTIVE)
    assert f"gc.enabled={value!r} on the table, which Iceberg reads as false" in gc_disabled_reason(value)
    assert A.REWRITE_DATA_FILES in recommended(r)


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "tRuE"])
def test_gc_enabled_in_any_letter_case_allows_destructive_actions(value: str) -> None:
    status = make_status(
        **small_files(80), snapshot_count=50, oldest_snapshot_age_seconds=900_000.0,
        properties={"gc.enabled": value},
    )
    assert {A.EXPIRE_SNAPSHOTS, A.REMOVE_ORPHAN_FILES} <= set(recommended(run(status)))


def test_a_table_with_no_snapshot_gets_nothing() -> None:
    empty = make_status(snapshot_id=None, live_data_files=0, live_data_bytes=0, snapshot_count=0,
                        oldest_snapshot_age_seconds=None, newest_snapshot_age_seconds=None)
    r = run(empty)
    assert r.actions == () and {s.reason for s in r.skipped} == {"table has no snapshot"}


def test_unknown_health_gets_nothing() -> None:
    r = run(make_status(**small_files(80)), health=unknown_health("lake.ns.t", "manifest unreadable"))
    assert r.actions == () and {s.reason for s in r.skipped} == {"health unknown: manifest unreadable"}


# --- order, priority, determinism ------------------------------------------------------------------


def test_actions_follow_action_order() -> None:
    status = make_status(
        **small_files(80, 100), live_position_delete_files=5, manifest_count=60, manifest_bytes=480_000,
        snapshot_count=200, oldest_snapshot_age_seconds=900_000.0, statistics=make_statistics(),
    )
    r = run(status, Policy(table_stats_commits_behind=10, partition_stats_commits_behind=10))
    assert [a.action for a in r.actions] == list(ACTION_ORDER)
    assert r.skipped == ()


def test_more_gain_for_the_same_cost_ranks_higher() -> None:
    many = run(make_status(**small_files(400)), past=ORPHANS_DONE)
    few = run(make_status(**small_files(20)), past=ORPHANS_DONE)
    assert many.priority > few.priority > 0


def test_more_bytes_to_rewrite_for_the_same_gain_ranks_lower() -> None:
    cheap = run(make_status(**small_files(100, each=MiB)), Policy(target_file_size_bytes=100 * MiB))
    costly_status = make_status(**small_files(100, each=300 * MiB))
    costly = run(costly_status, Policy(target_file_size_bytes=30_000 * MiB))
    assert cheap.expected_files_removed == costly.expected_files_removed == 99
    assert cheap.estimated_bytes_to_rewrite < costly.estimated_bytes_to_rewrite
    assert cheap.priority > costly.priority > 0


def test_priority_boost_scales_the_priority() -> None:
    status = make_status(**small_files(80))
    plain, boosted = run(status), run(status, Policy(priority_boost=2.0))
    assert boosted.priority == pytest.approx(2 * plain.priority)
    assert recommended(boosted)[A.REWRITE_DATA_FILES].priority == pytest.approx(
        2 * recommended(plain)[A.REWRITE_DATA_FILES].priority
    )
    assert run(status, Policy(priority_boost=0)).priority == 0


def test_a_table_needing_only_orphan_cleanup_ranks_last() -> None:
    orphans_only = run(make_status())
    assert orphans_only.needs_work and orphans_only.priority == 0
    assert run(make_status(manifest_count=12, manifest_bytes=96_000)).priority > orphans_only.priority


def test_same_inputs_same_recommendation_and_naive_now_is_utc() -> None:
    status = make_status(**small_files(80), snapshot_count=50, oldest_snapshot_age_seconds=900_000.0)
    assert run(status) == run(status) == run(status, now=NOW.replace(tzinfo=None))


@given(
    small=st.integers(0, 5000),
    position=st.integers(0, 500),
    equality=st.integers(0, 500),
    manifests=st.integers(0, 3000),
    snapshots=st.integers(0, 3000),
    ages=st.tuples(st.floats(0, 10**8), st.floats(0, 10**8)).map(sorted),
    last_ran=st.none() | st.floats(-10, 10**4),
    policy=st.builds(
        Policy,
        min_input_files=st.integers(1, 50),
        snapshot_max_age_hours=st.floats(0, 1000),
        snapshot_retain_last=st.integers(1, 100),
        orphan_older_than_hours=st.floats(24, 1000),
        priority_boost=st.floats(0, 10),
    ),
)
def test_any_table_gets_each_action_decided_exactly_once(
    small: int, position: int, equality: int, manifests: int, snapshots: int, ages: list[float],
    last_ran: float | None, policy: Policy,
) -> None:
    status = make_status(
        **small_files(small, small + 10), live_position_delete_files=position,
        live_equality_delete_files=equality, live_delete_bytes=(position + equality) * 1000,
        manifest_count=manifests, manifest_bytes=manifests * 9000,
        snapshot_count=snapshots, newest_snapshot_age_seconds=ages[0], oldest_snapshot_age_seconds=ages[1],
    )
    past = TableHistory.empty("lake.ns.t")
    if last_ran is not None:
        past = history(last_succeeded={a: NOW - timedelta(hours=last_ran) for a in ACTION_ORDER})
    r = run(status, policy, past)
    assert [d.action for d in (*r.actions, *r.skipped)].count(A.REWRITE_DATA_FILES) == 1
    assert sorted(decisions(r), key=ACTION_ORDER.index) == list(ACTION_ORDER)
    assert len(r.actions) + len(r.skipped) == len(ACTION_ORDER)
    assert [a.action for a in r.actions] == [a for a in ACTION_ORDER if a in recommended(r)]
    for action in r.actions:
        assert action.priority >= 0 and action.reason
        if "older_than" in action.options:
            older_than = datetime.fromisoformat(action.options["older_than"])
            assert older_than <= NOW - timedelta(hours=min(policy.snapshot_max_age_hours, 24))
    if A.EXPIRE_SNAPSHOTS in recommended(r):
        assert recommended(r)[A.EXPIRE_SNAPSHOTS].options["retain_last"] == str(policy.snapshot_retain_last)


def test_a_branch_only_table_gets_expiry_and_the_orphan_sweep() -> None:
    branch_only = make_status(
        snapshot_id=None, live_data_files=0, live_data_bytes=0, manifest_count=0, manifest_bytes=0,
        snapshot_count=40, oldest_snapshot_age_seconds=900_000.0, branch_count=1,
    )
    assert {A.EXPIRE_SNAPSHOTS, A.REMOVE_ORPHAN_FILES} <= set(recommended(run(branch_only)))


def test_an_expiry_iceberg_cannot_run_for_an_unreadable_property_is_skipped_saying_why() -> None:
    status = make_status(
        snapshot_count=50, oldest_snapshot_age_seconds=900_000.0,
        properties={"history.expire.min-snapshots-to-keep": "1_000"},
    )
    reason = skip_reason(run(status), A.EXPIRE_SNAPSHOTS)
    assert "history.expire.min-snapshots-to-keep='1_000' cannot be read by Iceberg" in reason
    assert A.REMOVE_ORPHAN_FILES in recommended(run(status))


def test_manifests_are_judged_against_the_tables_own_manifest_target() -> None:
    status = make_status(manifest_count=12, manifest_bytes=12 * 64 * 1024)
    assert A.REWRITE_MANIFESTS in recommended(run(status))
    small_target = status.model_copy(update={"properties": {"commit.manifest.target-size-bytes": "65536"}})
    assert "about 12 ideally" in skip_reason(run(small_target), A.REWRITE_MANIFESTS)
