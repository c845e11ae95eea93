"""Rendering of Iceberg's Spark procedure calls, one `CALL` per maintenance action.

Nothing a table name or an option carries can change what a statement does: the table goes into the
procedure's `table` argument as backtick-quoted parts (Iceberg parses it with Spark's multipart
identifier parser) inside an escaped SQL string literal, qualified with the catalog so a namespace
that happens to share a catalog's name is still addressed exactly. Options are checked against each
action's allowlist and re-printed from their type (`procedure_options.py`). `guard_action` refuses
what must never run (deleting files of a gc.enabled=false table, expiry below Iceberg's own retention,
orphan removal of files younger than 24 hours).

Spark substitutes `${...}` in SQL text, also inside the parsed `table` string; the statements are exact
only in a session that ran `SESSION_SETUP` first (the runner does).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.procedure_options import (
    ARGUMENT_OPTIONS,
    MAP_OPTIONS,
    parse_timestamp,
    validate_options,
)
from icepack_dagster.domain.table.iceberg_properties import (
    GC_ENABLED,
    MAX_SNAPSHOT_AGE_MS,
    MIN_SNAPSHOTS_TO_KEEP,
    gc_enabled,
    retention_floor,
    unreadable_for,
)
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import (
    InvalidProcedureOptionError,
    InvalidTableIdentifierError,
    UnsafeMaintenanceError,
)

SESSION_SETUP: tuple[str, ...] = ("SET spark.sql.variable.substitute=false",)
ORPHAN_MIN_AGE = timedelta(hours=24)  # Iceberg's own floor; never go below it
_CATALOG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING_ARGUMENTS = {"strategy", "where"}
_TIMESTAMP_ARGUMENTS = {"older_than"}
def sql_string(value: str) -> str:
    """A Spark SQL string literal that unescapes to exactly `value`."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_identifier(*parts: str) -> str:
    """A multipart identifier with every part in backticks (backticks doubled)."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def spark_catalog_name(catalog: str) -> str:
    """The catalog name as it may appear unquoted in a statement: letters, digits, underscore."""
    if not _CATALOG_NAME.fullmatch(catalog):
        raise InvalidTableIdentifierError(
            f"catalog name {catalog!r} cannot be used in Spark SQL: use letters, digits and '_' only"
        )
    return catalog


def qualified_table(catalog: str, key: TableKey) -> str:
    """The table as Spark SQL addresses it: `catalog`.`ns`.`table`, every part quoted."""
    return quote_identifier(spark_catalog_name(catalog), *key.identifier)


def existence_probe(catalog: str, key: TableKey) -> str:
    """A read-only statement that fails with TABLE_OR_VIEW_NOT_FOUND unless the table exists; Spark
    analyses it without running a job."""
    return f"SELECT * FROM {qualified_table(catalog, key)} LIMIT 0"


def render_call(catalog: str, key: TableKey, action: MaintenanceAction, options: Mapping[str, str]) -> str:
    """The `CALL <catalog>.system.<action>(...)` statement for one action on one table."""
    clean = validate_options(key, action, options)
    table_argument = sql_string(quote_identifier(spark_catalog_name(catalog), *key.identifier))
    arguments = [f"table => {table_argument}"]
    for name in ARGUMENT_OPTIONS[action]:
        if name not in clean:
            continue
        if name in _TIMESTAMP_ARGUMENTS:
            arguments.append(f"{name} => TIMESTAMP {sql_string(clean[name])}")
        elif name in _STRING_ARGUMENTS:
            arguments.append(f"{name} => {sql_string(clean[name])}")
        else:
            arguments.append(f"{name} => {clean[name]}")
    entries = [(name, value) for name, value in sorted(clean.items()) if name in MAP_OPTIONS.get(action, {})]
    if entries:
        pairs = ", ".join(f"{sql_string(name)}, {sql_string(value)}" for name, value in entries)
        arguments.append(f"options => map({pairs})")
    return f"CALL {catalog}.system.{action.value}({', '.join(arguments)})"


def _retention_guard(
    key: TableKey, options: Mapping[str, str], properties: Mapping[str, str], now: datetime
) -> None:
    """Refuse an expiry that keeps less than the table's own history.expire.* would, unless the table's
    owner chose to through icepack.snapshot.* (a stale plan, made before the property changed)."""
    keep, hours = retention_floor(properties)
    retain = options.get("retain_last", "")  # malformed values are refused when the call is rendered
    owner_count, owner_age = "icepack.snapshot.retain-last", "icepack.snapshot.max-age-hours"
    if keep is not None and owner_count not in properties and retain.isdecimal() and int(retain) < keep:
        raise UnsafeMaintenanceError(
            f"table {key.text}: expire_snapshots refused: retain_last {retain} is fewer than the table's "
            f"{MIN_SNAPSHOTS_TO_KEEP}={keep}, which Iceberg itself keeps; set {owner_count} to keep fewer"
        )
    older = options.get("older_than")
    if hours is not None and owner_age not in properties and older is not None:
        try:
            older_than = parse_timestamp(older)
        except ValueError as error:
            raise InvalidProcedureOptionError(key.text, "older_than", older, str(error)) from None
        if (now - older_than).total_seconds() / 3600 < hours:
            raise UnsafeMaintenanceError(
                f"table {key.text}: expire_snapshots refused: older_than {older_than.isoformat()} is younger "
                f"than the table's {MAX_SNAPSHOT_AGE_MS} ({hours:g} h), which Iceberg itself keeps; set "
                f"{owner_age} to keep less"
            )


def guard_action(
    key: TableKey,
    action: MaintenanceAction,
    options: Mapping[str, str],
    properties: Mapping[str, str],
    now: datetime,
) -> None:
    """Refuse what must never run: destructive actions on a table whose gc.enabled Iceberg reads as false,
    an action Iceberg would fail for an unreadable table property, an expiry keeping less than the
    table's own history.expire.* (unless its owner chose so), and orphan removal that would consider
    files younger than 24 hours (they may belong to a running write)."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    if action.destructive and not gc_enabled(properties):
        raise UnsafeMaintenanceError(
            f"table {key.text}: {action} refused: the table sets gc.enabled={properties[GC_ENABLED]!r}, "
            "which Iceberg reads as false, so maintenance must never delete its files"
        )
    if (unreadable := unreadable_for(action, properties)) is not None:
        raise UnsafeMaintenanceError(f"table {key.text}: {action} refused: {unreadable}")
    if action is MaintenanceAction.EXPIRE_SNAPSHOTS:
        _retention_guard(key, options, properties, now)
    if action is MaintenanceAction.REMOVE_ORPHAN_FILES and "older_than" in options:
        value = options["older_than"]
        try:
            older_than = parse_timestamp(value)
        except ValueError as error:
            raise InvalidProcedureOptionError(key.text, "older_than", value, str(error)) from None
        if now - older_than < ORPHAN_MIN_AGE:
            raise UnsafeMaintenanceError(
                f"table {key.text}: {action} refused: older_than {older_than.isoformat()} is less than "
                f"24 hours before now ({now.astimezone(UTC).isoformat()}); files that young may belong to a "
                "write in progress. Use an older_than at least 24 hours ago."
            )
