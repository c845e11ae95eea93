"""The measured impact of each maintenance action: the table's status numbers before and after it."""

from __future__ import annotations

from collections.abc import Callable

from icepack_dagster.domain.actions.maintenance_action import ActionImpact
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.exceptions import IcepackError
from icepack_dagster.spark.progress import ProgressSink

StatusReader = Callable[[], TableStatus]

_IMPACT_FIELDS = {
    "data_files": "live_data_files",
    "delete_files": "live_delete_files",
    "data_bytes": "live_data_bytes",
    "manifests": "manifest_count",
    "snapshots": "snapshot_count",
}


def measured(impact: ActionImpact, before: TableStatus | None, after: TableStatus | None) -> ActionImpact:
    """The impact with the status numbers before and after the action."""
    update = {}
    for name, field in _IMPACT_FIELDS.items():
        update[f"{name}_before"] = getattr(before, field) if before else None
        update[f"{name}_after"] = getattr(after, field) if after else None
    return impact.model_copy(update=update)


class StatusMeter:
    """Reads the table status around each action; the status after one action is the status before
    the next, so each state is read once, also after a failed action (a failure can follow partial
    commits). A status that cannot be read leaves the numbers empty: the action's outcome matters more
    than its measured impact."""

    def __init__(
        self,
        read: StatusReader | None,
        key: TableKey,
        progress: ProgressSink,
        known: TableStatus | None = None,
    ) -> None:
        """`known`: the table's status just read by the caller (the one the actions were planned on),
        taken as the status before the first action instead of reading the same state again."""
        self._read_status = read
        self._key = key
        self._progress = progress
        self._last: TableStatus | None = known

    def _read(self) -> TableStatus | None:
        if self._read_status is None:
            return None
        try:
            return self._read_status()
        except IcepackError as error:
            self._progress(f"table {self._key.text}: status could not be read for the impact: {error}")
            return None

    @property
    def measures(self) -> bool:
        """Whether it reads the table's status at all (a dry-run-only runner's does not)."""
        return self._read_status is not None

    def before(self) -> TableStatus | None:
        return self._last or self._read()

    def after(self) -> TableStatus | None:
        self._last = self._read()
        return self._last
