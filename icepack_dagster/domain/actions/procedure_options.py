"""Which options each maintenance procedure may be given, and their values in canonical form.

Option keys come from a per-action allowlist and values are parsed and re-printed from their type,
never copied through. Options that would weaken a guard (widening orphan-file matching, hiding failed
commits) are refused by name, and partial progress always runs with no failed commit tolerated, so a
failed file group fails the action. `procedures.py` renders the checked options into a `CALL`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.option_values import Validator, boolean, int_between
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import InvalidProcedureOptionError

_DECIMAL = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?")


def _ratio(value: str) -> str:
    if not _DECIMAL.fullmatch(value) or not 0 < float(value) <= 1:
        raise ValueError("expected a decimal number above 0 and at most 1")
    return repr(float(value))


def _filter(value: str) -> str:
    """A rewrite's `where`: the planner's partition filter (leaving hot partitions out), one line."""
    if not value.strip() or "\n" in value or len(value) > 20_000:
        raise ValueError("must be one non-empty line of at most 20000 characters")
    return value


def _one_of(*choices: str) -> Validator:
    def validate(value: str) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return value

    return validate


def _no_failed_commits(value: str) -> str:
    if value != "0":
        raise ValueError("expected 0: Iceberg reports up to this many failed commits as success")
    return value


def parse_timestamp(value: str) -> datetime:
    """An ISO 8601 timestamp; one without an offset is taken as UTC (Spark sessions here run in UTC)."""
    if not value or len(value) > 40 or not value.isascii():
        raise ValueError("expected an ISO 8601 timestamp such as 2024-05-01T00:00:00+00:00")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("expected an ISO 8601 timestamp such as 2024-05-01T00:00:00+00:00") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _timestamp(value: str) -> str:
    return parse_timestamp(value).strftime("%Y-%m-%d %H:%M:%S.%f+00:00")


_BYTES = int_between(1, 2**50)
_COUNT = int_between(1, 1_000_000)
_JOB_ORDER = _one_of("bytes-asc", "bytes-desc", "files-asc", "files-desc", "none")
_REWRITE_COMMON: dict[str, Validator] = {
    "target-file-size-bytes": _BYTES,
    "min-file-size-bytes": int_between(0, 2**50),
    "max-file-size-bytes": _BYTES,
    "min-input-files": _COUNT,
    "rewrite-all": boolean,
    "max-file-group-size-bytes": _BYTES,
    "max-concurrent-file-group-rewrites": int_between(1, 1000),
    "partial-progress.enabled": boolean,
    "partial-progress.max-commits": int_between(1, 10_000),
    "rewrite-job-order": _JOB_ORDER,
}
# Per action: options that go into the procedure's `options => map(...)`.
MAP_OPTIONS: dict[MaintenanceAction, dict[str, Validator]] = {
    MaintenanceAction.REWRITE_DATA_FILES: _REWRITE_COMMON
    | {
        "delete-file-threshold": int_between(0, 1_000_000),
        "delete-ratio-threshold": _ratio,
        "use-starting-sequence-number": boolean,
        "remove-dangling-deletes": boolean,
        "partial-progress.max-failed-commits": _no_failed_commits,
    },
    MaintenanceAction.REWRITE_POSITION_DELETE_FILES: {
        name: check for name, check in _REWRITE_COMMON.items() if not name.startswith("partial-progress.")
    },
}
# Per action: options that are named procedure arguments, rendered as typed SQL literals.
ARGUMENT_OPTIONS: dict[MaintenanceAction, dict[str, Validator]] = {
    MaintenanceAction.REWRITE_DATA_FILES: {"strategy": _one_of("binpack", "sort"), "where": _filter},
    MaintenanceAction.REWRITE_POSITION_DELETE_FILES: {},
    MaintenanceAction.REWRITE_MANIFESTS: {"use_caching": boolean, "spec_id": int_between(0, 100_000)},
    MaintenanceAction.EXPIRE_SNAPSHOTS: {
        "older_than": _timestamp,
        "retain_last": int_between(1, 2**31 - 1),  # up to any history.expire.min-snapshots-to-keep
        "max_concurrent_deletes": int_between(1, 1000),
        "stream_results": boolean,
        "clean_expired_metadata": boolean,
    },
    MaintenanceAction.REMOVE_ORPHAN_FILES: {
        "older_than": _timestamp,
        "dry_run": boolean,
        "max_concurrent_deletes": int_between(1, 1000),
        "prefix_listing": boolean,  # set by the engine for object stores (domain/table/unreferenced_files.py)
    },
}
_REFUSED = {
    "table": "the table comes from the table key, not from options",
    "options": "give map options as separate keys",
}
_WIDENS_MATCHING = (
    "files are matched to the metadata by exact scheme and authority; declaring them equal could "
    "delete files that metadata still references under another scheme or bucket (s3 vs s3a)"
)
_HIDES_FAILED_COMMITS = (
    "with partial progress Iceberg drops a file group whose commit fails and still reports success; "
    "icepack reports outcomes honestly, so it rewrites position deletes in one commit"
)
# Options Iceberg accepts and icepack never passes, per action: each would weaken a safety guard.
REFUSED_OPTIONS: dict[MaintenanceAction, dict[str, str]] = {
    MaintenanceAction.REMOVE_ORPHAN_FILES: {
        "location": "orphan removal lists the table's own location only, never another directory",
        "file_list_view": "the candidate files come from listing the table location, never from a view",
        "equal_schemes": _WIDENS_MATCHING,
        "equal_authorities": _WIDENS_MATCHING,
        "prefix_mismatch_mode": "a scheme or authority mismatch must stop orphan removal (Iceberg's ERROR "
        "mode); DELETE or IGNORE could delete files the metadata still references",
        "location_conflict_mode": "a conflicting location must stop orphan removal (Iceberg's default)",
    },
    MaintenanceAction.REWRITE_POSITION_DELETE_FILES: {
        "partial-progress.enabled": _HIDES_FAILED_COMMITS,
        "partial-progress.max-commits": _HIDES_FAILED_COMMITS,
    },
}
PARTIAL_PROGRESS = "partial-progress.enabled"
MAX_FAILED_COMMITS = "partial-progress.max-failed-commits"


def validate_options(key: TableKey, action: MaintenanceAction, options: Mapping[str, str]) -> dict[str, str]:
    """Options checked against the action's allowlist, values in their canonical printed form."""
    allowed = MAP_OPTIONS.get(action, {}) | ARGUMENT_OPTIONS[action]
    clean = {}
    for name, value in options.items():
        if name in _REFUSED:
            reason = f"refused for {action}: {_REFUSED[name]}"
            raise InvalidProcedureOptionError(key.text, name, value, reason)
        if name in REFUSED_OPTIONS.get(action, {}):
            reason = f"not an option icepack ever passes to {action}: {REFUSED_OPTIONS[action][name]}"
            raise InvalidProcedureOptionError(key.text, name, value, reason)
        if name not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise InvalidProcedureOptionError(
                key.text, name, value, f"not an option of {action} (allowed: {known})"
            )
        if not isinstance(value, str):
            raise InvalidProcedureOptionError(key.text, name, value, "option values are strings")
        try:
            clean[name] = allowed[name](value)
        except ValueError as error:
            raise InvalidProcedureOptionError(key.text, name, value, f"{action}: {error}") from None
    if clean.get(PARTIAL_PROGRESS) == "true":
        clean.setdefault(MAX_FAILED_COMMITS, "0")  # a failed file group then fails the action
    return clean
