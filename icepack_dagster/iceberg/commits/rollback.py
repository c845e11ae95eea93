"""The rollback's one commit, through PyIceberg: main's head set back to an ancestor, with the catalog
asserting that main is still where the plan saw it, so a writer's commit in between makes it fail and
nothing is lost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import MaintenanceError

if TYPE_CHECKING:
    from pyiceberg.table import Table


def restore_snapshot(table: Table, key: TableKey, expected_head: int, restore_to: int) -> None:
    """Set main back to `restore_to`; refuses when main is no longer at `expected_head`."""
    from pyiceberg.exceptions import CommitFailedException

    if table.metadata.current_snapshot_id != expected_head:
        raise MaintenanceError(
            f"table {key.text}: main moved to snapshot {table.metadata.current_snapshot_id} since the "
            f"rollback was planned on {expected_head}; nothing was changed, plan it again"
        )
    try:
        table.manage_snapshots().rollback_to_snapshot(restore_to).commit()
    except CommitFailedException as error:  # main moved between the read and the commit
        raise MaintenanceError(
            f"table {key.text}: another commit landed while rolling back ({error}); nothing was changed, "
            "plan it again"
        ) from error
