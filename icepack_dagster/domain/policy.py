"""Maintenance policy: how often, how hard and when each table is maintained, and who decided it.

Layers, weakest first: built-in defaults, then policy-file rules whose pattern matches the table (in file
order), then the table's own `icepack.*` properties, so the people who own a table can tune it in the
table itself. Every value is validated where it enters, so a bad value names the table, the field and
why (docs/POLICY.md). The orphan-file age never goes below Iceberg's 24-hour guard, from any layer.

The table's own Iceberg retention (`history.expire.*`, domain/iceberg_properties.py) is what Iceberg
itself keeps; icepack keeps less only where the table's owner said so with an `icepack.*` property.
Everywhere else snapshot retention is raised to at least what Iceberg would keep.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from icepack_dagster.domain.actions import ACTION_ORDER, MaintenanceAction
from icepack_dagster.domain.iceberg_properties import (
    MAX_SNAPSHOT_AGE_MS,
    MIN_SNAPSHOTS_TO_KEEP,
    IcebergValue,
    iceberg_layer,
    retention_floor,
)
from icepack_dagster.domain.property_text import parse_flag, parse_number, parse_whole_number
from icepack_dagster.domain.table_key import TableKey
from icepack_dagster.domain.window import MaintenanceWindow, parse_windows
from icepack_dagster.exceptions import InvalidPolicyError

ORPHAN_MIN_HOURS = 24.0
_MAX_HOURS = 10 * 366 * 24  # ten years: anything longer is a typo


def _orphan_floor(hours: float) -> float:
    if hours < ORPHAN_MIN_HOURS:
        raise ValueError(
            f"must be at least {ORPHAN_MIN_HOURS:g} hours: Iceberg refuses to remove younger orphan files, "
            "which may belong to writes still in flight"
        )
    return hours


Hours = Annotated[float, Field(strict=True, ge=0, le=_MAX_HOURS, allow_inf_nan=False)]
CadenceHours = Annotated[float, Field(strict=True, ge=0, le=366 * 24, allow_inf_nan=False)]
OrphanHours = Annotated[
    float, Field(strict=True, le=_MAX_HOURS, allow_inf_nan=False), AfterValidator(_orphan_floor)
]
FileSize = Annotated[int, Field(strict=True, ge=1024, le=64 * 1024**3)]
FileCount = Annotated[int, Field(strict=True, ge=1, le=100_000)]
# What the Iceberg layer may raise retention to: any Java int count, any Java long age in milliseconds.
RetainCount = Annotated[int, Field(strict=True, ge=1, le=2**31 - 1)]
RetentionHours = Annotated[float, Field(strict=True, ge=0, le=2**63 / 3_600_000, allow_inf_nan=False)]
Failures = Annotated[int, Field(strict=True, ge=1, le=1000)]
Boost = Annotated[float, Field(strict=True, ge=0, le=1000, allow_inf_nan=False)]
Flag = Annotated[bool, Field(strict=True)]


__all__ = ["MaintenanceWindow", "parse_windows"]


def _all_actions() -> dict[MaintenanceAction, bool]:
    return {action: True for action in ACTION_ORDER}


class Policy(BaseModel):
    """The effective maintenance policy of one table. Defaults are the safe built-in layer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: Flag = True
    cadence_hours: CadenceHours = Field(default=24.0, description="Least time between two runs of one action")
    target_file_size_bytes: FileSize | None = Field(
        default=None, description="None: the table's write.target-file-size-bytes, else 512 MiB"
    )
    min_input_files: FileCount = Field(default=5, description="Rewrite only file groups of this many files")
    snapshot_max_age_hours: RetentionHours = Field(default=120.0, description="Expire older snapshots")
    snapshot_retain_last: RetainCount = Field(default=5, description="Always keep this many newest snapshots")
    orphan_older_than_hours: OrphanHours = Field(default=72.0, description="Only older unreferenced files go")
    hot_partition_minutes: Hours = Field(
        default=60.0, description="Compaction leaves out partitions written within this many minutes"
    )
    actions: dict[MaintenanceAction, Flag] = Field(default_factory=_all_actions)
    quarantine_after_failures: Failures = 3
    windows: tuple[MaintenanceWindow, ...] = Field(default=(), description="Empty: any time (UTC)")
    priority_boost: Boost = 1.0

    @field_validator("actions")
    @classmethod
    def _complete_actions(cls, value: dict[MaintenanceAction, bool]) -> dict[MaintenanceAction, bool]:
        return {action: value.get(action, True) for action in ACTION_ORDER}

    def action_enabled(self, action: MaintenanceAction) -> bool:
        return self.actions.get(action, True)


class PolicyOverrides(BaseModel):
    """Values one layer sets; None (or an action left out) inherits from the weaker layers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: Flag | None = None
    cadence_hours: CadenceHours | None = None
    target_file_size_bytes: FileSize | None = None
    min_input_files: FileCount | None = None
    snapshot_max_age_hours: Hours | None = None
    snapshot_retain_last: FileCount | None = None
    orphan_older_than_hours: OrphanHours | None = None
    hot_partition_minutes: Hours | None = None
    actions: dict[MaintenanceAction, Flag] = Field(default_factory=dict)
    quarantine_after_failures: Failures | None = None
    windows: tuple[MaintenanceWindow, ...] | None = None
    priority_boost: Boost | None = None

    @field_validator("windows", mode="before")
    @classmethod
    def _window_text(cls, value: Any) -> Any:
        return parse_windows(value) if isinstance(value, str) else value


class PolicyRule(PolicyOverrides):
    """One policy-file rule: fnmatch pattern(s) on `catalog.ns.table` or `ns.table`, and its values."""

    match: Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1)]

    @field_validator("match", mode="before")
    @classmethod
    def _one_pattern(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    def matching_pattern(self, table: TableKey) -> str | None:
        """The first pattern that matches the table, if any (case-sensitive, like table names)."""
        names = (f"{table.catalog}.{table.dotted}", table.dotted)
        return next((p for p in self.match if any(fnmatchcase(n, p) for n in names)), None)


class EffectivePolicy(BaseModel):
    """The resolved policy and, per field (`actions.<action>` per action), the layer that set it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: Policy
    sources: dict[str, str]
    iceberg: tuple[IcebergValue, ...] = Field(
        default=(), description="The table's own Iceberg properties, as Iceberg reads them"
    )


DEFAULT = "default"
_PROPERTY_PREFIX = "icepack."
_IGNORED_PREFIXES = ("icepack.spark.sql.",)  # Spark SQL overrides: domain/spark_overrides.py
_IGNORED_KEYS = frozenset({"icepack.small-file-threshold-bytes"})  # read by the status reader
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
