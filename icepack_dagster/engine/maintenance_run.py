"""One maintenance of one table, as the engine runs it: take the table's lease, plan on a fresh status,
check the listing an action deleting unreferenced files relies on, run the actions on Spark, check what
each committed (`engine/commit_verification.py`), record the outcome. What it needs from the engine is
`MaintenanceServices`, a narrow interface the `Engine` provides; this module never imports the engine.

A problem of the table ends in its report, never in an exception, so a loop over many tables
(`icepack maintain --all`, the Dagster sensor) goes on with the others. Spark starts only when an
action actually runs (not for dry runs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from icepack_dagster.domain.actions.maintenance_action import (
    ACTION_ORDER,
    ActionResult,
    ActionStatus,
    MaintenanceAction,
)
from icepack_dagster.domain.actions.option_values import parse_timestamp
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.health.model import TableHealth
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.recommendation.model import Recommendation, RecommendedAction
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.domain.table.unreferenced_files import on_object_store
from icepack_dagster.engine.commit_verification import CommitVerifier
from icepack_dagster.exceptions import (
    CatalogUnavailableError,
    InvalidPolicyError,
    MaintenanceError,
    MetadataReadError,
    TableLeaseHeldError,
    TableNotFoundError,
)
from icepack_dagster.iceberg.unreferenced_files import files_removed_since, orphan_removal_check

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from icepack_dagster.spark.table_sessions import TableSessions

Progress = Callable[[str], None]
TABLE_GONE = "table no longer exists"
_MAX_ERROR = 1000  # an error quoting a hostile 100 KB property value stays readable in history and UI
Predicted = frozenset[tuple[str, str, str]]
"""The files the listing before orphan removal found it would delete (`removable_before`)."""
logger = logging.getLogger(__name__)


class MaintenanceServices(Protocol):
    """What one maintenance needs from the engine that runs it, and nothing more."""

    @property
    def table_sessions(self) -> TableSessions:
        """The Spark sessions tables are maintained in."""

    def hold_lease(self, key: TableKey) -> AbstractContextManager[object]:
        """The table's lease; raises `TableLeaseHeldError` while another maintenance holds it."""

    def status(self, key: TableKey, now: datetime | None = None) -> TableStatus:
        """The table's status, read now."""

    def recommend(self, key: TableKey, status: TableStatus, *, now: datetime, force: bool) -> Recommendation:
        """What to run on the table, planned on `status`."""

    def open_table(self, key: TableKey) -> Table:
        """The table as PyIceberg loads it from its catalog."""

    def record(self, report: MaintenanceReport) -> None:
        """Keep the report in the table's maintenance history."""


@dataclass(frozen=True)
class JudgedMaintenance:
    """One maintenance and the table after it (`Engine.maintain_and_judge`): the report; the status and
    health measured right after it, when it was re-measured; the table's history. `unrun` is the outcome
    and the reason when nothing ran through no fault of the table (outside its windows, deferred, gone);
    nothing is measured then."""

    report: MaintenanceReport
    history: TableHistory
    status_after: TableStatus | None = None
    health_after: TableHealth | None = None
    unrun: tuple[str, str] | None = None
    outside_window: bool = False

    @property
    def outcome(self) -> str:
        return self.unrun[0] if self.unrun is not None else self.report.outcome


def _bounded(message: str) -> str:
    if len(message) <= _MAX_ERROR:
        return message
    return f"{message[: _MAX_ERROR - 40]}... ({len(message) - _MAX_ERROR + 40} characters cut)"


def run_maintenance(
    services: MaintenanceServices,
    key: TableKey,
    recommendation: Recommendation | None,
    dry_run: bool,
    only: Sequence[MaintenanceAction] | None,
    on_progress: Progress | None,
    force: bool = False,
) -> MaintenanceReport:
    """`Engine.maintain`: the lease first (not for a dry run); while another maintenance holds it,
    nothing runs and the outcome is `deferred`."""
    started = utc_now()
    try:
        with nullcontext() if dry_run else services.hold_lease(key):
            return _plan_and_run(services, key, started, recommendation, dry_run, only, on_progress, force)
    except TableLeaseHeldError as error:  # another maintenance is at it: try again later
        return _unrun(key, started, recommendation, only, "deferred", _bounded(str(error)))


def _plan_and_run(
    services: MaintenanceServices,
    key: TableKey,
    started: datetime,
    recommendation: Recommendation | None,
    dry_run: bool,
    only: Sequence[MaintenanceAction] | None,
    on_progress: Progress | None,
    force: bool = False,
) -> MaintenanceReport:
    """The maintenance once the table is ours: plan on fresh status, run, record."""
    known = recommendation
    try:
        status = services.status(key, started)
        known = recommendation or services.recommend(key, status, now=started, force=force)
        return _run(services, key, started, status, known, dry_run, only, on_progress)
    except TableNotFoundError as error:
        reason = f"{TABLE_GONE}: {error}; nothing was run"
        report = _unrun(key, started, known, only, "skipped", reason)
        return report.model_copy(update={"table_gone": True})
    except CatalogUnavailableError as error:  # the catalog's fault, not the table's: not recorded
        ended: ActionStatus = "deferred" if error.transient else "failed"
        return _unrun(key, started, known, only, ended, _bounded(str(error)))
    except (InvalidPolicyError, MetadataReadError, MaintenanceError) as error:
        report = _unrun(key, started, known, only, "failed", _bounded(str(error)))
        if not dry_run:
            services.record(report)
        return report


