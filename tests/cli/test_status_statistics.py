"""Contract: `icepack status` says for which snapshot main's table and partition statistics were computed
and how many commits behind they are, and "none" where main has none."""

from __future__ import annotations

from icepack_dagster.cli.presentation import format_status
from tests.factories import make_statistics, make_status


def test_status_text_shows_statistics_freshness() -> None:
    status = make_status(snapshot_id=9, statistics=make_statistics(table_behind=3, snapshot_id=9))
    [line] = [row for row in format_status("lake.ns.t", status).splitlines() if "statistics" in row]
    assert line.split(None, 1)[1] == "table of snapshot 6, 3 commits behind; partition none"
    assert format_status("lake.ns.t", make_status()).splitlines()[-1].split() == ["statistics", "-"]
