"""`healthy_after_maintenance`, the partitioned check of `maintained_table`: one result per table per
maintenance, judging the health measured after it. A one-table run returns it with its materialization;
a batch run logs it as an evaluation per table, built from the same result, so both launch paths
judge alike (WARN while the table is still unhealthy, or when nothing ran)."""

from __future__ import annotations

import dagster as dg

from icepack_dagster.defs.materialization_codec import judged_materialization
from icepack_dagster.domain.health.model import HealthState, TableHealth

HEALTH_AFTER_CHECK = "healthy_after_maintenance"


def health_after_check(health_after: TableHealth) -> dg.AssetCheckResult:
    """The check for one table: WARN while the table is still unhealthy."""
    healthy = health_after.state is HealthState.HEALTHY
    return dg.AssetCheckResult(
        check_name=HEALTH_AFTER_CHECK,
        passed=healthy,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"state": dg.MetadataValue.text(health_after.state.value)},
        description=None if healthy else f"still {health_after.state.value}: "
        + "; ".join(issue.message for issue in health_after.issues),
    )


def nothing_ran_check(outcome: str, reason: str) -> dg.AssetCheckResult:
    """The check for a maintenance that ran nothing (or failed): never passed, since nobody measured
    a table made healthy; the outcome is its state and the reason its description."""
    return dg.AssetCheckResult(
        check_name=HEALTH_AFTER_CHECK,
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"state": dg.MetadataValue.text(outcome)},
        description=reason,
    )


def as_evaluation(
    maintained_key: dg.AssetKey,
    result: dg.AssetCheckResult, partition: str, materialization: dg.EventLogRecord | None
) -> dg.AssetCheckEvaluation:
    """`result` as an evaluation of `partition`'s check, judging its `maintained_table`
    `materialization` (what a run maintaining several tables from one op logs)."""
    return dg.AssetCheckEvaluation(
        asset_key=maintained_key,
        check_name=result.check_name or HEALTH_AFTER_CHECK,
        passed=result.passed,
        severity=result.severity,
        description=result.description,
        metadata=result.metadata,
        partition=partition,
        target_materialization_data=(
            None if materialization is None else judged_materialization(materialization)
        ),
    )
