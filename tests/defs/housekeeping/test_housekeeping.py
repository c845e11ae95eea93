"""The housekeeping schedule and job on a real Dagster instance (SQLite, and PostgreSQL storage from the
production YAML). Deleting runs is opt-in (`delete_old_runs`, off by default: then no run is deleted).
With it on, the deployment's own runs that finished (succeeded, failed) more than `run_retention_days`
ago are deleted with their event logs; runs not finished (starting, started, canceling) are kept however
old, and so are recent runs, and every run icepack did not start (another team's job, another icepack
deployment's runs); the run's metadata reports what the storage really no longer holds. The same job
prunes icepack's maintenance history past `history_retention_days` without changing any decision it
feeds, and a second housekeeping finds nothing more to do.

Old runs are made by executing real jobs with the clock moved back (time-machine), so their creation
and update times are what Dagster's storage itself recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
import time_machine
from pydantic import SecretStr

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.definitions import build_definitions
from icepack_dagster.defs.asset_keys import DeploymentNames
from icepack_dagster.defs.housekeeping.job import HISTORY_ROWS_PRUNED, MORE_RUNS_LEFT, RUNS_DELETED
from icepack_dagster.defs.housekeeping.run_retention import delete_finished_runs
from icepack_dagster.defs.run_tags import deployment_tags
from icepack_dagster.domain.actions.maintenance_action import ActionResult, MaintenanceAction
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.engine import Engine
from tests.factories import settings_with_platform

RETENTION_DAYS = 30
# The run events that leave a run starting, started or canceling (Dagster's own event type names).
NOT_FINISHED = {
    "PIPELINE_STARTING": dg.DagsterRunStatus.STARTING,
    "PIPELINE_START": dg.DagsterRunStatus.STARTED,
    "PIPELINE_CANCELING": dg.DagsterRunStatus.CANCELING,
}


@pytest.fixture(params=["sqlite", "postgres"])
def any_instance(request: pytest.FixtureRequest) -> Iterator[dg.DagsterInstance]:
    yield request.getfixturevalue("instance" if request.param == "sqlite" else "pg_instance")


@pytest.fixture
def own_settings(settings: IcepackSettings, tmp_path: Path) -> IcepackSettings:
    """The session's settings with a maintenance history of this test's own."""
    state = SecretStr(f"sqlite:///{tmp_path / 'state.db'}")
    platform = PlatformSettings(run_retention_days=RETENTION_DAYS, delete_old_runs=True)
    return settings_with_platform(settings.model_copy(update={"state_url": state}), platform)


@dg.op
def neighbour_op() -> None:
    """Another team's work on the same instance."""


@dg.job(tags={"team": "neighbour"})
def neighbour_job() -> None:
    neighbour_op()


def _days_ago(days: float) -> time_machine.travel:
    return time_machine.travel(datetime.now(UTC) - timedelta(days=days), tick=True)


def _housekeeping(defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, int | bool]:
    """One tick of the schedule, its run request executed as the daemon's run would; the op's counts."""
    schedule = defs.resolve_schedule_def("housekeeping_schedule")
    with dg.build_schedule_context(instance=instance) as context:
        (request,) = schedule.evaluate_tick(context).run_requests or []
    job = defs.resolve_job_def(request.job_name or schedule.job_name)
    result = job.execute_in_process(instance=instance, run_config=request.run_config, tags=request.tags)
    assert result.success
    (output,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_OUTPUT]
    metadata = output.step_output_data.metadata
    return {key: metadata[key].value for key in (RUNS_DELETED, MORE_RUNS_LEFT, HISTORY_ROWS_PRUNED)
            if key in metadata}


def _unfinished_run(instance: dg.DagsterInstance, job: dg.JobDefinition, event_type: str) -> str:
    """A run of the deployment whose worker moved it to a not-finished status and then went quiet (its
    last update is when that status was reported, as for a run whose pod hangs)."""
    run = instance.create_run_for_job(job, tags=deployment_tags(PlatformSettings()))
    instance.report_dagster_event(dg.DagsterEvent(event_type_value=event_type, job_name=job.name), run.run_id)
    assert instance.get_run_by_id(run.run_id).status == NOT_FINISHED[event_type]  # type: ignore[union-attr]
    return run.run_id


def _failed_release(defs: dg.Definitions, instance: dg.DagsterInstance, deployment: str = "icepack") -> str:
    """A real failed run: an operator releasing a table by a name that is no table identifier."""
    names = DeploymentNames(deployment)
    job = defs.resolve_job_def(names.name("release_quarantine_job"))
    config = {"ops": {names.name("release_quarantine"): {"config": {"table": "orders"}}}}
    result = job.execute_in_process(instance=instance, run_config=config, raise_on_error=False)
    assert not result.success
    return result.run_id


