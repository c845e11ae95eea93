"""Predicted against actual: what an action was expected to do, what Iceberg reports it did, and whether
the two are far apart.

Every rewrite and expiry states its expectation as files in, files out and bytes in (a `RewritePrediction`
on the recommended action). After the procedure runs, its output row says what it did; the fields that
count as "files in", "files out" and "bytes in" differ per procedure (each action module's
`output_fields`). An action that
did nothing where something was planned is `no_effect`: neither a success nor a failure (no quarantine),
and the recommendation does not repeat it until the table changes.
"""

from __future__ import annotations

from collections.abc import Mapping

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.planners.compaction import RewritePrediction
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.outcomes.prediction import ActionFigures, PredictedActual


def planned_figures(prediction: RewritePrediction) -> ActionFigures:
    return ActionFigures(
        files_in=prediction.files_in, files_out=prediction.files_out, bytes_in=prediction.bytes_in
    )


def _count(output: Mapping[str, object], name: str | None) -> int | None:
    value = output.get(name) if name is not None else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def done_figures(action: MaintenanceAction, output: Mapping[str, object]) -> ActionFigures | None:
    """What the procedure's output row says it did; None for an action without counts."""
    fields = definition(action).output_fields
    if fields is None:
        return None
    files_in = _count(output, fields[0])
    if files_in is None:
        return None
    return ActionFigures(
        files_in=files_in, files_out=_count(output, fields[1]), bytes_in=_count(output, fields[2])
    )


def compare(
    action: MaintenanceAction, prediction: RewritePrediction | None, output: Mapping[str, object]
) -> PredictedActual | None:
    """The prediction against the output; None when the action carried no prediction."""
    if prediction is None:
        return None
    return PredictedActual(
        planned=planned_figures(prediction), done=done_figures(action, output), exact=prediction.exact
    )
