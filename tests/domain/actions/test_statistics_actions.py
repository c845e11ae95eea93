"""Contract: the statistics actions are planned by policy only (off by default): when main has no
statistics, or they are at least N commits or M of the rows behind; never when current, never
compute_partition_stats on an unpartitioned table. Each predicts one statistics file; its output is
counted (no row: nothing done, `no_effect`), and the metadata after the run verifies it: the returned
file listed for the snapshot main was at, and not one listed already. Each needs its Iceberg runtime
(compute_table_stats 1.8.0, compute_partition_stats 1.10.0), and its CALL names nothing but the table.
Freshness is read along main's lineage: the newest snapshot with a file, commits and rows since.
Their commits are metadata only: no snapshot of their own, schema and spec unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from icepack_dagster.domain.actions import compute_partition_stats, compute_table_stats
from icepack_dagster.domain.actions.definition import ActionEstimate, PlanningContext
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction as A
from icepack_dagster.domain.actions.planners.statistics import ONE_FILE, WRITTEN
from icepack_dagster.domain.actions.runtime_requirements import runtime_refusal
from icepack_dagster.domain.outcomes.action_outcome import compare
from icepack_dagster.domain.outcomes.commit_invariants import violations
from icepack_dagster.domain.policy.model import Policy
from icepack_dagster.domain.sql.procedures import render_call
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.statistics_freshness import newest_on_lineage
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.exceptions import InvalidProcedureOptionError
from tests.domain.outcomes.test_commit_rules import BASE, MS, facts, snap
from tests.factories import NOW, make_statistics, make_status

KEY = TableKey(catalog="lake", namespace=("ns",), name="t")
KEPT = Policy(table_stats_commits_behind=5, partition_stats_commits_behind=5)


def plan(module: Any, status: TableStatus, policy: Policy = KEPT) -> ActionEstimate | str:
    result: ActionEstimate | str = module.plan(PlanningContext(status, policy, frozenset(), NOW))
    return result


def at(snapshot: int, **facts: Any) -> TableStatus:
    return make_status(snapshot_id=snapshot, statistics=make_statistics(snapshot_id=snapshot, **facts))


@pytest.mark.parametrize(
    ("module", "kind"), [(compute_table_stats, "table"), (compute_partition_stats, "partition")]
)
def test_statistics_are_never_planned_unless_a_policy_asks(module: Any, kind: str) -> None:
    assert plan(module, at(9), Policy()) == (
        f"{kind} statistics are not kept by policy: set icepack.stats.{kind}.commits-behind or "
        f"icepack.stats.{kind}.rows-changed to keep them fresh"
    )


def test_missing_statistics_are_planned_with_one_file_predicted() -> None:
    planned = plan(compute_table_stats, at(9))
    assert isinstance(planned, ActionEstimate) and planned.options == {}
    assert planned.prediction == ONE_FILE
    assert planned.reason == (
        "main has no table statistics; computed for the snapshot main is at when it runs (9 unless an "
        "action before it in this run commits)"
    )


def test_statistics_behind_by_commits_or_rows_are_planned_and_within_policy_they_are_not() -> None:
    assert plan(compute_table_stats, at(9, table_behind=0)) == "table statistics are current (snapshot 9)"
    behind = plan(compute_table_stats, at(9, table_behind=5))
    assert isinstance(behind, ActionEstimate) and "5 commits behind main" in behind.reason
    within = plan(compute_table_stats, at(9, table_behind=4, rows_changed=100))
    assert within == (
        "table statistics of snapshot 5 are 4 commits behind main, which changed 100 rows (10%): within "
        "policy (5 commits)"
    )
    by_rows = Policy(partition_stats_rows_changed=0.1)
    planned = plan(compute_partition_stats, at(9, partition_behind=1, rows_changed=100), by_rows)
    assert isinstance(planned, ActionEstimate) and "at least 10%" in planned.reason
    assert isinstance(plan(compute_partition_stats, at(9, partition_behind=1, rows_changed=99), by_rows), str)


def test_an_unpartitioned_table_never_gets_partition_statistics() -> None:
    planned = plan(compute_partition_stats, at(9, partitioned=False))
    assert planned == "the table is not partitioned: partition statistics have nothing to count"
    assert isinstance(plan(compute_table_stats, at(9, partitioned=False)), ActionEstimate)


def test_the_call_names_the_table_only_and_columns_are_refused() -> None:
    assert render_call("lake", KEY, A.COMPUTE_TABLE_STATS, {}) == (
        "CALL lake.system.compute_table_stats(table => '`lake`.`ns`.`t`')"
    )
    assert render_call("lake", KEY, A.COMPUTE_PARTITION_STATS, {}) == (
        "CALL lake.system.compute_partition_stats(table => '`lake`.`ns`.`t`')"
    )
    with pytest.raises(InvalidProcedureOptionError, match="every primitive column"):
        render_call("lake", KEY, A.COMPUTE_TABLE_STATS, {"columns": "id"})


@pytest.mark.parametrize(
    ("action", "refused", "allowed"),
    [(A.COMPUTE_TABLE_STATS, "1.7.2", "1.8.0"), (A.COMPUTE_PARTITION_STATS, "1.9.2", "1.10.0")],
)
def test_each_needs_the_runtime_that_has_its_procedure(action: A, refused: str, allowed: str) -> None:
    refusal = runtime_refusal("lake.ns.t", action, {}, 2, refused)
    assert refusal is not None and f"the procedure {action} needs Iceberg {allowed} or later" in refusal
    assert runtime_refusal("lake.ns.t", action, {}, 2, allowed) is None


def test_no_file_returned_is_no_effect_and_one_file_is_as_predicted() -> None:
    nothing = compute_table_stats.read_outcome([], {}).procedure_output
    assert nothing == {WRITTEN: 0}
    judged = compare(A.COMPUTE_TABLE_STATS, ONE_FILE, nothing)
    assert judged is not None and judged.no_effect
    path = "file:///w/t/metadata/9-a.stats"
    written = compute_table_stats.read_outcome([{"statistics_file": path}], {}).procedure_output
    assert written == {WRITTEN: 1, "statistics_file": path}
    judged = compare(A.COMPUTE_TABLE_STATS, ONE_FILE, written)
    assert judged is not None and judged.near and not judged.no_effect


def test_the_metadata_after_the_run_verifies_the_file_for_the_snapshot_main_was_at() -> None:
    before, after = at(9), at(9, partition_behind=0)
    path = after.statistics.partition_statistics.path  # type: ignore[union-attr]
    output = {WRITTEN: 1, "partition_statistics_file": path}
    verify = compute_partition_stats.verify
    assert verify(output, before, after) is None
    unread = f"the table's metadata could not be read after it, so {path} is not verified"
    assert verify(output, before, None) == unread
    assert verify(output, before, before) == (
        f"the table's metadata does not list {path} as the partition statistics of main"
    )
    assert verify(output, at(8), after) == (
        f"{path} is registered for snapshot 9, not for snapshot 8 main was at when it ran (a commit came in "
        "between)"
    )
    assert verify(output, after, after) == (
        f"{path} was already the partition statistics of snapshot 9: nothing was computed"
    )
    assert verify({WRITTEN: 0}, before, after) == "the procedure wrote no partition statistics file"


def test_freshness_is_the_newest_file_on_mains_lineage_and_what_came_after_it() -> None:
    lineage = [(30, 7), (20, 5), (10, 3)]  # newest first: snapshot id, rows it changed
    facts = newest_on_lineage(lineage, {10: "a", 20: "b", 99: "off-main"})
    assert facts is not None
    assert (facts.snapshot_id, facts.path, facts.commits_behind, facts.rows_changed) == (20, "b", 1, 7)
    assert newest_on_lineage(lineage, {99: "off-main"}) is None
    assert newest_on_lineage([], {10: "a"}) is None


def test_computing_statistics_commits_no_snapshot_of_its_own() -> None:
    """A writer's append meanwhile is not its commit; a `replace` of its own, or a new schema, breaks
    its commit rules."""
    rules = compute_table_stats.DEFINITION.commit_rules
    appended = facts(BASE, snap(2, 1, 30, "append", total_records=110))
    assert violations(rules, facts(BASE), appended, [], {}, {}, MS) == []
    replace = snap(2, 1, 30, "replace", total_records=100)
    [found] = violations(rules, facts(BASE), facts(BASE, replace), [replace], {}, {}, MS)
    assert found.endswith("was committed; computing statistics commits no snapshot")
    evolved = facts(BASE).model_copy(update={"current_schema_id": 1})
    assert violations(rules, facts(BASE), evolved, [], {}, {}, MS) == ["schema changed: 0 before, 1 after"]
