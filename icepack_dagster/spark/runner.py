"""Runs one table's maintenance actions on Spark, in order, each as one Iceberg procedure call.

Each table runs in the session `spark/table_sessions.py` gives it: a fresh `spark.newSession()` (on
Spark Connect, a fresh server-side session: see `spark/connect.py`), or in a batch its thread's shared
session with the table's `icepack.spark.sql.*` overrides restored after it; either way they never reach
another table. Everything that can be refused is refused before Spark is touched
(`spark/prepared_actions.py`: options, overrides, safety guards, and the session settings an action's module
refuses, such as one that switches off Iceberg's own 24-hour guard for orphan removal). What the
session's Iceberg runtime cannot do safely on the table (format v3 on an old runtime, an action or
option it lacks, as each action's module declares; any action on a table whose schema, as the status
it was planned on says, holds a type this Spark cannot read) is `refused`, an outcome of its own. What a
procedure's output says it did is read as the action's module says (`domain/actions/`). While an
action runs, Spark's progress goes to the same progress callback as the runner's own lines
(`spark/progress.py`). A failing action stops the table's later
actions, since they were planned on the state the failed one should have produced; its report says what
the failure left behind (`spark/failures.py`), and its impact is measured, since partial progress may
have committed part of it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException

from icepack_dagster.domain.actions.maintenance_action import ActionResult, ActionStatus
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.outcomes.action_outcome import compare
from icepack_dagster.domain.outcomes.commit_invariants import CommitCheck
from icepack_dagster.domain.recommendation.model import RecommendedAction
from icepack_dagster.domain.sql.procedures import SESSION_SETUP
from icepack_dagster.domain.sql.spark_overrides import resolve_overrides
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.exceptions import IcepackError, MaintenanceError, TableNotFoundError
from icepack_dagster.spark.failures import error_class, failure_hint, is_conflict, spark_error_message
from icepack_dagster.spark.iceberg_runtime import table_format_version
from icepack_dagster.spark.prepared_actions import (
    PreparedAction,
    prepare_actions,
    refused_by_session,
    runtime_gate,
    type_gate,
)
from icepack_dagster.spark.progress import REPORT_INTERVAL_SECONDS, ProgressSink, reported_progress
from icepack_dagster.spark.session import statement_rows
from icepack_dagster.spark.status_meter import StatusMeter, StatusReader, measured
from icepack_dagster.spark.table_sessions import TableSessions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MaintenanceRunner", "spark_error_message"]

logger = logging.getLogger(__name__)
# After these, the table's later actions are skipped: they were planned on the state this one should
# have produced (a conflict leaves the other writer's state; a violation pauses the table).
_STOPS_LATER_ACTIONS = ("failed", "conflict", "violated")


class MaintenanceRunner:
    """Runs maintenance for tables of one Spark catalog (the catalog's name in Spark and in settings)."""

    def __init__(
        self,
        spark: SparkSession | None,
        catalog_name: str,
        progress_interval_seconds: float = REPORT_INTERVAL_SECONDS,
        *,
        sessions: TableSessions | None = None,
    ) -> None:
        """Tables run in `sessions`, or else in a fresh `newSession()` of `spark` each; with neither the
        runner only does dry runs. While an action runs, Spark's progress is reported at most every
        `progress_interval_seconds` (`spark/progress.py`)."""
        if sessions is None and spark is not None:
            sessions = TableSessions(lambda: spark)
        self._sessions = sessions
        self._catalog = catalog_name
        self._progress_interval = progress_interval_seconds

    def run(
        self,
        key: TableKey,
        actions: Sequence[RecommendedAction],
        properties: Mapping[str, str] | None = None,
        *,
        dry_run: bool = False,
        status_before: StatusReader | None = None,
        on_progress: ProgressSink | None = None,
        now: datetime | None = None,
        status_planned_on: TableStatus | None = None,
        commit_check: CommitCheck | None = None,
    ) -> list[ActionResult]:
        """Run `actions` on one table, in the given order; one result per action.

        `properties` are the table's properties (overrides and gc.enabled are read from them).
        `status_before` reads the table's status; it is called before each action and again after it
        to fill the impact; `status_planned_on`, the status the actions were planned on (read under the
        table's lease just before), stands for the first read. `commit_check` checks what each action
        that ran committed (`domain/outcomes/commit_invariants.py`). A dry run renders the statements and
        returns without touching Spark.
        Raises `TableNotFoundError` when the table does not exist; every other problem is a `failed`
        result naming the table and the action, and the table's later actions are `skipped`."""
        progress = on_progress or (lambda message: logger.info("%s", message))
        plans = prepare_actions(self._catalog, key, actions, properties or {}, now or utc_now())
        meter = StatusMeter(status_before, key, progress, known=status_planned_on)
        results: list[ActionResult] = []
        if dry_run:
            return [self._one(key, plan, results, None, meter, progress) for plan in plans]
        if self._sessions is None:
            raise MaintenanceError(f"table {key.text}: this runner has no Spark session (dry runs only)")
        with self._sessions.session_for(self._catalog, _override_keys(key, properties or {})) as session:
            runtime = self._sessions.iceberg_runtime(session)
            if status_planned_on is not None and status_planned_on.schema_types:
                spark = self._sessions.spark_version(session)
                types = status_planned_on.schema_types
                plans = [type_gate(key, plan, types, spark, runtime) for plan in plans]
            if not any(plan.runtime_refusal is not None for plan in plans):  # Spark cannot open the table
                format_version = self._format_version(key, session)
                plans = [runtime_gate(self._catalog, key, plan, runtime, format_version) for plan in plans]
            plans = [refused_by_session(key, session, plan) for plan in plans]
            for plan in plans:
                results.append(self._one(key, plan, results, session, meter, progress, commit_check))
            if any(result.status == "failed" for result in results):
                self._sessions.discard()
        return results

    def _one(
        self,
        key: TableKey,
        plan: PreparedAction,
        earlier: list[ActionResult],
        session: SparkSession | None,
        meter: StatusMeter,
        progress: ProgressSink,
        commit_check: CommitCheck | None = None,
    ) -> ActionResult:
        """One action: skipped after an earlier failure, failed when refused, rendered on a dry run,
        else executed, measured and its commit checked."""
        stopped = next((r for r in earlier if r.status in _STOPS_LATER_ACTIONS), None)
        if stopped is not None:
            ended = "failed" if stopped.status == "failed" else f"ended in {stopped.status}"
            reason = f"{stopped.action} {ended} earlier in this run on table {key.text}"
            return self._unrun(plan, "skipped", reason=reason)
        if plan.error is not None:
            progress(plan.error)
            return self._unrun(plan, "failed", error=plan.error)
        if plan.runtime_refusal is not None:
            progress(plan.runtime_refusal)
            return self._unrun(plan, "refused", reason=plan.runtime_refusal)
        if session is None:
            return self._unrun(plan, "dry_run")
        before = meter.before()
        if commit_check is not None:
            commit_check.before_action()
        started = f"table {key.text}: running {plan.action}"
        with reported_progress(
            session, plan.action.value, started, progress, self._progress_interval
        ) as spark_progress:
            result = self._execute(session, key, plan)
        after = meter.after()  # also after a failure: partial progress may have committed part of it
        if meter.measures:  # a run no status is read around cannot be verified, nor measured
            result = _verified(plan, result, before, after)
        ended = f" ({spark_progress.summary})" if spark_progress.summary else ""
        result = result.model_copy(update={"impact": measured(result.impact, before, after)})
        if commit_check is not None:
            result = commit_check.after_action(result)
        progress(f"table {key.text}: {plan.action} {result.status} in {result.duration_seconds:.1f} s{ended}")
        return result

    def _format_version(self, key: TableKey, session: SparkSession) -> int | None:
        """Refuse a table Spark cannot open, before any action; else its format version as the
        session's Iceberg reads it (`spark/iceberg_runtime.py`: one question for both)."""
        try:
            # Not `session.table()`: it parses the name under the thread's active session, which still
            # substitutes `${...}`, so it could check another table than the one the CALL addresses.
            return table_format_version(session, self._catalog, key)
        except (PySparkException, Py4JJavaError) as error:
            if isinstance(error, AnalysisException) and error_class(error) == "TABLE_OR_VIEW_NOT_FOUND":
                message = f"table {key.text} does not exist in catalog {self._catalog!r}"
                raise TableNotFoundError(message) from None
            message = f"table {key.text}: cannot be opened on Spark: {spark_error_message(error)}"
            raise MaintenanceError(message) from None

    def _execute(self, session: SparkSession, key: TableKey, plan: PreparedAction) -> ActionResult:
        started = time.monotonic()
        try:
            *settings, call = plan.statements
            for statement in settings:  # SETs run when sent; collecting one would be one more round trip
                if statement not in SESSION_SETUP:  # every table session ran these when it was opened
                    session.sql(statement)
            rows = statement_rows(session, session.sql(call))
            impact = definition(plan.action).read_outcome(rows, plan.options)
        except (PySparkException, Py4JJavaError) as error:
            hint, cause = failure_hint(error), spark_error_message(error)
            if is_conflict(error):  # the other writer's commit stands; ours is retried at a quieter time
                return ActionResult(
                    action=plan.action,
                    status="conflict",
                    statements=plan.statements,
                    duration_seconds=time.monotonic() - started,
                    reason=f"conflict: {hint}. Cause: {cause}",
                )
            return ActionResult(
                action=plan.action,
                status="failed",
                statements=plan.statements,
                duration_seconds=time.monotonic() - started,
                error=f"table {key.text}: {plan.action} failed on Spark: "
                + (f"{hint}. Cause: {cause}" if hint else cause),
            )
        judged = compare(plan.action, plan.prediction, impact.procedure_output)
        no_effect = judged is not None and judged.no_effect
        return ActionResult(
            action=plan.action,
            status="no_effect" if no_effect else "succeeded",
            statements=plan.statements,
            impact=impact,
            duration_seconds=time.monotonic() - started,
            reason=f"no effect: {judged.describe()}" if no_effect and judged is not None else None,
            predicted_actual=judged,
        )

    @staticmethod
    def _unrun(
        plan: PreparedAction, status: ActionStatus, error: str | None = None, reason: str | None = None
    ) -> ActionResult:
        statements = () if status == "skipped" else plan.statements
        return ActionResult(
            action=plan.action,
            status=status,
            statements=statements,
            duration_seconds=0.0,
            error=error,
            reason=reason,
        )


def _verified(
    plan: PreparedAction, result: ActionResult, before: TableStatus | None, after: TableStatus | None
) -> ActionResult:
    """A succeeded action whose module checks the table's metadata after it (`verify`) and does not
    find what the procedure said it did had no effect: never a success."""
    verify = definition(plan.action).verify
    if result.status != "succeeded" or verify is None:
        return result
    problem = verify(result.impact.procedure_output, before, after)
    if problem is None:
        return result
    return result.model_copy(update={"status": "no_effect", "reason": f"no effect: {problem}"})


def _override_keys(key: TableKey, properties: Mapping[str, str]) -> tuple[str, ...]:
    """The settings the table's actions `SET`; none when its overrides are refused (then no action
    runs)."""
    try:
        return tuple(name for name, _ in resolve_overrides(key.text, properties))
    except IcepackError:
        return ()
