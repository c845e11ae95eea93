"""Which launchable tables share a maintenance run: small tables fill batches of `batch_size` in
priority order, larger tables take a run each, and the tick's run slots bound the runs, not the
tables; a batch size of 1 is a run per table."""

from __future__ import annotations

from icepack_dagster.domain.decisions.maintenance_batches import plan_runs
from icepack_dagster.domain.decisions.maintenance_selection import Decision


def _launch(name: str, priority: float) -> Decision:
    return Decision(partition=name, verdict="launch", reason="r", health_event=1, priority=priority)


def test_small_tables_fill_batches_and_large_ones_take_a_run_each() -> None:
    launchable = [_launch(f"s{i}", 10 - i) for i in range(5)] + [_launch("big", 1)]
    small = frozenset(f"s{i}" for i in range(5))
    runs, deferred = plan_runs(launchable, small, run_slots=3, batch_size=3)
    assert [([d.partition for d in r.decisions], r.batch) for r in runs] == [
        (["s0", "s1", "s2"], True),
        (["s3", "s4"], True),
        (["big"], False),
    ]
    assert deferred == []


def test_run_slots_bound_runs_and_the_rest_waits_in_priority_order() -> None:
    order = [("big1", 9), ("s0", 8), ("big2", 7), ("s1", 6), ("s2", 5)]
    launchable = [_launch(name, priority) for name, priority in order]
    runs, deferred = plan_runs(launchable, frozenset({"s0", "s1", "s2"}), run_slots=2, batch_size=2)
    assert [[d.partition for d in r.decisions] for r in runs] == [["big1"], ["s0", "s1"]]
    assert [d.partition for d in deferred] == ["big2", "s2"]


def test_a_batch_size_of_one_is_a_run_per_table() -> None:
    launchable = [_launch("s0", 2), _launch("s1", 1)]
    runs, deferred = plan_runs(launchable, frozenset({"s0", "s1"}), run_slots=1, batch_size=1)
    assert [[d.partition for d in r.decisions] for r in runs] == [["s0"]] and not runs[0].batch
    assert [d.partition for d in deferred] == ["s1"]
