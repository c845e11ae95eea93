"""The orphan sweep's round robin over the fleet: pages follow partition order, wrap around, leave out
tables already pending or busy, and each table comes round once per pass."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from icepack_dagster.domain.decisions.maintenance_selection import sweep_page

TABLES = [f"lake.ns.t{i}" for i in range(7)]


def test_pages_follow_partition_order_and_wrap() -> None:
    assert sweep_page(TABLES, None, 3, frozenset()) == (TABLES[0:3], TABLES[2])
    assert sweep_page(TABLES, TABLES[2], 3, frozenset()) == (TABLES[3:6], TABLES[5])
    assert sweep_page(TABLES, TABLES[5], 3, frozenset()) == ([TABLES[6], TABLES[0], TABLES[1]], TABLES[1])


def test_skipped_tables_are_passed_over() -> None:
    page, last = sweep_page(TABLES, None, 2, frozenset({TABLES[0], TABLES[2]}))
    assert page == [TABLES[1], TABLES[3]] and last == TABLES[3]


def test_a_vanished_position_starts_from_the_beginning_and_empty_fleets_are_fine() -> None:
    assert sweep_page(TABLES, "lake.ns.dropped", 2, frozenset()) == (TABLES[0:2], TABLES[1])
    assert sweep_page([], None, 5, frozenset()) == ([], None)
    assert sweep_page(TABLES, None, 50, frozenset(TABLES)) == ([], TABLES[-1])


@given(count=st.integers(1, 10), skip=st.sets(st.sampled_from(TABLES), max_size=4))
def test_one_pass_visits_every_table_not_skipped_once(count: int, skip: set[str]) -> None:
    seen: list[str] = []
    after = None
    wanted = [t for t in TABLES if t not in skip]
    while len(seen) < len(wanted):
        page, after = sweep_page(TABLES, after, count, frozenset(skip))
        assert page, "a page is never empty while tables are left"
        seen += page
    assert sorted(seen[: len(wanted)]) == sorted(wanted)
    assert len(set(seen[: len(wanted)])) == len(wanted)
