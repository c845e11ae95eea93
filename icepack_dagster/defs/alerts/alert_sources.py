"""What the alert sensor reads besides the tables' histories (defs/table_histories.py): failed
health-sync runs from Dagster's run storage."""

from __future__ import annotations

from datetime import datetime, timedelta

import dagster as dg

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.defs.health_sync.job import build_health_sync_job
from icepack_dagster.defs.run_tags import BATCH_TAG, own_runs
from icepack_dagster.domain.clock import utc_now

# Dagster's tag on a failed run when run retries are enabled: "true" when its retry run will follow.
WILL_RETRY_TAG = "dagster/will_retry"
FIRST_LOOK_BACK = timedelta(days=1)
RUNS_PER_TICK = 50
# Runs updated within this much before the cursor's time are read again (and skipped by run id), so
# runs sharing the cursor's timestamp are never lost to a strict comparison.
_OVERLAP = timedelta(seconds=1)


def failed_health_syncs(
    instance: dg.DagsterInstance, platform: PlatformSettings, updated_after: datetime | None
) -> list[dg.RunRecord]:
    """This deployment's failed health-sync runs last updated after `updated_after` (default: a day
    ago), oldest first; another code location's `health_sync` job does not count."""
    since = updated_after - _OVERLAP if updated_after else utc_now() - FIRST_LOOK_BACK
    job = build_health_sync_job(platform.deployment_name)
    filters = own_runs(platform, [dg.DagsterRunStatus.FAILURE], job_name=job.name, updated_after=since)
    return list(
        instance.get_run_records(
            filters=filters, limit=RUNS_PER_TICK, order_by="update_timestamp", ascending=True
        )
    )


def run_error(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """The first step's error of a failed run, or the run failure's own message."""
    steps = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_FAILURE).records
    for record in steps:
        event = record.event_log_entry.dagster_event
        if event is not None and event.step_failure_data.error is not None:
            error = event.step_failure_data.error
            return f"{event.step_key}: {error.cls_name}: {error.message.strip()}"
    failures = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records
    for record in failures:
        event = record.event_log_entry.dagster_event
        if event is not None and event.message:
            return event.message
    return None


def will_be_retried(record: dg.RunRecord) -> bool:
    """A failed run Dagster retries: its retry alerts if it fails too, so the operator hears once."""
    return record.dagster_run.tags.get(WILL_RETRY_TAG) == "true"


def run_batch(record: dg.RunRecord) -> str | None:
    return record.dagster_run.tags.get(BATCH_TAG)
