"""One factory per test model: `TableStatus`, `TableHealth` (and its issues), `Recommendation`, and
settings with a given platform section. Test files build these models here, never with a copy of
their own; each factory gives a plain, valid default that keyword overrides change one fact at a time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.planners.compaction import RewritePrediction
from icepack_dagster.domain.health.model import HealthIssue, HealthState, Severity, TableHealth
from icepack_dagster.domain.recommendation.model import Recommendation, RecommendedAction
from icepack_dagster.domain.table.statistics_freshness import RegisteredStatistics, StatisticsFreshness
from icepack_dagster.domain.table.status import TableStatus

NOW = datetime(2025, 3, 14, 12, 0, tzinfo=UTC)
MiB = 1024**2


def make_status(**overrides: Any) -> TableStatus:
    """A healthy v2 table of ten 400 MiB files and 3 young snapshots; overrides change single facts.
    `live_delete_files` follows the position and equality delete files unless given."""
    fields: dict[str, Any] = dict(
        table="lake.ns.t", collected_at=NOW, location="file:///warehouse/ns/t", format_version=2,
        snapshot_id=1, live_data_files=10, live_position_delete_files=0, live_equality_delete_files=0,
        live_data_bytes=10 * 400 * MiB, live_delete_bytes=0, total_records=1000,
        position_delete_records=0, equality_delete_records=0, target_file_size_bytes=512 * MiB,
        small_file_threshold_bytes=384 * MiB, small_file_count=0, small_file_bytes=0, file_size_histogram=(),
        manifest_count=2, data_manifest_count=2, delete_manifest_count=0, manifest_bytes=20_000,
        partition_count=1, partition_spec_count=1, snapshot_count=3, oldest_snapshot_age_seconds=36_000.0,
        newest_snapshot_age_seconds=600.0, metadata_log_entries=3, branch_count=0, tag_count=0,
    )
    fields.update(overrides)
    deletes = fields["live_position_delete_files"] + fields["live_equality_delete_files"]
    fields.setdefault("live_delete_files", deletes)
    return TableStatus(**fields)


def make_statistics(
    table_behind: int | None = None,
    partition_behind: int | None = None,
    rows_changed: int = 0,
    partitioned: bool = True,
    snapshot_id: int = 1,
) -> StatisticsFreshness:
    """Statistics facts of a table at `snapshot_id`: table and partition statistics `*_behind` commits
    behind main (None: main has none), those commits having changed `rows_changed` rows."""

    def registered(behind: int | None, kind: str) -> RegisteredStatistics | None:
        if behind is None:
            return None
        at = snapshot_id - behind
        changed = rows_changed if behind else 0
        path = f"file:///warehouse/ns/t/metadata/{kind}-{at}.stats"
        return RegisteredStatistics(snapshot_id=at, path=path, commits_behind=behind, rows_changed=changed)

    table, partition = registered(table_behind, "table"), registered(partition_behind, "partition")
    return StatisticsFreshness(
        partitioned=partitioned, table_statistics=table, partition_statistics=partition,
        table_statistics_files=int(table is not None), partition_statistics_files=int(partition is not None),
    )


def make_issue(code: str, severity: Severity, value: float, **overrides: Any) -> HealthIssue:
    """One health issue; metric, threshold and message are placeholders unless given."""
    fields: dict[str, Any] = dict(metric="m", threshold=1.0, message="m") | overrides
    return HealthIssue(code=code, severity=severity, value=value, **fields)


def make_health(
    state: HealthState, *issues: HealthIssue, table: str = "lake.ns.t", error: str | None = None
) -> TableHealth:
    """A table's health in `state` with `issues` (and, for unknown, the `error`)."""
    return TableHealth(table=table, state=state, issues=issues, error=error)


def make_action(
    kind: MaintenanceAction | str,
    *,
    reason: str = "test",
    priority: float = 1.0,
    prediction: RewritePrediction | None = None,
    **options: str,
) -> RecommendedAction:
    """One recommended action with procedure `options` (Iceberg's names, as in `min-input-files`);
    priority 1, a placeholder reason and no prediction unless given."""
    return RecommendedAction(
        action=MaintenanceAction(kind),
        reason=reason,
        priority=priority,
        options=options,
        prediction=prediction,
    )


def make_recommendation(
    *actions: RecommendedAction, table: str = "lake.ns.t", **fields: Any
) -> Recommendation:
    """A recommendation of `actions` for `table`; other fields (skipped, priority, ...) as given."""
    return Recommendation(table=table, actions=actions, **fields)


def settings_with_platform(settings: IcepackSettings, platform: PlatformSettings) -> IcepackSettings:
    """`settings` whose platform section (schedule, sensors, caps) is `platform`."""
    return settings.model_copy(update={"platform": platform})
