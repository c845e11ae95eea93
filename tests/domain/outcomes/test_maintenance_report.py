"""Contract: a maintenance report's outcome is derived from what it holds: any failed action makes it
`failed` (a commit that broke an invariant, `violated`, outranks it), else any action that conflicted
with a concurrent writer `conflict` (not a failure), else any action without effect `no_effect` (not a
success, not a failure), else any succeeded one `succeeded`, else any dry run `dry_run`, else
`nothing_to_do`; a table found gone is `table_gone` whatever its (skipped) actions say, so the CLI and
history can tell it apart;
a maintenance interrupted before its actions reported (its run worker died) is `failed`, with that error."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from icepack_dagster.domain.actions.maintenance_action import ActionResult, ActionStatus, MaintenanceAction
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport, Outcome

AT = datetime(2026, 11, 1, tzinfo=UTC)


def _report(*statuses: ActionStatus, table_gone: bool = False) -> MaintenanceReport:
    results = tuple(
        ActionResult(action=action, status=status, statements=(), duration_seconds=0)
        for action, status in zip(MaintenanceAction, statuses, strict=False)
    )
    return MaintenanceReport(
        table="lake.ns.t", started_at=AT, finished_at=AT, results=results, table_gone=table_gone
    )


@pytest.mark.parametrize(
    ("statuses", "outcome"),
    [
        (("succeeded", "failed", "skipped"), "failed"),
        (("succeeded", "conflict", "skipped"), "conflict"),
        (("conflict", "failed"), "failed"),
        (("failed", "violated", "skipped"), "violated"),
        (("violated", "skipped"), "violated"),
        (("no_effect", "failed"), "failed"),
        (("no_effect", "succeeded"), "no_effect"),
        (("skipped", "succeeded"), "succeeded"),
        (("dry_run", "skipped"), "dry_run"),
        (("skipped", "skipped"), "nothing_to_do"),
        ((), "nothing_to_do"),
    ],
)
def test_outcome_follows_the_action_statuses(statuses: tuple[ActionStatus, ...], outcome: Outcome) -> None:
    assert _report(*statuses).outcome == outcome


@pytest.mark.parametrize("statuses", [("skipped", "skipped"), ()])
def test_a_table_found_gone_is_its_own_outcome(statuses: tuple[ActionStatus, ...]) -> None:
    report = _report(*statuses, table_gone=True)
    assert report.outcome == "table_gone"
    assert MaintenanceReport.model_validate(report.model_dump(mode="json")).outcome == "table_gone"


def test_an_interrupted_maintenance_is_a_failure_with_its_reason() -> None:
    report = MaintenanceReport(
        table="lake.ns.t", started_at=AT, finished_at=AT, interrupted="the run worker died"
    )
    assert (report.outcome, report.first_error) == ("failed", "the run worker died")
