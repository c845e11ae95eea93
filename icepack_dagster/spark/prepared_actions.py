"""What the runner will run for each of a table's actions, or why it refuses the action, decided before
any procedure runs: options, the table's `icepack.spark.sql.*` overrides and the safety guards are
checked here, and orphan removal once more against the session it would run in (Iceberg's own 24-hour
guard must be on)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from icepack_dagster.domain.actions.compaction_planner import RewritePrediction
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.recommendation.model import RecommendedAction
from icepack_dagster.domain.sql.procedures import SESSION_SETUP, guard_action, render_call
from icepack_dagster.domain.sql.spark_overrides import render_set, resolve_overrides
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import IcepackError, InvalidTableIdentifierError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class PreparedAction:
    """One action ready to run (statements) or refused before running (error)."""

    action: MaintenanceAction
    statements: tuple[str, ...] = ()
    error: str | None = None
    dry_run_option: bool = False
    prediction: RewritePrediction | None = None


def prepare_actions(
    catalog: str,
    key: TableKey,
    actions: Sequence[RecommendedAction],
    properties: Mapping[str, str],
    now: datetime,
) -> list[PreparedAction]:
    """Statements for each action on `key` in Spark catalog `catalog`, or why it is refused; pure,
    touches no Spark. An override the table may not set refuses all its actions."""
    if key.catalog != catalog:
        raise InvalidTableIdentifierError(
            f"table {key.text} is in catalog {key.catalog!r}; this runner runs on {catalog!r}"
        )
    try:
        sets = tuple(render_set(k, v, key.text) for k, v in resolve_overrides(key.text, properties))
    except IcepackError as error:
        return [PreparedAction(a.action, error=str(error)) for a in actions]
    plans = []
    for recommended in actions:
        try:
            guard_action(key, recommended.action, recommended.options, properties, now)
            call = render_call(catalog, key, recommended.action, recommended.options)
        except IcepackError as error:
            plans.append(PreparedAction(recommended.action, error=str(error)))
            continue
        dry = recommended.options.get("dry_run", "false").lower() == "true"
        statements = (*SESSION_SETUP, *sets, call)
        plans.append(PreparedAction(
            recommended.action, statements, dry_run_option=dry, prediction=recommended.prediction
        ))
    return plans


def orphan_guard_is_on(key: TableKey, session: SparkSession, plan: PreparedAction) -> PreparedAction:
    """Iceberg skips its own 24-hour orphan-age check when the session says `spark.testing=true` (a
    core setting no table override can reach, but a platform's Spark configuration could)."""
    if plan.action is not MaintenanceAction.REMOVE_ORPHAN_FILES or plan.error is not None:
        return plan
    if str(session.conf.get("spark.testing", "false")).strip().lower() != "true":
        return plan
    return replace(
        plan,
        statements=(),
        error=f"table {key.text}: {plan.action} refused: this Spark session sets spark.testing=true, "
        "which switches off Iceberg's 24-hour guard against deleting files of writes in progress; "
        "remove spark.testing from the Spark configuration",
    )
