"""Compaction planner contract (pure; Iceberg's own results are checked in
tests/engine/test_compaction_prediction.py): Iceberg's grouping (current-spec partitions, earlier
specs' files together), its group rules (min-input-files, enough content, too much content, deletes),
its output file count; the options chosen (min-input-files lowered only to what merges, explicit sizes);
hot partitions left out with a `where` that selects exactly their rows' range; partition values shown
as their writers meant them; predicted against done, and `no_effect` when nothing happened."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.planners.compaction import (
    OTHER_SPECS,
    RewritePrediction,
    RewriteSizes,
    expected_output_files,
    hot_partitions,
    leave_out_filter,
    lone_small_files,
    predict_rewrite,
    settled_partitions,
    smallest_mergeable_group,
)
from icepack_dagster.domain.actions.planners.position_deletes import (
    delete_rewrite_sizes,
    predict_position_delete_rewrite,
)
from icepack_dagster.domain.outcomes.action_outcome import compare
from icepack_dagster.domain.table.partition_filter import display_value, partition_predicate
from icepack_dagster.domain.table.partition_layout import (
    PartitionCandidates,
    PartitionField,
    PartitionLayout,
    PartitionSpecLayout,
)

MiB = 1024**2
SIZES = RewriteSizes(target=512 * MiB, minimum=384 * MiB, maximum=int(512 * MiB * 1.8))
DAY = PartitionField(name="ts_day", transform="day", source_column="ts", source_type="timestamptz")
MONTH = PartitionField(name="ts_month", transform="month", source_column="ts", source_type="timestamptz")
NOV_1 = 20393  # days from 1970-01-01 to 2025-11-01
NOW_MS = int(datetime(2025, 11, 5, 12, tzinfo=UTC).timestamp() * 1000)


def candidates(
    spec_id: int, value: int, small: int = 0, large: int = 0, **fields: Any
) -> PartitionCandidates:
    return PartitionCandidates(
        spec_id=spec_id,
        values=(value,),
        small_files=small,
        small_bytes=small * MiB,
        large_files=large,
        large_bytes=large * 1000 * MiB,
        **fields,
    )


def layout(*found: PartitionCandidates) -> PartitionLayout:
    """Spec 0 by month, spec 1 (current) by day."""
    specs = (PartitionSpecLayout(spec_id=0, fields=(MONTH,)), PartitionSpecLayout(spec_id=1, fields=(DAY,)))
    return PartitionLayout(
        current_spec_id=1, specs=specs, large_file_threshold_bytes=SIZES.maximum, candidates=found
    )


@pytest.mark.parametrize(
    ("size", "files"),
    [
        (10 * MiB, 1),
        (512 * MiB, 1),  # exactly the target, no remainder
        (1024 * MiB + 400 * MiB, 3),  # remainder above min-file-size: kept as its own file
        (1024 * MiB + 40 * MiB, 2),  # small remainder spread: files stay within 10% of the target
        (512 * MiB + 100 * MiB, 2),  # spreading it would make one file 20% too large
    ],
)
def test_output_files_follow_icebergs_rounding(size: int, files: int) -> None:
    assert expected_output_files(size, SIZES) == files


def test_groups_are_current_partitions_and_earlier_specs_together() -> None:
    found = layout(
        candidates(1, NOV_1, small=3),  # rewritten: 3 >= min-input-files 3
        candidates(1, NOV_1 + 1, small=2),  # 2 < 3 and 2 MiB is no target's worth: left alone
        candidates(1, NOV_1 + 2, large=1),  # one file above max-file-size: split
        candidates(0, 670, small=1),  # two months of the earlier spec: one group
        candidates(0, 671, small=2),
    )
    prediction = predict_rewrite(found, SIZES, min_input_files=3)
    rows = {g.partition: (g.files_in, g.files_out) for g in prediction.groups}
    assert rows == {OTHER_SPECS: (3, 1), "ts_day=2025-11-01": (3, 1), "ts_day=2025-11-03": (1, 2)}
    assert prediction.files_in == 7 and not prediction.exact  # earlier specs are written per day
    assert smallest_mergeable_group(found) == 2


def test_a_single_small_file_is_never_rewritten_and_counts_as_lone() -> None:
    found = layout(*(candidates(1, NOV_1 + d, small=1) for d in range(11)))
    assert predict_rewrite(found, SIZES, min_input_files=1).groups == ()
    assert lone_small_files(found) == 11 and smallest_mergeable_group(found) is None


def test_deletes_make_a_group_a_rewrite_but_not_an_exact_one() -> None:
    found = layout(candidates(1, NOV_1, small=1, delete_files=2))
    assert predict_rewrite(found, SIZES, 5).groups == ()  # without delete-file-threshold
    prediction = predict_rewrite(found, SIZES, 5, apply_deletes=True)
    assert (prediction.files_in, prediction.exact) == (3, False)


def test_hot_partitions_are_left_out_with_a_filter_on_the_source_column() -> None:
    found = layout(
        candidates(1, NOV_1, small=4, last_write_ms=NOW_MS - 3 * 3600_000),
        candidates(1, NOV_1 + 4, small=4, last_write_ms=NOW_MS - 60_000),
    )
    keys, labels, predicates = hot_partitions(found, since_ms=NOW_MS - 3600_000)
    assert labels == ["ts_day=2025-11-05"]
    assert leave_out_filter(predicates) == (
        "NOT ((`ts` >= TIMESTAMP '2025-11-05 00:00:00+00:00' AND "
        "`ts` < TIMESTAMP '2025-11-06 00:00:00+00:00'))"
    )
    prediction = predict_rewrite(found, SIZES, 2, leave_out=keys)
    assert [g.partition for g in prediction.groups] == ["ts_day=2025-11-01"]


def test_small_files_a_rewrite_would_write_back_as_many_are_settled_and_left_out() -> None:
    """Two 282 MiB files (564 MiB over a 512 MiB target) come back from Iceberg as two 282 MiB files,
    still small: rewriting them again and again would change nothing. Twelve 94 MiB files become three,
    which is worth it once; the three are then settled too."""
    twelve = PartitionCandidates(spec_id=1, values=(NOV_1 + 1,), small_files=12, small_bytes=12 * 94 * MiB)
    found = layout(
        PartitionCandidates(spec_id=1, values=(NOV_1,), small_files=2, small_bytes=2 * 282 * MiB),
        twelve,
        candidates(1, NOV_1 + 2, large=1),  # a large file is split, never settled
    )
    keys, labels, predicates = settled_partitions(found, SIZES, leave_out=frozenset())
    assert labels == ["ts_day=2025-11-01"] and keys == {(1, (NOV_1,))}
    assert leave_out_filter(predicates) == (
        "NOT ((`ts` >= TIMESTAMP '2025-11-01 00:00:00+00:00' AND "
        "`ts` < TIMESTAMP '2025-11-02 00:00:00+00:00'))"
    )
    prediction = predict_rewrite(found, SIZES, 2, leave_out=keys)
    assert [(g.partition, g.files_in, g.files_out) for g in prediction.groups] == [
        ("ts_day=2025-11-02", 12, 3), ("ts_day=2025-11-03", 1, 2)
    ]
    three = twelve.model_copy(update={"small_files": 3})
    assert settled_partitions(layout(three), SIZES, leave_out=frozenset())[1] == ["ts_day=2025-11-02"]


def test_a_hot_partition_without_an_expressible_filter_gets_none() -> None:
    bucket = PartitionField(name="b", transform="bucket[16]", source_column="id", source_type="long")
    spec = PartitionSpecLayout(spec_id=0, fields=(bucket,))
    found = PartitionLayout(
        current_spec_id=0,
        specs=(spec,),
        large_file_threshold_bytes=SIZES.maximum,
        candidates=(PartitionCandidates(spec_id=0, values=(3,), small_files=2, last_write_ms=NOW_MS),),
    )
    keys, _, predicates = hot_partitions(found, since_ms=0)
    assert keys and predicates == []


@pytest.mark.parametrize(
    ("field", "value", "shown", "predicate"),
    [
        (
            MONTH,
            670,
            "ts_month=2025-11",
            "(`ts` >= TIMESTAMP '2025-11-01 00:00:00+00:00' AND "
            "`ts` < TIMESTAMP '2025-12-01 00:00:00+00:00')",
        ),
        (
            PartitionField(name="h", transform="hour", source_column="t", source_type="timestamp"),
            1,
            "h=1970-01-01-01",
            "(`t` >= TIMESTAMP_NTZ '1970-01-01 01:00:00' AND `t` < TIMESTAMP_NTZ '1970-01-01 02:00:00')",
        ),
        (
            PartitionField(name="d", transform="identity", source_column="d", source_type="date"),
            NOV_1,
            "d=2025-11-01",
            "`d` = DATE '2025-11-01'",
        ),
        (
            PartitionField(name="d", transform="day", source_column="d", source_type="date"),
            NOV_1,
            "d=2025-11-01",
            "(`d` >= DATE '2025-11-01' AND `d` < DATE '2025-11-02')",
        ),
        (
            PartitionField(name="s", transform="identity", source_column="a.s", source_type="string"),
            "it's",
            "s=it's",
            "`a`.`s` = 'it\\'s'",
        ),
        (
            PartitionField(name="p", transform="identity", source_column="p", source_type="int"),
            None,
            "p=null",
            "`p` IS NULL",
        ),
    ],
)
def test_partition_values_display_and_filter(
    field: PartitionField, value: Any, shown: str, predicate: str
) -> None:
    assert display_value(field, value) == shown
    assert partition_predicate((field,), (value,)) == predicate


def test_nothing_done_where_work_was_planned_is_no_effect() -> None:
    planned = RewritePrediction(files_in=11, files_out=1, bytes_in=100, exact=True)
    rewrite = MaintenanceAction.REWRITE_DATA_FILES
    nothing = compare(rewrite, planned, {"rewritten_data_files_count": 0, "added_data_files_count": 0})
    assert nothing is not None and nothing.no_effect and not nothing.near
    done = compare(rewrite, planned, {"rewritten_data_files_count": 11, "added_data_files_count": 1})
    assert done is not None and done.near and not done.no_effect
    assert compare(rewrite, None, {}) is None
    expiry = compare(
        MaintenanceAction.EXPIRE_SNAPSHOTS,
        planned.model_copy(update={"exact": False}),
        {"deleted_manifest_lists_count": 7},
    )
    assert expiry is not None and expiry.near and expiry.done is not None and expiry.done.files_in == 7


def test_a_layout_read_back_from_json_plans_the_same() -> None:
    """Statuses travel as JSON (CLI, Dagster metadata); bytes partition values come back hashable."""
    decimal = PartitionField(
        name="amount", transform="identity", source_column="amount", source_type="decimal(9, 2)"
    )
    spec = PartitionSpecLayout(spec_id=0, fields=(decimal,))
    found = PartitionLayout(
        current_spec_id=0,
        specs=(spec,),
        large_file_threshold_bytes=SIZES.maximum,
        candidates=(
            PartitionCandidates(spec_id=0, values=(("bytes", "04d2"),), small_files=3, small_bytes=3),
        ),
    )
    again = PartitionLayout.model_validate_json(found.model_dump_json())
    assert again == found
    assert predict_rewrite(again, SIZES, 2) == predict_rewrite(found, SIZES, 2)
    assert predict_rewrite(again, SIZES, 2).groups[0].partition == "amount=0x04d2"


def test_an_unpartitioned_table_written_just_now_has_no_hot_partition() -> None:
    spec = PartitionSpecLayout(spec_id=0)
    found = PartitionLayout(
        current_spec_id=0, specs=(spec,), large_file_threshold_bytes=SIZES.maximum,
        candidates=(PartitionCandidates(spec_id=0, values=(), small_files=9, last_write_ms=NOW_MS),),
    )
    assert hot_partitions(found, since_ms=0) == (frozenset(), [], [])
    assert [g.partition for g in predict_rewrite(found, SIZES, 5).groups] == ["unpartitioned"]


# --- position delete files ---------------------------------------------------------------------------
DELETE_SIZES = delete_rewrite_sizes(64 * MiB)


def deletes(spec_id: int, value: int, files: int, size: int) -> PartitionCandidates:
    return candidates(
        spec_id, value, delete_files=files, position_delete_files=files, position_delete_bytes=size
    )


def test_position_deletes_of_an_earlier_spec_keep_their_own_partition() -> None:
    """Unlike data files, Iceberg groups them by their own partition, coerced to the combined type."""
    found = layout(deletes(0, 670, 2, 10), deletes(1, NOV_1, 3, 10), deletes(1, NOV_1 + 1, 1, 10))
    prediction = predict_position_delete_rewrite(found, DELETE_SIZES, 2)
    assert prediction is not None and prediction.exact
    assert [(g.partition, g.files_in, g.files_out) for g in prediction.groups] == [
        ("ts_day=2025-11-01", 3, 1), ("ts_month=2025-11", 2, 1)
    ]


def test_position_delete_groups_follow_iceberg_rules_and_say_when_inexact() -> None:
    big = 70 * MiB  # over the 64 MiB target: two files are rewritten whatever min-input-files says
    prediction = predict_position_delete_rewrite(layout(deletes(1, NOV_1, 2, big)), DELETE_SIZES, 5)
    assert prediction is not None and (prediction.files_in, prediction.files_out) == (2, 1)
    assert not prediction.exact  # one of them may be inside the size range Iceberg leaves alone
    lone_large = predict_position_delete_rewrite(layout(deletes(1, NOV_1, 1, 200 * MiB)), DELETE_SIZES, 2)
    assert lone_large is not None and lone_large.files_in == 1  # above max-file-size-bytes: split
    few = predict_position_delete_rewrite(layout(deletes(1, NOV_1, 2, 10)), DELETE_SIZES, 3)
    assert few is not None and few.groups == ()


def test_position_deletes_without_per_partition_counts_are_not_predicted() -> None:
    unknown = candidates(1, NOV_1, delete_files=3)  # a status measured before they were counted
    assert predict_position_delete_rewrite(layout(unknown), DELETE_SIZES, 2) is None
