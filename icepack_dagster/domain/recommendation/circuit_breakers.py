"""Circuit breakers on rewrites: a table whose maintenance rewrites far more than it holds is caught in a
loop (the same data rewritten again and again), not being maintained. When the bytes its rewrites read
in the last 24 hours (the procedures' own `rewritten_bytes_count`, from the history's predicted-against-
done rows) exceed `AMPLIFICATION_LIMIT` times the table's live data, its rewrites pause: the reason says
which breaker tripped and with which numbers. The pause expires as the 24-hour window moves on, or a
person lifts it at once with `icepack quarantine release` (bytes are counted from the release on).
Expiry and orphan removal rewrite nothing and are never paused by it."""

from __future__ import annotations

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.registry import ACTIONS
from icepack_dagster.domain.health.judging import format_bytes
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.table.status import TableStatus

AMPLIFICATION_LIMIT = 10  # rewritten bytes per 24 h, as a multiple of the table's live data bytes
# The actions whose rewritten bytes count (each action's module says: `counts_rewritten_bytes`).
REWRITES = tuple(d.action for d in ACTIONS if d.counts_rewritten_bytes)
WINDOW_HOURS = 24


def amplification_breaker(
    action: MaintenanceAction, status: TableStatus, history: TableHistory
) -> str | None:
    """Why `action` is paused by the write-amplification breaker, or None."""
    if action not in REWRITES:
        return None
    size = status.live_data_bytes + status.live_delete_bytes
    limit = AMPLIFICATION_LIMIT * max(size, 1)
    if history.bytes_rewritten_24h <= limit:
        return None
    return (
        f"circuit breaker (write amplification) tripped: {format_bytes(history.bytes_rewritten_24h)} "
        f"rewritten in the last {WINDOW_HOURS} h, more than {AMPLIFICATION_LIMIT}x the table's "
        f"{format_bytes(size)}; rewrites pause until the window drops below that, or a person lifts it "
        f"with `icepack quarantine release {status.table}` (or the release_quarantine job)"
    )
