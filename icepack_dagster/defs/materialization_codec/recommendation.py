"""`maintenance_recommendation` metadata: what to run and why, what was left out and why, the table's
quarantine state and circuit breakers, and the recommendation record the maintenance run reads back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from icepack_dagster.defs.materialization_codec.records import (
    RECOMMENDATION_JSON,
    SUMMARY,
    Metadata,
    byte_count,
    decode_model,
    record,
    table,
)
from icepack_dagster.domain.health.judging import format_bytes
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.recommendation.circuit_breakers import tripped_breaker
from icepack_dagster.domain.recommendation.model import Recommendation


def breaker_reasons(recommendation: Recommendation) -> dict[str, str]:
    """The actions a circuit breaker pauses, with the breaker's reason (`circuit_breakers.py`)."""
    return {s.action.value: s.reason for s in recommendation.skipped if tripped_breaker(s.reason)}


def history_metadata(history: TableHistory) -> Metadata:
    """Quarantine and failures in a row: shown on recommendations and maintenance runs alike."""
    metadata: Metadata = {
        "quarantined": dg.MetadataValue.bool(history.quarantined),
        "consecutive_failures": dg.MetadataValue.int(history.consecutive_failures),
        "consecutive_conflicts": dg.MetadataValue.int(history.consecutive_conflicts),
    }
    if history.violation:
        metadata["invariant_violation"] = dg.MetadataValue.text(history.violation)
    if history.last_error:
        metadata["last_error"] = dg.MetadataValue.text(history.last_error)
    return metadata


def recommendation_markdown(recommendation: Recommendation, history: TableHistory) -> str:
    lines = []
    if history.violation:
        lines += ["**paused: a maintenance commit broke an invariant**; evidence:", "",
                  f"`{history.violation}`", "",
                  "Restore with `icepack rollback TABLE` when safe, then release with "
                  "`icepack quarantine release TABLE` or the `release_quarantine` job.", ""]
    elif history.quarantined:
        lines += [f"**quarantined** after {history.consecutive_failures} consecutive failures; last error:",
                  "", f"`{history.last_error}`", "",
                  "Release with `icepack quarantine release TABLE` or the `release_quarantine` job.", ""]
    for action, reason in breaker_reasons(recommendation).items():
        lines += [f"**`{action}` paused by the {tripped_breaker(reason)} circuit breaker** (its left-out "
                  "reason below has the numbers and how it lifts).", ""]
    if history.consecutive_conflicts:
        lines += [f"**{history.consecutive_conflicts} maintenance(s) in a row conflicted** with a concurrent "
                  "writer (not failures; see the left-out reasons for the table's commit cadence).", ""]
    if recommendation.actions:
        lines.append(f"**{len(recommendation.actions)} action(s)**, priority {recommendation.priority:.3g}, "
                     f"about {format_bytes(recommendation.estimated_bytes_to_rewrite)} to rewrite:")
        lines += [f"1. `{a.action.value}`: {a.reason}" for a in recommendation.actions]
    else:
        lines.append("**nothing to do now**")
    if recommendation.skipped:
        lines += ["", "Left out:"] + [f"- `{s.action.value}`: {s.reason}" for s in recommendation.skipped]
    return "\n".join(lines)


def recommendation_metadata(recommendation: Recommendation, history: TableHistory) -> Metadata:
    actions = [
        {"action": a.action.value, "priority": float(a.priority), "reason": a.reason,
         "options": ", ".join(f"{k}={v}" for k, v in sorted(a.options.items()))}
        for a in recommendation.actions
    ]
    skipped = [{"action": s.action.value, "reason": s.reason} for s in recommendation.skipped]
    return {
        SUMMARY: dg.MetadataValue.md(recommendation_markdown(recommendation, history)),
        "needs_work": dg.MetadataValue.bool(recommendation.needs_work),
        "action_count": dg.MetadataValue.int(len(recommendation.actions)),
        "priority": dg.MetadataValue.float(float(recommendation.priority)),
        "expected_files_removed": dg.MetadataValue.int(recommendation.expected_files_removed),
        **byte_count("expected_bytes_reclaimed", recommendation.expected_bytes_reclaimed),
        **byte_count("estimated_bytes_to_rewrite", recommendation.estimated_bytes_to_rewrite),
        "actions": table([("action", "string"), ("priority", "float"), ("reason", "string"),
                          ("options", "string")], actions),
        "skipped": table([("action", "string"), ("reason", "string")], skipped),
        **history_metadata(history),
        "circuit_breakers": table(
            [("action", "string"), ("breaker", "string"), ("reason", "string")],
            [{"action": a, "breaker": tripped_breaker(r) or "", "reason": r}
             for a, r in breaker_reasons(recommendation).items()],
        ),
        **record(RECOMMENDATION_JSON, recommendation.model_dump(mode="json")),
    }


def decode_recommendation(metadata: Mapping[str, Any]) -> Recommendation | None:
    return decode_model(metadata, RECOMMENDATION_JSON, Recommendation)