def test_old_finished_runs_go_with_their_events_unfinished_and_recent_stay(
    own_settings: IcepackSettings, any_instance: dg.DagsterInstance
) -> None:
    instance = any_instance
    defs = build_definitions(own_settings)
    lake_b = own_settings.platform.model_copy(update={"deployment_name": "lake_b"})
    other_deployment = build_definitions(settings_with_platform(own_settings, lake_b))
    housekeeping = defs.resolve_job_def("housekeeping")
    with _days_ago(45):
        old_succeeded = housekeeping.execute_in_process(instance=instance).run_id
        old_failed = _failed_release(defs, instance)
        unfinished = [_unfinished_run(instance, housekeeping, event) for event in NOT_FINISHED]
        neighbours = [neighbour_job.execute_in_process(instance=instance).run_id,
                      _failed_release(other_deployment, instance, "lake_b")]
    with _days_ago(RETENTION_DAYS - 2):
        recent_failed = _failed_release(defs, instance)
    old = (old_succeeded, old_failed)
    assert all(instance.all_logs(run_id) for run_id in old), "the old runs left no events to delete"

    counts = _housekeeping(defs, instance)

    assert counts[RUNS_DELETED] == len(old) and counts[MORE_RUNS_LEFT] is False
    for run_id in old:
        assert instance.get_run_by_id(run_id) is None
        assert instance.all_logs(run_id) == [], f"run {run_id} was deleted but its events stayed"
    for run_id in (*unfinished, recent_failed):
        assert instance.get_run_by_id(run_id) is not None, f"run {run_id} was deleted"
    assert instance.all_logs(recent_failed)
    for run_id in neighbours:
        assert instance.get_run_by_id(run_id) is not None, f"run {run_id} of another team was deleted"
        assert instance.all_logs(run_id), f"the events of run {run_id} of another team were deleted"
    assert _housekeeping(defs, instance)[RUNS_DELETED] == 0


def test_a_bounded_pass_says_more_is_left_and_the_next_pass_takes_it(
    own_settings: IcepackSettings, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(own_settings)
    with _days_ago(45):
        old = [_failed_release(defs, instance) for _ in range(3)]
    cutoff = datetime.now(UTC) - timedelta(days=RETENTION_DAYS)

    platform = own_settings.platform
    first = delete_finished_runs(instance, platform, cutoff, max_deleted=2)
    assert (first.deleted, first.more_left) == (2, True)
    assert [run_id for run_id in old if instance.get_run_by_id(run_id)] == old[2:], "not oldest first"
    second = delete_finished_runs(instance, platform, cutoff, max_deleted=2)
    assert (second.deleted, second.more_left) == (1, False)


def test_without_delete_old_runs_no_run_is_deleted(
    own_settings: IcepackSettings, instance: dg.DagsterInstance
) -> None:
    keep = settings_with_platform(own_settings, PlatformSettings(run_retention_days=RETENTION_DAYS))
    defs = build_definitions(keep)
    with _days_ago(45):
        old = [_failed_release(defs, instance), neighbour_job.execute_in_process(instance=instance).run_id]

    counts = _housekeeping(defs, instance)

    assert RUNS_DELETED not in counts and HISTORY_ROWS_PRUNED in counts
    assert all(instance.get_run_by_id(run_id) is not None for run_id in old), "a run was deleted"
    schedule = defs.resolve_schedule_def("housekeeping_schedule")
    assert "deletes no run" in (schedule.description or "")


def _maintenance(table: str, days_ago: int, status: str) -> MaintenanceReport:
    when = datetime.now(UTC) - timedelta(days=days_ago)
    result = ActionResult(
        action=MaintenanceAction.REWRITE_DATA_FILES,
        status=status,  # type: ignore[arg-type]
        statements=(),
        duration_seconds=1.0,
        error="disk full" if status == "failed" else None,
    )
    return MaintenanceReport(table=table, started_at=when, finished_at=when, results=(result,))


def test_the_schedule_prunes_history_keeping_every_decision(
    own_settings: IcepackSettings, instance: dg.DagsterInstance
) -> None:
    engine = Engine(own_settings)
    store = engine.history_store
    table = "lake.sales.orders"
    for day in range(300, 190, -1):  # 110 successful compactions, all older than the 90 days kept
        store.record(_maintenance(table, day, "succeeded"))
    for day in (2, 1):  # then two recent failures
        store.record(_maintenance(table, day, "failed"))
    key = engine.resolve(table)
    before = engine.history(key)

    counts = _housekeeping(build_definitions(own_settings), instance)

    # Failures are counted over the newest 100 runs, so the 12 old runs beyond them go; of the old
    # action rows only the newest success (what cadence reads) stays.
    assert counts[HISTORY_ROWS_PRUNED] == 12 + 109
    assert engine.history(key) == before, "pruning changed a decision"
    assert _housekeeping(build_definitions(own_settings), instance)[HISTORY_ROWS_PRUNED] == 0


def test_any_run_retention_is_accepted_since_no_decision_reads_runs() -> None:
    """Decisions read icepack's state database (tests/defs/test_decisions_survive_run_deletion.py), so a
    retention shorter than a health rewrite no longer risks a table's latest health."""
    assert PlatformSettings(run_retention_days=1, health_rewrite_hours=48).run_retention_days == 1
