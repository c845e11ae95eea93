"""Contract, on the pure rules (the real commits are in tests/engine/test_commit_invariants.py and
test_rollback.py): a maintenance's own commits are the `replace` snapshots on main since it started, a
concurrent writer's append is not one of them; records may drop by no more than the deletes a data
rewrite could apply and never grow; next-row-id never goes backwards; a rollback goes back only over
the maintenance's own commits and otherwise lists what was committed since."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.outcomes.commit_invariants import (
    SnapshotFacts,
    TableFacts,
    action_commits,
    violations,
)
from icepack_dagster.domain.outcomes.rollback import plan_rollback
from icepack_dagster.domain.table.snapshot_graph import SnapshotGraph

T0 = datetime(2026, 11, 1, tzinfo=UTC)
MS = int(T0.timestamp() * 1000)
REWRITE = definition(MaintenanceAction.REWRITE_DATA_FILES).commit_rules


def snap(sid: int, parent: int | None, seconds: int, operation: str, **totals: int) -> SnapshotFacts:
    named = {k.replace("_", "-"): v for k, v in totals.items()}
    return SnapshotFacts(snapshot_id=sid, parent_id=parent, timestamp_ms=MS + seconds * 1000,
                         operation=operation, schema_id=0, totals=named)


def facts(*snapshots: SnapshotFacts, next_row_id: int | None = None) -> TableFacts:
    graph = SnapshotGraph(snapshots=tuple((s.snapshot_id, s.parent_id, s.timestamp_ms) for s in snapshots))
    return TableFacts(format_version=3 if next_row_id else 2, current_snapshot_id=snapshots[-1].snapshot_id,
                      current_schema_id=0, default_spec_id=0, next_row_id=next_row_id, graph=graph,
                      snapshots={s.snapshot_id: s for s in snapshots}, max_ref_age_ms=10**12)


BASE = snap(1, None, 0, "append", total_records=100, total_position_deletes=5)


def test_the_action_s_commits_are_its_replaces_since_it_started() -> None:
    before = facts(BASE)
    ours = snap(3, 2, 60, "replace", total_records=95, total_position_deletes=5, deleted_data_files=4)
    after = facts(BASE, snap(2, 1, 30, "append", total_records=110), ours)
    assert [c.snapshot_id for c in action_commits(before, after, MS + 20_000)] == [3]


def test_records_may_drop_by_the_applied_deletes_only() -> None:
    output = {"rewritten_data_files_count": 4}
    for records, broken in ((95, False), (100, False), (94, True), (101, True)):
        commit = snap(2, 1, 60, "replace", total_records=records, deleted_data_files=4)
        found = violations(REWRITE, facts(BASE), facts(BASE, commit), [commit], output, {}, MS)
        assert bool(found) is broken, (records, found)


def test_next_row_id_never_goes_backwards() -> None:
    base = facts(BASE, next_row_id=100)
    manifests = definition(MaintenanceAction.REWRITE_MANIFESTS).commit_rules
    assert violations(manifests, base, facts(BASE, next_row_id=100), [], {}, {}, MS) == []
    assert violations(manifests, base, facts(BASE, next_row_id=40), [], {}, {}, MS) == [
        "next-row-id went backwards: 100 before, 40 after"
    ]


def test_a_rollback_goes_back_over_the_maintenance_s_own_commits_only() -> None:
    ours = snap(2, 1, 60, "replace")
    plan = plan_rollback("lake.ns.t", 1, T0 + timedelta(seconds=50), T0 + timedelta(seconds=70),
                         facts(BASE, ours))
    assert (plan.refused, plan.restore_to, plan.from_snapshot, len(plan.undone)) == (None, 1, 2, 1)
    later = snap(3, 2, 600, "append")
    refused = plan_rollback("lake.ns.t", 1, T0 + timedelta(seconds=50), T0 + timedelta(seconds=70),
                            facts(BASE, ours, later))
    assert refused.restore_to is None and refused.since[0].startswith("snapshot 3 (append")
    assert "not its own" in (refused.refused or "")
    gone = plan_rollback("lake.ns.t", 9, T0, T0, facts(BASE, ours))
    assert "no longer an ancestor of main" in (gone.refused or "")
