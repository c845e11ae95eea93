"""Rendering of Iceberg's Spark procedure calls, one `CALL` per maintenance action.

Nothing a table name or an option carries can change what a statement does: the table goes into the
procedure's `table` argument as backtick-quoted parts (Iceberg parses it with Spark's multipart
identifier parser) inside an escaped SQL string literal, qualified with the catalog so a namespace
that happens to share a catalog's name is still addressed exactly. Options are checked against each
action's allowlist and re-printed from their type (`actions/procedure_options.py`), and rendered where
the action's module says each goes. `guard_action` refuses what must never run: deleting files of a
gc.enabled=false table, an action Iceberg would fail for an unreadable property, and what the action's
own guard refuses (expiry below Iceberg's own retention, orphan removal of files younger than 24 hours).

Spark substitutes `${...}` in SQL text, also inside the parsed `table` string; the statements are exact
only in a session that ran `SESSION_SETUP` first (the runner does).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.procedure_options import validate_options
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.sql.literals import quote_identifier, sql_string
from icepack_dagster.domain.table.iceberg_properties import GC_ENABLED, gc_enabled, unreadable_for
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import InvalidTableIdentifierError, UnsafeMaintenanceError

SESSION_SETUP: tuple[str, ...] = ("SET spark.sql.variable.substitute=false",)
_CATALOG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def table_probe(catalog: str, key: TableKey) -> str:
    """A read-only command that fails with TABLE_OR_VIEW_NOT_FOUND unless the table exists and answers
    its format version as the session's Iceberg reads it (one round trip, no Spark job)."""
    return f"SHOW TBLPROPERTIES {qualified_table(catalog, key)} ('format-version')"


def render_call(catalog: str, key: TableKey, action: MaintenanceAction, options: Mapping[str, str]) -> str:
    """The `CALL <catalog>.system.<action>(...)` statement for one action on one table."""
    clean = validate_options(key, action, options)
    table_argument = sql_string(quote_identifier(spark_catalog_name(catalog), *key.identifier))
    arguments = [f"table => {table_argument}"]
    accepted = definition(action).options
    for name, option in accepted.items():
        if name not in clean or option.rendering == "map":
            continue
        if option.rendering == "timestamp":
            arguments.append(f"{name} => TIMESTAMP {sql_string(clean[name])}")
        elif option.rendering == "string":
            arguments.append(f"{name} => {sql_string(clean[name])}")
        else:
            arguments.append(f"{name} => {clean[name]}")
    entries = [(name, value) for name, value in sorted(clean.items()) if accepted[name].rendering == "map"]
    if entries:
        pairs = ", ".join(f"{sql_string(name)}, {sql_string(value)}" for name, value in entries)
        arguments.append(f"options => map({pairs})")
    return f"CALL {catalog}.system.{action.value}({', '.join(arguments)})"


def guard_action(
    key: TableKey,
    action: MaintenanceAction,
    options: Mapping[str, str],
    properties: Mapping[str, str],
    now: datetime,
) -> None:
    """Refuse what must never run: destructive actions on a table whose gc.enabled Iceberg reads as false,
    an action Iceberg would fail for an unreadable table property, and whatever the action's own guard
    refuses (its module: an expiry keeping less than the table's own history.expire.*, orphan removal
    that would consider files younger than 24 hours)."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    spec = definition(action)
    if spec.destructive and not gc_enabled(properties):
        raise UnsafeMaintenanceError(
            f"table {key.text}: {action} refused: the table sets gc.enabled={properties[GC_ENABLED]!r}, "
            "which Iceberg reads as false, so maintenance must never delete its files"
        )
    if (unreadable := unreadable_for(action, spec.reads_properties, properties)) is not None:
        raise UnsafeMaintenanceError(f"table {key.text}: {action} refused: {unreadable}")
    if spec.guard is not None:
        spec.guard(key, options, properties, now)
