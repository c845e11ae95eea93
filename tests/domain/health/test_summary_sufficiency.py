"""Contract: a summary status stands in for a full read only when its high bounds, every small file
counted mergeable, show no issue that needs manifest entries (small files, fine partitioning, delete
files); then neither does any count within the bounds, and the health as carried is the same (checked
here against the high end). The reason names the issue. A full status is refused."""

from __future__ import annotations

import pytest

from icepack_dagster.domain.health.judging import assess_health
from icepack_dagster.domain.health.summary_sufficiency import summary_falls_short
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.status import CarriedBounds, TableStatus
from tests.factories import make_status

THRESHOLDS = HealthThresholds()  # small files: from 8 of them, at 30% of the data files


def _summary(small: tuple[int, int], data_files: int = 20, **overrides: object) -> TableStatus:
    bounds = CarriedBounds(
        data_files_added=small[1] - small[0], small_files=small, small_bytes=(small[0], small[1] * 10),
        partitions=(1, 1 + small[1] - small[0]),
    )
    return make_status(
        depth="summary", carried=bounds, manifests_read_at=1, snapshot_id=2, live_data_files=data_files,
        small_file_count=small[0], small_file_bytes=small[0], **overrides,
    )


def test_bounds_clear_of_every_small_file_threshold_stand_in() -> None:
    for clear in (_summary((2, 7)), _summary((2, 30), data_files=200)):  # fewer than 8; under 30%
        assert summary_falls_short(clear, THRESHOLDS) is None
        high = clear.model_copy(update={"small_file_count": clear.carried.small_files[1], "layout": None})
        assert assess_health(clear, THRESHOLDS) == assess_health(high, THRESHOLDS)  # both ends alike


def test_bounds_that_could_reach_a_threshold_do_not() -> None:
    assert summary_falls_short(_summary((2, 8)), THRESHOLDS) == (
        "SMALL_FILES at the high bounds: the manifests must be read to judge and plan it"
    )
    found = summary_falls_short(_summary((10, 12)), THRESHOLDS)  # already an issue as carried
    assert found is not None and found.startswith("SMALL_FILES at the high bounds")


def test_only_exact_fields_judge_the_rest() -> None:
    """Snapshot backlog is judged on exact fields, alike at both ends: it does not stop the summary."""
    assert summary_falls_short(_summary((2, 7), snapshot_count=150), THRESHOLDS) is None


def test_a_full_status_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a summary status"):
        summary_falls_short(make_status(), THRESHOLDS)
