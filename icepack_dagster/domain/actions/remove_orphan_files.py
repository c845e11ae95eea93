"""`remove_orphan_files`: deleting files under the table's location that no metadata references and
that are older than the policy's orphan age. Orphans are invisible in metadata, so it is swept for on a
weekly cadence, even on healthy tables. Everything that could widen what it deletes is refused: options
that match files loosely or list another place, `older_than` less than 24 hours ago, a Spark session
that switches off Iceberg's own 24-hour guard, a table whose location listing cannot be trusted (the
engine checks that, `domain/table/unreferenced_files.py`), and gc.enabled false. The same listing
predicts how many files it deletes; a large removal streams its results (`removal_options`) and its
count stays exact (`read_outcome`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from icepack_dagster.domain.actions.definition import (
    ActionDefinition,
    ActionEstimate,
    PlanningContext,
    ProcedureOption,
)
from icepack_dagster.domain.actions.maintenance_action import ActionImpact, MaintenanceAction
from icepack_dagster.domain.actions.option_values import (
    boolean,
    int_between,
    iso_seconds,
    parse_timestamp,
    timestamp,
)
from icepack_dagster.domain.health.judging import format_hours
from icepack_dagster.domain.outcomes.commit_invariants import ORPHAN_RULES
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import InvalidProcedureOptionError, UnsafeMaintenanceError

ORPHAN_CADENCE_HOURS = 7 * 24  # orphans are invisible in metadata: look for them at most weekly
ORPHAN_MIN_AGE = timedelta(hours=24)  # Iceberg's own floor; never go below it
OPTIONS = {
    "older_than": ProcedureOption(timestamp, "timestamp"),
    "dry_run": ProcedureOption(boolean),
    "max_concurrent_deletes": ProcedureOption(int_between(1, 1000)),
    # set by the engine for object stores; absent from 1.8.1's procedure
    "prefix_listing": ProcedureOption(boolean, min_runtime=(1, 10, 0)),
    # set by the engine for a large removal (`removal_options`); first in 1.11.0's procedure. It changes
    # how the deleted locations come back, not what is deleted, so an older runtime runs without it.
    "stream_results": ProcedureOption(boolean, min_runtime=(1, 11, 0), left_out_below_runtime=True),
}
STREAM_RESULTS_FROM = 100_000
"""Predicted orphans from which the deleted locations are streamed to the driver rather than collected.
Iceberg deletes orphans in groups of 100,000 locations held on the driver either way
(`DeleteOrphanFilesSparkAction`'s delete group): below one group streaming saves no driver memory and
costs one Spark job per partition of the result (`toLocalIterator`); above it, collecting holds every
location at once (a million orphans: hundreds of MB on the driver), streaming one group at a time."""
STREAMED_SAMPLE_SIZE = 20_000
"""With `stream_results` the procedure returns at most this many of the deleted locations (Iceberg's
`max-orphan-file-sample-size`, which the procedure cannot change)."""
_WIDENS_MATCHING = (
    "files are matched to the metadata by exact scheme and authority; declaring them equal could "
    "delete files that metadata still references under another scheme or bucket (s3 vs s3a)"
)
# Options Iceberg accepts and icepack never passes: each would weaken a safety guard.
REFUSED_OPTIONS = {
    "location": "orphan removal lists the table's own location only, never another directory",
    "file_list_view": "the candidate files come from listing the table location, never from a view",
    "equal_schemes": _WIDENS_MATCHING,
    "equal_authorities": _WIDENS_MATCHING,
    "prefix_mismatch_mode": "a scheme or authority mismatch must stop orphan removal (Iceberg's ERROR "
    "mode); DELETE or IGNORE could delete files the metadata still references",
    "location_conflict_mode": "a conflicting location must stop orphan removal (Iceberg's default)",
}
# Iceberg skips its own 24-hour orphan-age check when the session says `spark.testing=true` (a core
# setting no table override can reach, but a platform's Spark configuration could).
REFUSED_SESSION_SETTINGS = {
    "spark.testing": (
        "true",
        "this Spark session sets spark.testing=true, which switches off Iceberg's 24-hour guard against "
        "deleting files of writes in progress; remove spark.testing from the Spark configuration",
    )
}


def plan(context: PlanningContext) -> ActionEstimate:
    hours = context.policy.orphan_older_than_hours
    return ActionEstimate(
        "files no snapshot references cannot be seen in metadata; they are looked for at most "
        f"every {format_hours(ORPHAN_CADENCE_HOURS)}, keeping any younger than {format_hours(hours)}",
        {"older_than": iso_seconds(context.now - timedelta(hours=hours))},
    )


def guard(key: TableKey, options: Mapping[str, str], properties: Mapping[str, str], now: datetime) -> None:
    """Orphan removal that would consider files younger than 24 hours is refused: they may belong to a
    running write."""
    if "older_than" not in options:
        return
    value = options["older_than"]
    try:
        older_than = parse_timestamp(value)
    except ValueError as error:
        raise InvalidProcedureOptionError(key.text, "older_than", value, str(error)) from None
    if now - older_than < ORPHAN_MIN_AGE:
        raise UnsafeMaintenanceError(
            f"table {key.text}: {MaintenanceAction.REMOVE_ORPHAN_FILES} refused: older_than "
            f"{older_than.isoformat()} is less than 24 hours before now ({now.astimezone(UTC).isoformat()}); "
            "files that young may belong to a write in progress. Use an older_than at least 24 hours ago."
        )


def removal_options(predicted: int) -> dict[str, str]:
    """`stream_results` for a removal the engine's listing predicts deletes `predicted` files, from
    `STREAM_RESULTS_FROM` on (see there why not below)."""
    return {"stream_results": "true"} if predicted >= STREAM_RESULTS_FROM else {}


def read_outcome(rows: Sequence[Mapping[str, object]], options: Mapping[str, str]) -> ActionImpact:
    """The procedure returns one row per deleted file: they are counted (none removed on a dry run).
    Streamed, it returns a sample of at most `STREAMED_SAMPLE_SIZE`: fewer rows are still every file,
    but a full sample only says "at least that many", so the count is left unknown (None) for the
    engine to take from its listings before and after the removal (`engine/maintenance_run.py`)."""
    found = len(rows)
    dry_run = options.get("dry_run", "false").lower() == "true"
    sampled = options.get("stream_results", "false").lower() == "true" and found >= STREAMED_SAMPLE_SIZE
    if sampled:
        output: dict[str, int | float | str | None] = {"orphan_file_sample_count": found}
    else:
        output = {"orphan_file_count": found}
    removed = 0 if dry_run else None if sampled else found
    return ActionImpact(procedure_output=output, orphan_files_removed=removed)


DEFINITION: ActionDefinition = ActionDefinition(
    action=MaintenanceAction.REMOVE_ORPHAN_FILES,
    plan=plan,
    options=OPTIONS,
    refused_options=REFUSED_OPTIONS,
    destructive=True,
    guard=guard,
    read_outcome=read_outcome,
    sweep_cadence_hours=ORPHAN_CADENCE_HOURS,
    refused_session_settings=REFUSED_SESSION_SETTINGS,
    deletes_unreferenced_files=True,
    object_store_options={"prefix_listing": "true"},
    removal_options=removal_options,
    commit_rules=ORPHAN_RULES,
)
