"""Alert decisions and messages, pure: which history calls for which alert (one per quarantine episode,
one warning per failure streak, none for a healthy table), messages that name the table, quote the
last error masked and bounded, and say what to do; and the webhook adapter's errors, which never quote
the URL (it carries a token)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from icepack_dagster.alerting.webhook import post_json
from icepack_dagster.domain.decisions.sensor_cursors import AlertCursor, decode_cursor
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.reports.alerts import (
    MASK,
    MAX_ERROR_CHARS,
    judge_streak,
    mask_secrets,
    shown_error,
)
from icepack_dagster.exceptions import WebhookDeliveryError

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TABLE = "lake.sales.orders"


def _history(
    failures: int, last: datetime = T0, threshold: int = 3, error: str = "disk full"
) -> TableHistory:
    return TableHistory(
        table=TABLE, consecutive_failures=failures, last_run_at=last, last_error=error if failures else None,
        quarantined=failures >= threshold, quarantined_at=last if failures >= threshold else None,
    )


def test_a_healthy_table_is_forgotten_and_never_alerted() -> None:
    assert judge_streak(TABLE, _history(0), None, 2, 3) == (None, None)
    assert judge_streak(TABLE, _history(1), None, 2, 3) == (None, None)


def test_one_warning_per_streak_then_one_quarantine_alert() -> None:
    warning, seen = judge_streak(TABLE, _history(2), None, 2, 3)
    assert warning is not None and warning.kind == "failing" and seen is not None
    assert judge_streak(TABLE, _history(2), seen, 2, 3) == (None, seen)
    quarantine, seen = judge_streak(TABLE, _history(3, T0 + timedelta(hours=1)), seen, 2, 3)
    assert quarantine is not None and quarantine.kind == "quarantine"
    again, _ = judge_streak(TABLE, _history(4, T0 + timedelta(hours=2)), seen, 2, 3)
    assert again is None


def test_a_new_quarantine_episode_is_recognised_even_unseen_in_between() -> None:
    first, seen = judge_streak(TABLE, _history(3), None, 2, 3)
    assert first is not None
    second, _ = judge_streak(TABLE, _history(3, T0 + timedelta(days=1)), seen, 2, 3)
    assert second is not None and second.kind == "quarantine"


def test_the_message_names_table_error_and_what_to_do() -> None:
    error = "s3://bucket: password=hunter2 " + "x" * 5000
    alert, _ = judge_streak(TABLE, _history(3, error=error), None, 2, 3)
    assert alert is not None
    text = alert.payload()["text"]
    assert TABLE in text and f"icepack quarantine release {TABLE}" in text
    assert "hunter2" not in text and MASK in text and len(text) < MAX_ERROR_CHARS + 600


@pytest.mark.parametrize(
    "secret_text",
    [
        "jdbc failed for postgresql://icepack:hunter2@db:5432/state",
        "rest catalog: credential=hunter2 rejected",
        "header Authorization: Bearer hunter2hunter2",
        "S3 error: aws_secret_access_key = 'hunter2'",
    ],
)
def test_secrets_are_masked(secret_text: str) -> None:
    assert "hunter2" not in mask_secrets(secret_text)
    assert "hunter2" not in shown_error(secret_text)


def test_a_broken_cursor_starts_fresh() -> None:
    assert decode_cursor(AlertCursor, '{"version": 99}') == AlertCursor()


def test_webhook_errors_never_quote_the_url() -> None:
    token = "T0/B0/s3cr3t"
    for url in (f"not-a-url/{token}", f"http://[::1/{token}", f"http://127.0.0.1:1/{token}"):
        with pytest.raises(WebhookDeliveryError) as raised:
            post_json(SecretStr(url), {"text": "x"}, timeout=2)
        assert token not in str(raised.value)
