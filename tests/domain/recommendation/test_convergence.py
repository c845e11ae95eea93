"""Contract, as a property: compaction converges. For any layout of a table partitioned by day (small
files, large files, both, in any number of partitions, some of them empty of candidates), when the
recommended `rewrite_data_files` succeeds exactly as its prediction says (each rewritten partition's
files replaced by the predicted number of files of even size), the recommendation on the new state
never asks to rewrite any of the same partitions again."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.planners.compaction import partition_label
from icepack_dagster.domain.health.judging import assess_health
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import Policy
from icepack_dagster.domain.recommendation.recommender import recommend
from icepack_dagster.domain.table.partition_layout import (
    PartitionCandidates,
    PartitionField,
    PartitionLayout,
    PartitionSpecLayout,
)
from icepack_dagster.domain.table.status import TableStatus
from tests.factories import NOW, MiB, make_status

DAY = PartitionField(name="ts_day", transform="day", source_column="ts", source_type="timestamptz")
SMALL, LARGE = 384 * MiB, 921 * MiB  # the status's small-file threshold, and 2.4x it

Layout = tuple[int, int, int, int]  # small files, MiB each, large files, MiB each
partition = st.tuples(
    st.integers(min_value=0, max_value=20),  # small files
    st.integers(min_value=1, max_value=383),  # MiB each
    st.integers(min_value=0, max_value=3),  # large files
    st.integers(min_value=922, max_value=4000),  # MiB each
).filter(lambda p: p[0] + p[2] > 0)


def status_of(candidates: tuple[PartitionCandidates, ...], fine_files: int) -> TableStatus:
    """A table whose candidates are `candidates`, beside `fine_files` well-sized files."""
    layout = PartitionLayout(current_spec_id=0, specs=(PartitionSpecLayout(spec_id=0, fields=(DAY,)),),
                             large_file_threshold_bytes=LARGE, candidates=candidates)
    small = sum(c.small_files for c in candidates)
    small_bytes = sum(c.small_bytes for c in candidates)
    files = small + sum(c.large_files for c in candidates) + fine_files
    data = small_bytes + sum(c.large_bytes for c in candidates) + fine_files * 450 * MiB
    return make_status(live_data_files=files, small_file_count=small, small_file_bytes=small_bytes,
                       live_data_bytes=data, layout=layout, partition_count=len(candidates) + 1)


def rewritten(status: TableStatus) -> dict[str, Any]:
    """The partitions (labels) the recommended rewrite plans, with their predicted groups."""
    recommendation = recommend(status, assess_health(status, HealthThresholds()), Policy(),
                               TableHistory.empty(status.table), NOW)
    rewrite = MaintenanceAction.REWRITE_DATA_FILES
    action = next((a for a in recommendation.actions if a.action is rewrite), None)
    if action is None or action.prediction is None:
        return {}
    return {g.partition: g for g in action.prediction.groups}


def applied(status: TableStatus, groups: dict[str, Any]) -> tuple[tuple[PartitionCandidates, ...], int]:
    """The candidates after the rewrite did exactly what was predicted, and how many well-sized files
    it wrote."""
    assert status.layout is not None
    kept, fine = [], 0
    for found in status.layout.candidates:
        group = groups.get(partition_label(status.layout, 0, found.values))
        if group is None:
            kept.append(found)
            continue
        each = group.bytes_in // group.files_out
        if each < SMALL:
            update = {"small_files": group.files_out, "small_bytes": group.bytes_in}
            kept.append(found.model_copy(update=update | {"large_files": 0, "large_bytes": 0}))
        elif each > LARGE:
            update = {"large_files": group.files_out, "large_bytes": group.bytes_in}
            kept.append(found.model_copy(update=update | {"small_files": 0, "small_bytes": 0}))
        else:
            fine += group.files_out
    return tuple(kept), fine


@settings(max_examples=300, deadline=None)
@given(st.lists(partition, min_size=1, max_size=8).filter(lambda ps: sum(p[0] for p in ps) >= 8))
@example([(2, 282, 0, 922), (12, 94, 0, 922), (12, 94, 0, 922)])  # rewrites that write back as many files
def test_a_rewrite_done_as_predicted_is_never_asked_for_again(partitions: list[Layout]) -> None:
    candidates = tuple(
        PartitionCandidates(spec_id=0, values=(20000 + day,), small_files=small,
                            small_bytes=small * small_mib * MiB, large_files=large,
                            large_bytes=large * large_mib * MiB)
        for day, (small, small_mib, large, large_mib) in enumerate(partitions)
    )
    before = status_of(candidates, fine_files=1)
    first = rewritten(before)
    assume(first)  # a layout compaction has nothing to do for says nothing about convergence
    after_candidates, written = applied(before, first)
    again = rewritten(status_of(after_candidates, fine_files=1 + written))
    assert not set(first) & set(again), (first, again)
