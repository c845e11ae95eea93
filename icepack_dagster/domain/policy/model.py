"""What a maintenance policy says: the effective `Policy` of a table, the `PolicyOverrides` one layer
sets, a policy-file `PolicyRule`, and the `EffectivePolicy` with the layer each value came from. Every
value is bounded where it is declared, so a bad one is refused naming the field; the orphan-file age
never goes below Iceberg's 24-hour guard. `policy.py` layers them."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Annotated, Any

from pydantic import AfterValidator, Field, field_validator

from icepack_dagster.domain.actions.maintenance_action import ACTION_ORDER, MaintenanceAction
from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.policy.window import MaintenanceWindow, parse_windows
from icepack_dagster.domain.table.iceberg_properties import IcebergValue
from icepack_dagster.domain.table.key import TableKey

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
Share = Annotated[float, Field(strict=True, gt=0, le=1, allow_inf_nan=False)]
Commits = Annotated[int, Field(strict=True, ge=1, le=1_000_000)]


def _all_actions() -> dict[MaintenanceAction, bool]:
    return {action: True for action in ACTION_ORDER}


class Policy(FrozenModel):
    """The effective maintenance policy of one table. Defaults are the safe built-in layer."""

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
    delete_ratio_threshold: Share = Field(
        default=0.3,
        description="Format v3: compaction rewrites a data file once its deletion vector deletes this "
        "share of its rows (Iceberg's delete-ratio-threshold, whose default is also 0.3)",
    )
    max_files_per_run: FileCount | None = Field(
        default=None,
        description="Compaction rewrites at most this many data files per run (Iceberg's "
        "max-files-to-rewrite, runtime 1.10 or later); the rest waits for the next run",
    )
    clean_expired_metadata: Flag = Field(
        default=False,
        description="Expiry also removes the partition specs and schemas no retained snapshot uses "
        "(Iceberg's clean_expired_metadata, runtime 1.10 or later)",
    )
    # Statistics are kept fresh only where a policy asks (off by default: actions/planners/statistics.py).
    table_stats_commits_behind: Commits | None = Field(
        default=None,
        description="compute_table_stats when the table has no statistics for main, or they are this many "
        "commits behind; None (with table_stats_rows_changed None): never, it reads every row",
    )
    table_stats_rows_changed: Share | None = Field(
        default=None,
        description="compute_table_stats also when commits since the statistics changed this share of rows",
    )
    partition_stats_commits_behind: Commits | None = Field(
        default=None,
        description="compute_partition_stats when a partitioned table has no partition statistics for main, "
        "or they are this many commits behind; None (with partition_stats_rows_changed None): never",
    )
    partition_stats_rows_changed: Share | None = Field(
        default=None,
        description="compute_partition_stats also when commits since changed this share of rows",
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


class PolicyOverrides(FrozenModel):
    """Values one layer sets; None (or an action left out) inherits from the weaker layers."""

    enabled: Flag | None = None
    cadence_hours: CadenceHours | None = None
    target_file_size_bytes: FileSize | None = None
    min_input_files: FileCount | None = None
    snapshot_max_age_hours: Hours | None = None
    snapshot_retain_last: FileCount | None = None
    orphan_older_than_hours: OrphanHours | None = None
    hot_partition_minutes: Hours | None = None
    delete_ratio_threshold: Share | None = None
    max_files_per_run: FileCount | None = None
    clean_expired_metadata: Flag | None = None
    table_stats_commits_behind: Commits | None = None
    table_stats_rows_changed: Share | None = None
    partition_stats_commits_behind: Commits | None = None
    partition_stats_rows_changed: Share | None = None
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


class EffectivePolicy(FrozenModel):
    """The resolved policy and, per field (`actions.<action>` per action), the layer that set it."""

    policy: Policy
    sources: dict[str, str]
    iceberg: tuple[IcebergValue, ...] = Field(
        default=(), description="The table's own Iceberg properties, as Iceberg reads them"
    )
