"""Contract: `appends` sums a run of plain append commits from their summaries and refuses, naming the
commit and the key, anything else: another operation, a missing or unusable count, anything deleted or
removed, a delete file added. `totals` needs every `total-*` key; `totals_disagree` names each total that
is not the known figures plus the appends (or any delete). `carried_bounds` keeps the low ends and widens
the high ends by what was appended, from exact values or from an earlier summary status's bounds. A
summary status must say what it carries; a status stored before provenance existed reads as full."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from icepack_dagster.domain.table.appends import (
    Appends,
    Totals,
    appends,
    carried_bounds,
    totals,
    totals_disagree,
)
from icepack_dagster.domain.table.status import CarriedBounds, TableStatus
from tests.factories import make_status


def _append(files: int = 1, records: int = 10, size: int = 1000, **extra: str) -> dict[str, str]:
    return {
        "operation": "append", "added-data-files": str(files), "added-records": str(records),
        "added-files-size": str(size), **extra,
    }


def test_appends_are_summed() -> None:
    summed = appends([_append(), _append(3, 30, 5000, **{"changed-partition-count": "2"})])
    assert summed == Appends(commits=2, data_files=4, records=40, files_size=6000, partitions_touched=3)
    assert appends([]) == Appends(commits=0, data_files=0, records=0, files_size=0, partitions_touched=0)


@pytest.mark.parametrize(
    ("summary", "reason"),
    [
        (_append() | {"operation": "overwrite"}, "commit 2 of 2 since the known status is a overwrite"),
        (_append() | {"operation": "replace"}, "is a replace, not an append"),
        (_append() | {"operation": "delete"}, "is a delete, not an append"),
        ({k: v for k, v in _append().items() if k != "operation"}, "commit without operation"),
        ({k: v for k, v in _append().items() if k != "added-records"}, "no usable added-records"),
        (_append() | {"added-files-size": "-1"}, "no usable added-files-size"),
        (_append() | {"added-data-files": "many"}, "no usable added-data-files"),
        (_append(**{"deleted-data-files": "1"}), "reports deleted-data-files"),
        (_append(**{"added-delete-files": "1", "added-position-delete-files": "1"}),
         "reports added-delete-files, added-position-delete-files"),
        (_append(**{"removed-files-size": "10"}), "reports removed-files-size"),
    ],
)
def test_anything_but_a_plain_append_is_refused_by_name(summary: dict[str, str], reason: str) -> None:
    found = appends([_append(), summary])
    assert isinstance(found, str) and reason in found


def test_zero_counts_of_removals_are_still_an_append() -> None:
    assert isinstance(appends([_append(**{"deleted-data-files": "0", "removed-files-size": "0"})]), Appends)


TOTALS = {
    "total-data-files": "12", "total-delete-files": "0", "total-records": "1010",
    "total-files-size": "4194305000", "total-position-deletes": "0", "total-equality-deletes": "0",
}


def test_totals_need_every_key() -> None:
    assert totals(TOTALS) == Totals(data_files=12, delete_files=0, records=1010, files_size=4194305000,
                                    position_deletes=0, equality_deletes=0)
    missing = totals({k: v for k, v in TOTALS.items() if k not in ("total-records", "total-files-size")})
    assert missing == "the current snapshot's summary has no usable total-records, total-files-size"


def test_totals_must_be_the_known_figures_plus_the_appends() -> None:
    known = make_status()  # 10 files of 400 MiB, 1000 records
    appended = appends([_append(2, 10, 1000)])
    assert isinstance(appended, Appends)
    now = totals(TOTALS)
    assert isinstance(now, Totals)
    assert totals_disagree(known, appended, now) is None
    wrong = now.model_copy(update={"records": 1011, "delete_files": 1})
    assert totals_disagree(known, appended, wrong) == (
        "the current snapshot's summary says total-records 1011 (expected 1010), "
        "total-delete-files 1 (expected 0)"
    )


def test_bounds_keep_the_low_ends_and_widen_by_what_was_appended() -> None:
    known = make_status(small_file_count=3, small_file_bytes=300, partition_count=5,
                        small_file_threshold_bytes=100)
    appended = Appends(commits=2, data_files=4, records=8, files_size=10_000, partitions_touched=2)
    bounds = carried_bounds(known, appended)
    assert bounds == CarriedBounds(data_files_added=4, small_files=(3, 7), small_bytes=(300, 300 + 4 * 99),
                                   partitions=(5, 7))
    tiny = appended.model_copy(update={"files_size": 50})
    assert carried_bounds(known, tiny).small_bytes == (300, 350)  # no more than the bytes appended

    summarised = known.model_copy(update={"depth": "summary", "manifests_read_at": 1, "carried": bounds})
    again = carried_bounds(summarised, appended)
    assert again.small_files == (3, 11) and again.partitions == (5, 9) and again.data_files_added == 8


def test_a_summary_status_says_what_it_carries_and_old_statuses_read_as_full() -> None:
    bounds = CarriedBounds(data_files_added=1, small_files=(0, 1), small_bytes=(0, 5), partitions=(1, 2))
    with pytest.raises(ValidationError, match="a summary status needs carried bounds"):
        make_status(depth="summary")
    with pytest.raises(ValidationError, match="a summary status needs carried bounds"):
        make_status(carried=bounds, manifests_read_at=1)
    with pytest.raises(ValidationError, match="low <= high"):
        CarriedBounds(data_files_added=1, small_files=(2, 1), small_bytes=(0, 5), partitions=(1, 2))
    summary = make_status(depth="summary", carried=bounds, manifests_read_at=1, snapshot_id=2)
    assert TableStatus.model_validate_json(summary.model_dump_json()) == summary
    assert summary.entries_read_at == 1 and make_status(snapshot_id=4).entries_read_at == 4
    assert (summary.small_files_known, make_status(small_file_count=3).small_files_known) == ("0-1", "3")

    stored = make_status().model_dump(mode="json")
    for field in ("depth", "manifests_read_at", "carried"):
        stored.pop(field)
    assert TableStatus.model_validate(stored) == make_status()
