"""`Engine.rollback`: the guarded rollback of a table's last maintenance (`domain/outcomes/rollback.py`),
planned on the table's metadata as it is now, committed through PyIceberg with main asserted unchanged,
and recorded in the maintenance history (a dry run changes and records nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.outcomes.rollback import RollbackPlan, plan_rollback
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import MetadataReadError

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from icepack_dagster.store.history_store import HistoryStore


def run_rollback(history: HistoryStore, table: Table, key: TableKey, dry_run: bool) -> RollbackPlan:
    """Plan the rollback and, unless `dry_run` or refused, commit and record it."""
    from icepack_dagster.iceberg.commits.facts import commit_facts
    from icepack_dagster.iceberg.commits.rollback import restore_snapshot

    last = history.last_maintenance(key.text)
    facts = commit_facts(table)
    if facts is None:
        raise MetadataReadError(f"table {key.text}: too many snapshots to plan a rollback on")
    plan = plan_rollback(
        key.text,
        last.snapshot_id if last else None,
        last.started_at if last else None,
        last.finished_at if last else None,
        facts,
        dry_run=dry_run,
    )
    if dry_run or plan.refused is not None or plan.restore_to is None or plan.from_snapshot is None:
        return plan
    restore_snapshot(table, key, plan.from_snapshot, plan.restore_to)
    done = plan.model_copy(update={"done": True})
    history.record_rollback(done, utc_now())
    return done
