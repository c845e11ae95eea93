"""Which tables need a person, and why: the one definition behind the `needs_operator` check of
`table_health`. Health says how a table is; this says whether icepack can do anything more about it on
its own. It cannot when the table is quarantined (automatic maintenance stopped), when its maintenance
keeps failing (the streak the alert sensor posts about), when its latest maintenance was refused by the
Spark's Iceberg runtime (too old for the table's format or an option: only a person can give it another
Spark or change the policy), or when its metadata could not be read (health unknown for a reason, not
merely not measured yet).

Each reason is one rule: a function of what is known about the table (`OperatorFacts`) returning an
`OperatorNeed` or None, listed in `RULES` in the order a person should read them (the first that
applies is the reason shown). A new outcome kind plugs in as one rule and one line in `RULES`:
- a commit-invariant `violation` outcome (maintenance refused to commit): a rule over the history's
  latest outcome;
- a repeated `conflict` (commits losing to writers, run after run): a rule over its streak.
Each such fact is then a field of `OperatorFacts`, filled where the health sync builds them
(defs/health_sync/table_sync.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.health.model import HealthState, TableHealth
from icepack_dagster.domain.outcomes.history import TableHistory

# The error of a table the sync judged without a status and without a read failure: not measured yet.
NOT_MEASURED = "no status was measured"

OperatorReason = Literal["quarantined", "failing", "runtime_refused", "metadata_unreadable"]


class OperatorFacts(FrozenModel):
    """What the rules judge a table from."""

    health: TableHealth
    history: TableHistory
    failing_after: int = Field(ge=1, description="Consecutive failures that make a streak worth a person")


class OperatorNeed(FrozenModel):
    """Why a person must act on a table: the reason, a sentence saying what to do, and the evidence."""

    reason: OperatorReason
    summary: str
    evidence: dict[str, Any] = Field(default_factory=dict)


def _quarantined(facts: OperatorFacts) -> OperatorNeed | None:
    history = facts.history
    if not history.quarantined:
        return None
    return OperatorNeed(
        reason="quarantined",
        summary=f"quarantined after {history.consecutive_failures} consecutive maintenance failures; "
        f"fix the cause, then `icepack quarantine release {history.table}` or the release_quarantine job",
        evidence={
            "consecutive_failures": history.consecutive_failures,
            "quarantined_at": history.quarantined_at.isoformat() if history.quarantined_at else None,
            "last_error": history.last_error,
        },
    )


def _failing(facts: OperatorFacts) -> OperatorNeed | None:
    history = facts.history
    if history.consecutive_failures < facts.failing_after:
        return None
    return OperatorNeed(
        reason="failing",
        summary=f"maintenance failed {history.consecutive_failures} times in a row; read the last "
        f"maintenance run's logs and fix the cause before it is quarantined",
        evidence={
            "consecutive_failures": history.consecutive_failures,
            "failing_after": facts.failing_after,
            "last_run_at": history.last_run_at.isoformat() if history.last_run_at else None,
            "last_error": history.last_error,
        },
    )


def _runtime_refused(facts: OperatorFacts) -> OperatorNeed | None:
    """The latest maintenance refused by the runtime gate (domain/actions/runtime_requirements.py): it
    is refused again on every run until a person acts, and it is never a failure, so no streak shows it."""
    history = facts.history
    if history.refused is None:
        return None
    return OperatorNeed(
        reason="runtime_refused",
        summary="its latest maintenance was refused: the Spark's Iceberg runtime is older than the table's "
        "format or an option needs; run maintenance on a Spark with that runtime or later (`icepack spark "
        "runtime` shows the configured one), or change the policy that asks for the option",
        evidence={
            "refusal": history.refused,
            "last_run_at": history.last_run_at.isoformat() if history.last_run_at else None,
        },
    )


def _metadata_unreadable(facts: OperatorFacts) -> OperatorNeed | None:
    health = facts.health
    if health.state is not HealthState.UNKNOWN or health.error in (None, NOT_MEASURED):
        return None
    return OperatorNeed(
        reason="metadata_unreadable",
        summary="its metadata could not be read, so nothing can be judged or maintained; check the "
        "catalog, the storage and the credentials for this table",
        evidence={"error": health.error},
    )


Rule = Callable[[OperatorFacts], OperatorNeed | None]
RULES: tuple[Rule, ...] = (_quarantined, _failing, _runtime_refused, _metadata_unreadable)


def operator_need(facts: OperatorFacts) -> OperatorNeed | None:
    """The first reason a person must act on the table, or None when icepack handles it alone."""
    return next((need for rule in RULES if (need := rule(facts)) is not None), None)
