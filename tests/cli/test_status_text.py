"""Contract: `icepack status` says for which snapshot main's table and partition statistics were computed
and how many commits behind they are, and "none" where main has none. A status measured from snapshot
summaries says so, and gives its small files and partitions as bounds beside their figures as of the
snapshot they were read at, never as an exact count."""

from __future__ import annotations

import re

from icepack_dagster.cli.presentation import format_status
from icepack_dagster.domain.table.status import CarriedBounds, FileSizeBucket
from tests.factories import make_statistics, make_status


def test_status_text_shows_statistics_freshness() -> None:
    status = make_status(snapshot_id=9, statistics=make_statistics(table_behind=3, snapshot_id=9))
    [line] = [row for row in format_status("lake.ns.t", status).splitlines() if "statistics" in row]
    assert line.split(None, 1)[1] == "table of snapshot 6, 3 commits behind; partition none"
    assert format_status("lake.ns.t", make_status()).splitlines()[-1].split() == ["statistics", "-"]


def test_status_text_of_a_summary_status_gives_bounds_as_of_a_snapshot() -> None:
    bounds = CarriedBounds(data_files_added=2, small_files=(3, 5), small_bytes=(30, 50), partitions=(4, 6))
    bucket = FileSizeBucket(label="<1 MiB", lower_bytes=0, upper_bytes=1 << 20, file_count=3)
    status = make_status(
        depth="summary", carried=bounds, manifests_read_at=7, snapshot_id=9, small_file_count=3,
        small_file_bytes=30, partition_count=4, file_size_histogram=(bucket,),
    )
    head, *lines = format_status("lake.ns.t", status).splitlines()
    rows = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in lines)
    assert head.endswith("(format v2, snapshot 9, from snapshot summaries)")
    assert rows["small files"] == "3-5 under 384 MiB (3 as of snapshot 7, 2 data files appended since)"
    assert rows["file sizes"] == "<1 MiB: 3 (as of snapshot 7, 2 data files appended since)"
    assert rows["partitions"] == "4-6 (4 as of snapshot 7)"
