"""Maintenance policy: how often, how hard and when each table is maintained, and who decided it
(the models are in `policy_model.py`).

Layers, weakest first: built-in defaults, then policy-file rules whose pattern matches the table (in file
order), then the table's own `icepack.*` properties, so the people who own a table can tune it in the
table itself. Every value is validated where it enters, so a bad value names the table, the field and
why (docs/POLICY.md). The orphan-file age never goes below Iceberg's 24-hour guard, from any layer.

The table's own Iceberg retention (`history.expire.*`, domain/table/iceberg_properties.py) is what Iceberg
itself keeps; icepack keeps less only where the table's owner said so with an `icepack.*` property.
Everywhere else snapshot retention is raised to at least what Iceberg would keep.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from icepack_dagster.domain.actions.maintenance_action import ACTION_ORDER, MaintenanceAction
from icepack_dagster.domain.policy.model import EffectivePolicy, Policy, PolicyOverrides, PolicyRule
from icepack_dagster.domain.policy.property_text import parse_flag, parse_number, parse_whole_number
from icepack_dagster.domain.policy.window import parse_windows
from icepack_dagster.domain.table.file_size_limits import SMALL_FILE_THRESHOLD_PROPERTY
from icepack_dagster.domain.table.iceberg_properties import (
    MAX_SNAPSHOT_AGE_MS,
    MIN_SNAPSHOTS_TO_KEEP,
    iceberg_layer,
    retention_floor,
)
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import InvalidPolicyError

DEFAULT = "default"
_PROPERTY_PREFIX = "icepack."
_IGNORED_PREFIXES = ("icepack.spark.sql.",)  # Spark SQL overrides: domain/sql/spark_overrides.py
_IGNORED_KEYS = frozenset({SMALL_FILE_THRESHOLD_PROPERTY})  # domain/table/file_size_limits.py reads it
_ACTION_PROPERTY = re.compile(r"^icepack\.action\.(?P<action>.+)\.enabled$")
_PROPERTIES: dict[str, tuple[str, Any]] = {
    "icepack.enabled": ("enabled", parse_flag),
    "icepack.cadence-hours": ("cadence_hours", parse_number),
    "icepack.target-file-size-bytes": ("target_file_size_bytes", parse_whole_number),
    "icepack.min-input-files": ("min_input_files", parse_whole_number),
    "icepack.snapshot.max-age-hours": ("snapshot_max_age_hours", parse_number),
    "icepack.snapshot.retain-last": ("snapshot_retain_last", parse_whole_number),
    "icepack.orphan.older-than-hours": ("orphan_older_than_hours", parse_number),
    "icepack.window": ("windows", parse_windows),
    "icepack.quarantine-after-failures": ("quarantine_after_failures", parse_whole_number),
    "icepack.priority-boost": ("priority_boost", parse_number),
    "icepack.compaction.hot-minutes": ("hot_partition_minutes", parse_number),
    "icepack.compaction.delete-ratio-threshold": ("delete_ratio_threshold", parse_number),
    "icepack.snapshot.clean-expired-metadata": ("clean_expired_metadata", parse_flag),
    "icepack.compaction.max-files-per-run": ("max_files_per_run", parse_whole_number),
    "icepack.stats.table.commits-behind": ("table_stats_commits_behind", parse_whole_number),
    "icepack.stats.table.rows-changed": ("table_stats_rows_changed", parse_number),
    "icepack.stats.partition.commits-behind": ("partition_stats_commits_behind", parse_whole_number),
    "icepack.stats.partition.rows-changed": ("partition_stats_rows_changed", parse_number),
}
PROPERTY_NAMES: tuple[str, ...] = (
    *_PROPERTIES, *(f"icepack.action.{action}.enabled" for action in ACTION_ORDER)
)


def _first_error(error: ValidationError) -> str:
    problem = error.errors(include_url=False)[0]
    return str(problem["msg"]).removeprefix("Value error, ")


def _property_overrides(table: str, key: str, raw: str) -> PolicyOverrides | None:
    """One `icepack.*` property as overrides; None for the keys other components own."""
    if key in _IGNORED_KEYS or key.startswith(_IGNORED_PREFIXES):
        return None
    text = raw.strip()
    try:
        if action_match := _ACTION_PROPERTY.match(key):
            name = action_match["action"]
            if name not in {a.value for a in ACTION_ORDER}:
                raise ValueError(f"unknown action {name!r}; actions: {', '.join(ACTION_ORDER)}")
            return PolicyOverrides(actions={MaintenanceAction(name): parse_flag(text)})
        if key not in _PROPERTIES:
            raise ValueError(f"unknown icepack property; known: {', '.join(PROPERTY_NAMES)} (docs/POLICY.md)")
        field, parse = _PROPERTIES[key]
        return PolicyOverrides.model_validate({field: parse(text)})
    except ValidationError as error:
        raise InvalidPolicyError(table, key, raw, _first_error(error)) from None
    except ValueError as error:
        raise InvalidPolicyError(table, key, raw, str(error)) from None


def resolve_policy(
    table: TableKey, properties: dict[str, str], rules: tuple[PolicyRule, ...]
) -> EffectivePolicy:
    """Layer defaults, matching policy-file rules and `icepack.*` table properties into one policy.

    Raises InvalidPolicyError naming the table and the property for any invalid or unknown
    `icepack.*` property; the rules were validated when the policy file was loaded.
    """
    default = Policy()
    values: dict[str, Any] = {name: getattr(default, name) for name in Policy.model_fields}
    actions = dict(default.actions)
    sources = {name: DEFAULT for name in Policy.model_fields if name != "actions"}
    sources.update({f"actions.{action}": DEFAULT for action in ACTION_ORDER})

    def apply(overrides: PolicyOverrides, source: str) -> None:
        for name in PolicyOverrides.model_fields:
            value = getattr(overrides, name)
            if name == "actions":
                actions.update(value)
                sources.update({f"actions.{action}": source for action in value})
            elif value is not None:
                values[name] = value
                sources[name] = source

    for number, rule in enumerate(rules, start=1):
        pattern = rule.matching_pattern(table)
        if pattern is not None:
            apply(rule, f"policy-file rule {number} ({pattern})")
    for key in sorted(k for k in properties if k.startswith(_PROPERTY_PREFIX)):
        overrides = _property_overrides(table.text, key, properties[key])
        if overrides is not None:
            apply(overrides, f"table property {key}")

    _honour_iceberg_retention(properties, values, sources)
    values["actions"] = actions
    action_sources = {sources[f"actions.{a}"] for a in ACTION_ORDER}
    mixed = "per action, see actions.<action>"
    sources["actions"] = action_sources.pop() if len(action_sources) == 1 else mixed
    return EffectivePolicy(
        policy=Policy.model_validate(values), sources=sources, iceberg=iceberg_layer(properties)
    )


_FLOOR = "Iceberg's own expiry keeps that much; an icepack.* property may keep less"


def _owner_set(source: str) -> bool:
    return source.startswith(f"table property {_PROPERTY_PREFIX}")


def _honour_iceberg_retention(
    properties: dict[str, str], values: dict[str, Any], sources: dict[str, str]
) -> None:
    """Raise snapshot retention to the table's `history.expire.*` unless an `icepack.*` property of the
    table set it: Iceberg alone would keep that much, and only the owner may decide to keep less."""
    keep, hours = retention_floor(properties)
    if keep is not None and not _owner_set(sources["snapshot_retain_last"]):
        if keep > values["snapshot_retain_last"]:
            values["snapshot_retain_last"] = keep
            sources["snapshot_retain_last"] = f"table property {MIN_SNAPSHOTS_TO_KEEP} ({_FLOOR})"
    if hours is not None and not _owner_set(sources["snapshot_max_age_hours"]):
        if hours > values["snapshot_max_age_hours"]:
            values["snapshot_max_age_hours"] = hours
            sources["snapshot_max_age_hours"] = f"table property {MAX_SNAPSHOT_AGE_MS} ({_FLOOR})"


def _display(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def explain_policy(effective: EffectivePolicy) -> list[tuple[str, str, str]]:
    """(field, value, source) rows in field order, one row per action, for `icepack policy --explain`."""
    policy, sources = effective.policy, effective.sources
    rows: list[tuple[str, str, str]] = []
    for name in Policy.model_fields:
        value = getattr(policy, name)
        if name == "actions":
            rows += [
                (f"actions.{a}", _display(policy.action_enabled(a)), sources.get(f"actions.{a}", DEFAULT))
                for a in ACTION_ORDER
            ]
            continue
        if name == "target_file_size_bytes" and value is None:
            shown = "table default (write.target-file-size-bytes, else 536870912)"
        elif name == "windows":
            shown = "; ".join(w.text for w in value) if value else "any time"
        else:
            shown = _display(value)
        rows.append((name, shown, sources.get(name, DEFAULT)))
    return rows


def in_window(policy: Policy, now: datetime) -> bool:
    """Whether maintenance may start at `now` (UTC; a naive datetime is taken as UTC)."""
    if not policy.windows:
        return True
    moment = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    return any(window.contains(moment) for window in policy.windows)
