"""What the runner will run for each of a table's actions, or why it refuses the action, decided before
any procedure runs: options, the table's `icepack.spark.sql.*` overrides and the safety guards are
checked here, and each action once more against the session it would run in (the settings its module
refuses: for orphan removal, one that switches off Iceberg's own 24-hour guard)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.planners.compaction import RewritePrediction
from icepack_dagster.domain.actions.readable_types import unreadable_type_refusal
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.actions.runtime_requirements import left_out_options, runtime_refusal
from icepack_dagster.domain.recommendation.model import RecommendedAction
from icepack_dagster.domain.sql.procedures import SESSION_SETUP, guard_action, render_call
from icepack_dagster.domain.sql.spark_overrides import render_set, resolve_overrides
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import IcepackError, InvalidTableIdentifierError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class PreparedAction:
    """One action ready to run (statements), refused before running (error), or refused because the
    Spark's Iceberg runtime cannot do it safely (runtime_refusal: an outcome of its own)."""

    action: MaintenanceAction
    statements: tuple[str, ...] = ()
    error: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    prediction: RewritePrediction | None = None
    runtime_refusal: str | None = None


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
        statements = (*SESSION_SETUP, *sets, call)
        plans.append(
            PreparedAction(
                recommended.action,
                statements,
                options=recommended.options,
                prediction=recommended.prediction,
            )
        )
    return plans


def refused_by_session(key: TableKey, session: SparkSession, plan: PreparedAction) -> PreparedAction:
    """The prepared action, refused when the session sets one of the settings the action's module refuses (for
    orphan removal, `spark.testing=true`: a core setting no table override can reach, but a platform's
    Spark configuration could)."""
    if plan.error is not None:
        return plan
    for setting, (refused, why) in definition(plan.action).refused_session_settings.items():
        if str(session.conf.get(setting, "")).strip().lower() == refused:
            return replace(plan, statements=(), error=f"table {key.text}: {plan.action} refused: {why}")
    return plan


def runtime_gate(
    catalog: str, key: TableKey, plan: PreparedAction, runtime: str | None, format_version: int | None
) -> PreparedAction:
    """Refuse an action (or an option of it) that the session's Iceberg runtime cannot do safely on a
    table of this format version; leave out of its CALL an option that only changes how it works and
    that the runtime lacks (`domain/actions/runtime_requirements.py`)."""
    if plan.error is not None:
        return plan
    refusal = runtime_refusal(key.text, plan.action, plan.options, format_version, runtime)
    if refusal is not None:
        return replace(plan, statements=(), runtime_refusal=refusal)
    left_out = left_out_options(plan.action, plan.options, runtime)
    if not left_out:
        return plan
    options = {name: value for name, value in plan.options.items() if name not in left_out}
    call = render_call(catalog, key, plan.action, options)
    return replace(plan, statements=(*plan.statements[:-1], call), options=options)


def type_gate(
    key: TableKey,
    plan: PreparedAction,
    schema_types: Mapping[str, str],
    spark: str | None,
    runtime: str | None,
) -> PreparedAction:
    """Refuse an action on a table whose schema holds a type this Spark cannot read
    (`domain/actions/readable_types.py`): Spark cannot even open such a table."""
    if plan.error is not None:
        return plan
    refusal = unreadable_type_refusal(key.text, plan.action, schema_types, spark, runtime)
    return plan if refusal is None else replace(plan, statements=(), runtime_refusal=refusal)
