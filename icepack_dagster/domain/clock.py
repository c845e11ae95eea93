"""The one clock of the package: every "now" icepack reads, timezone-aware in UTC. Decisions take `now`
as an argument (so they are pure and testable at any instant); the callers at the edges read it here.
It reads `datetime.now` at each call, so tests that freeze or move time with time-machine move it too.
Durations are measured with `time.monotonic`, which is not a clock reading of "now"."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    """The current instant, in UTC."""
    return datetime.now(UTC)
