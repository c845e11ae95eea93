"""Contract: how orphan removal's options follow the predicted removal and how its output is read.

A removal predicted to delete at least `STREAM_RESULTS_FROM` files streams its results; below it the
driver holds the whole list either way, so it does not. The procedure returns one row per deleted file,
or, streamed, a sample of at most `STREAMED_SAMPLE_SIZE`: fewer rows are every file and counted; a full
sample is only a lower bound, so the count is left for the engine (None), never reported short. A dry
run removes nothing.
"""

from __future__ import annotations

import pytest

from icepack_dagster.domain.actions import remove_orphan_files
from icepack_dagster.domain.actions.remove_orphan_files import (
    STREAM_RESULTS_FROM,
    STREAMED_SAMPLE_SIZE,
    read_outcome,
    removal_options,
)


def test_only_a_removal_beyond_one_delete_group_is_streamed() -> None:
    assert STREAM_RESULTS_FROM == 100_000
    assert removal_options(0) == removal_options(STREAM_RESULTS_FROM - 1) == {}
    assert removal_options(STREAM_RESULTS_FROM) == {"stream_results": "true"}
    assert remove_orphan_files.DEFINITION.removal_options is removal_options


FULL = STREAMED_SAMPLE_SIZE


def rows(count: int) -> list[dict[str, object]]:
    return [{"orphan_file_location": f"file:/w/t/data/{n}.parquet"} for n in range(count)]


@pytest.mark.parametrize(
    ("count", "options", "output", "removed"),
    [
        (5, {}, {"orphan_file_count": 5}, 5),
        (FULL + 3, {}, {"orphan_file_count": FULL + 3}, FULL + 3),
        (5, {"stream_results": "true"}, {"orphan_file_count": 5}, 5),
        (FULL, {"stream_results": "true"}, {"orphan_file_sample_count": FULL}, None),
        (5, {"dry_run": "true"}, {"orphan_file_count": 5}, 0),
        (FULL, {"stream_results": "true", "dry_run": "true"}, {"orphan_file_sample_count": FULL}, 0),
    ],
    ids=["collected", "collected_large", "streamed_below_the_sample", "streamed_full_sample", "dry_run",
         "streamed_dry_run"],
)
def test_the_output_is_counted_only_where_it_is_every_file(
    count: int, options: dict[str, str], output: dict[str, int], removed: int | None
) -> None:
    impact = read_outcome(rows(count), options)
    assert (impact.procedure_output, impact.orphan_files_removed) == (output, removed)
