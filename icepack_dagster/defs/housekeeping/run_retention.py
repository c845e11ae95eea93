"""Run retention over Dagster's public instance API: Dagster keeps every run and its event log until
someone deletes it (its own `retention` setting covers only sensor and schedule ticks), so the
housekeeping job can delete finished runs last updated before a cutoff, a page at a time, when the
deployment's `delete_old_runs` is on.

Only the deployment's own runs are ever read (tag `icepack/deployment`, selected in run storage): on an
instance shared with other teams, their runs and event logs are never touched, nor another icepack
deployment's.

Only finished runs (succeeded, failed, canceled) are ever read, so a queued, running or canceling run
is never deleted, however old. Age is the run's last update (when it finished), not its creation, so
a run that ran long is kept for the whole retention after it ended.
"""

from __future__ import annotations

from datetime import datetime

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.run_tags import own_runs
from icepack_dagster.domain.frozen_model import FrozenModel

FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
RUNS_PER_PAGE = 100
# A bound on one housekeeping run, so a first run after months without retention ends in minutes; what
# it leaves is deleted by the next one (and reported as left).
MAX_RUNS_DELETED = 20_000


class RunRetentionResult(FrozenModel):
    """What one pass deleted, and whether finished runs older than the cutoff are left (past the bound
    of one pass, or runs the storage did not delete)."""

    cutoff: datetime
    deleted: int
    more_left: bool


def _expired(platform: PlatformSettings, cutoff: datetime) -> dg.RunsFilter:
    return own_runs(platform, FINISHED, updated_before=cutoff)


def delete_finished_runs(
    instance: dg.DagsterInstance,
    platform: PlatformSettings,
    cutoff: datetime,
    max_deleted: int = MAX_RUNS_DELETED,
) -> RunRetentionResult:
    """Delete the deployment's finished runs last updated before `cutoff` (each with its event log), at
    most `max_deleted`, oldest first. A run counts as deleted once the storage no longer finds it, so a
    delete that did nothing is never reported as done."""
    deleted = 0
    attempted: set[str] = set()
    while len(attempted) < max_deleted:
        page = instance.get_run_records(
            filters=_expired(platform, cutoff),
            limit=min(RUNS_PER_PAGE, max_deleted - len(attempted)),
            order_by="update_timestamp",
            ascending=True,
        )
        run_ids = [record.dagster_run.run_id for record in page]
        if not run_ids or attempted.intersection(run_ids):
            break  # nothing left, or a run the storage did not delete: `more_left` says so
        for run_id in run_ids:
            instance.delete_run(run_id)
        attempted.update(run_ids)
        kept = instance.get_run_records(filters=dg.RunsFilter(run_ids=run_ids))
        deleted += len(run_ids) - len(kept)
    more_left = bool(instance.get_run_records(filters=_expired(platform, cutoff), limit=1))
    return RunRetentionResult(cutoff=cutoff, deleted=deleted, more_left=more_left)
