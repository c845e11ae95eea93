"""What icepack alerts an operator about, and what the alert says: a table entering quarantine (once per
quarantine episode), a table whose maintenance keeps failing below the quarantine threshold (once per
streak of failures) and a failed health-sync run (once per run).

An episode is recognised from maintenance history alone: its consecutive failures and the time of the
newest one. More failures since the last look continue the same streak; fewer, or as many ending at a
different time, mean the streak was broken (a success or an operator's release) and a new one began.
The messages are Slack-compatible JSON (`{"text": ...}`, which Slack, Mattermost, Rocket.Chat and most
chat webhooks accept), bounded in length, with anything that looks like a credential masked.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.outcomes.history import TableHistory

MAX_ERROR_CHARS = 500
MASK = "**********"
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@")
_SECRET_ASSIGNMENT = re.compile(
    r"(?i)\b([\w.-]*(?:password|passwd|secret|token|credential|api[_-]?key|access[_-]?key)[\w.-]*"
    r"\s*[=:]\s*)(['\"]?)[^\s'\",;&]+"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[a-z0-9._~+/=-]{8,}")


class Alert(FrozenModel):
    """One message for the operator's channel."""

    kind: Literal["quarantine", "failing", "health_sync_failed"]
    subject: str = Field(description="The table or the run the alert is about")
    text: str

    def payload(self) -> dict[str, str]:
        """The Slack-compatible webhook body."""
        return {"text": self.text}


class StreakSeen(FrozenModel):
    """The failure streak of one table as the alert sensor last saw it."""

    failures: int = Field(ge=1)
    last_failure_at: datetime | None = None
    quarantined: bool = False


def mask_secrets(text: str) -> str:
    """`text` with URL user info, `password=...`-style assignments and bearer tokens masked."""
    text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    text = _SECRET_ASSIGNMENT.sub(rf"\1\2{MASK}", text)
    return _BEARER.sub(rf"\1 {MASK}", text)


def shown_error(error: str | None, limit: int = MAX_ERROR_CHARS) -> str:
    """An error as an alert quotes it: secrets masked, one line, at most `limit` characters."""
    if not error:
        return "no error recorded"
    text = " ".join(mask_secrets(error).split())
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _same_streak(seen: StreakSeen | None, now: StreakSeen) -> bool:
    if seen is None:
        return False
    if now.failures > seen.failures:
        return True
    return now.failures == seen.failures and now.last_failure_at == seen.last_failure_at


def judge_streak(
    table: str, history: TableHistory, seen: StreakSeen | None, failing_after: int, quarantine_after: int
) -> tuple[Alert | None, StreakSeen | None]:
    """The alert `history` calls for given what was seen before, and what to remember next (None: the
    table is not failing, forget it). The caller remembers the new streak only once the alert is sent,
    so an alert that could not be delivered is sent again next time."""
    failures = history.consecutive_failures
    if not history.quarantined and failures < failing_after:
        return None, None
    now = StreakSeen(failures=failures, last_failure_at=history.last_run_at, quarantined=history.quarantined)
    same = _same_streak(seen, now)
    if history.quarantined and not (same and seen is not None and seen.quarantined):
        return quarantine_alert(table, history), now
    if not history.quarantined and not same:
        return failing_alert(table, history, quarantine_after), now
    return None, now


def quarantine_alert(table: str, history: TableHistory) -> Alert:
    if history.violation is not None:
        evidence = shown_error(history.violation, 2 * MAX_ERROR_CHARS)
        return Alert(kind="quarantine", subject=table, text=(
            f":rotating_light: icepack: a maintenance commit on table `{table}` broke an invariant; the "
            f"table is PAUSED for maintenance.\nEvidence: {evidence}\n"
            f"What to do: compare the two metadata files named; `icepack rollback {table} --dry-run` shows "
            f"whether the snapshot before it can be restored; then `icepack quarantine release {table}`."
        ))
    text = (
        f":rotating_light: icepack: table `{table}` is QUARANTINED after {history.consecutive_failures} "
        f"consecutive maintenance failures; automatic maintenance of it has stopped.\n"
        f"Last error: {shown_error(history.last_error)}\n"
        f"What to do: fix the cause (see the last maintenance run's logs), then release it with "
        f"`icepack quarantine release {table}` or the `release_quarantine_job` (config table: {table})."
    )
    return Alert(kind="quarantine", subject=table, text=text)


def failing_alert(table: str, history: TableHistory, quarantine_after: int) -> Alert:
    text = (
        f":warning: icepack: maintenance of table `{table}` failed {history.consecutive_failures} times "
        f"in a row; at {quarantine_after} it is quarantined and automatic maintenance stops.\n"
        f"Last error: {shown_error(history.last_error)}\n"
        f"What to do: look at the last maintenance run's logs (`icepack quarantine show {table}` shows "
        f"the history) and fix the cause before the next attempt."
    )
    return Alert(kind="failing", subject=table, text=text)


def health_sync_failed_alert(run_id: str, batch: str | None, error: str | None) -> Alert:
    covering = f" ({batch})" if batch else ""
    text = (
        f":x: icepack: health-sync run `{run_id}`{covering} failed; the status and health of its tables "
        f"are stale until a sync succeeds.\n"
        f"Error: {shown_error(error)}\n"
        f"What to do: read the run's logs in Dagster, fix the cause (catalog reachable, credentials), "
        f"then re-execute the run; the schedule also tries again at its next tick."
    )
    return Alert(kind="health_sync_failed", subject=run_id, text=text)
