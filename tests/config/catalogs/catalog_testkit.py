"""What the catalog suite's tests share beyond the tables themselves (`tests/tables_testkit.py` builds
those on any catalog): table properties that give every action work, and the secrets check."""

from __future__ import annotations

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction

# The statistics actions run only where a policy asks (tests/engine/test_statistics_actions.py).
STATISTICS = (MaintenanceAction.COMPUTE_TABLE_STATS, MaintenanceAction.COMPUTE_PARTITION_STATS)
EVERY_ACTION = [action for action in MaintenanceAction if action not in STATISTICS]
# Every action has work: small files, a short snapshot retention, merge-on-read deletes.
EAGER_MOR = {
    "format-version": "2",
    "icepack.snapshot.max-age-hours": "0",
    "icepack.snapshot.retain-last": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


def secrets_in(text: str, secrets: tuple[str, ...]) -> list[str]:
    return [secret for secret in secrets if secret in text]