def _run(
    services: MaintenanceServices,
    key: TableKey,
    started: datetime,
    status: TableStatus,
    recommendation: Recommendation,
    dry_run: bool,
    only: Sequence[MaintenanceAction] | None,
    on_progress: Progress | None,
) -> MaintenanceReport:
    from icepack_dagster.spark.runner import MaintenanceRunner

    chosen = [a for a in recommendation.actions if only is None or a.action in only]
    skipped = [
        ActionResult(action=s.action, status="skipped", statements=(), duration_seconds=0, reason=s.reason)
        for s in recommendation.skipped
        if only is None or s.action in only
    ]
    chosen, refused, predicted = _checked_listing(services, key, chosen, status.location)
    results: list[ActionResult] = [*refused]
    if chosen:
        runner = MaintenanceRunner(None, key.catalog, sessions=None if dry_run else services.table_sessions)
        verifier = CommitVerifier(lambda: services.open_table(key), key, chosen)
        ran = runner.run(
            key,
            chosen,
            status.properties,
            dry_run=dry_run,
            status_before=lambda: services.status(key),
            on_progress=on_progress,
            status_planned_on=status,
            commit_check=None if dry_run else verifier,
        )
        results += _counted_removals(services, key, ran, predicted)
    ordered = sorted([*results, *skipped], key=lambda r: ACTION_ORDER.index(r.action))
    report = MaintenanceReport(
        table=key.text,
        snapshot_id=status.snapshot_id,
        started_at=started,
        finished_at=utc_now(),
        results=tuple(ordered),
    )
    if not dry_run and (chosen or refused):
        services.record(report)
    return report


def _checked_listing(
    services: MaintenanceServices, key: TableKey, chosen: list[RecommendedAction], location: str
) -> tuple[list[RecommendedAction], list[ActionResult], Predicted | None]:
    """An action that deletes unreferenced files (orphan removal) runs only where the listing of the
    table's location can be trusted (`domain/table/unreferenced_files.py`): otherwise it fails here,
    unrun. The same listing predicts the files it deletes, which choose its module's removal options
    (a large removal streams its results) and count what it removed when its output cannot
    (`_counted_removals`). On an object store each action gets its module's object-store options
    (orphan removal lists by prefix through the table's own FileIO)."""
    removing = next((a for a in chosen if definition(a.action).deletes_unreferenced_files), None)
    if removing is None:
        return chosen, [], None
    unreadable: MetadataReadError | None = None
    try:
        cutoff = parse_timestamp(removing.options["older_than"]) if "older_than" in removing.options else None
    except ValueError:  # the action's guard refuses it, naming the option
        cutoff = None
    try:
        refusals, predicted = orphan_removal_check(services.open_table(key), key, cutoff)
    except MetadataReadError as error:  # the check cannot run: the action cannot either
        refusals, predicted, unreadable = [], frozenset(), error
    kept: list[RecommendedAction] = []
    refused: list[ActionResult] = []
    for recommended in chosen:
        spec = definition(recommended.action)
        if unreadable is not None and spec.deletes_unreferenced_files:
            refusals = [f"{unreadable}; {recommended.action} refused, nothing was deleted"]
        if spec.deletes_unreferenced_files and refusals:
            message = _bounded(" ".join(refusals))
            failed = ActionResult(
                action=recommended.action, status="failed", statements=(), duration_seconds=0, error=message
            )
            refused.append(failed)
            continue
        options = dict(recommended.options)
        if spec.object_store_options and on_object_store(location):
            options |= spec.object_store_options
        if spec.removal_options is not None:
            options |= spec.removal_options(len(predicted))
        kept.append(recommended.model_copy(update={"options": options}) if options != recommended.options
                    else recommended)
    return kept, refused, predicted


def _counted_removals(
    services: MaintenanceServices, key: TableKey, results: list[ActionResult], predicted: Predicted | None
) -> list[ActionResult]:
    """An unreferenced-file removal whose output could not count what it deleted (a streamed removal
    returns a sample) gets the count from a listing after it: the predicted files now gone."""
    counted = []
    for result in results:
        unknown = result.status == "succeeded" and result.impact.orphan_files_removed is None
        if predicted is not None and unknown and definition(result.action).deletes_unreferenced_files:
            try:
                removed = files_removed_since(services.open_table(key), key, predicted)
            except MetadataReadError as error:  # the removal stands; its count stays unknown
                logger.warning("%s; the orphan files removed are not counted", error)
            else:
                result = result.model_copy(
                    update={"impact": result.impact.model_copy(update={"orphan_files_removed": removed})}
                )
        counted.append(result)
    return counted


def _unrun(
    key: TableKey,
    started: datetime,
    recommendation: Recommendation | None,
    only: Sequence[MaintenanceAction] | None,
    status: ActionStatus,
    message: str,
) -> MaintenanceReport:
    """A report for a table whose actions never reached Spark: each one skipped or failed with
    `message` (the recommended actions when known, else every action asked for)."""
    recommended = [a.action for a in recommendation.actions] if recommendation else list(ACTION_ORDER)
    actions = [a for a in ACTION_ORDER if a in recommended and (only is None or a in only)]
    failed = status == "failed"
    results = tuple(
        ActionResult(
            action=action,
            status=status,
            statements=(),
            duration_seconds=0,
            error=message if failed else None,
            reason=None if failed else message,
        )
        for action in actions
    )
    return MaintenanceReport(table=key.text, started_at=started, finished_at=utc_now(), results=results)
