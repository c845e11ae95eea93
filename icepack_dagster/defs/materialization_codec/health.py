"""`table_health` metadata and its asset check: the state as text and as a number to plot, each issue
in a table, a summary to read, and the health record the maintenance sensor reads back; the check
result that makes an unhealthy table a failed check of its partition."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

# Dagster's partitioned check status counts an evaluation only when it names the materialization it
# judged; the public AssetCheckResult fills that in for one-partition asset steps only, and a health
# sync writes many partitions from one op.
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

from icepack_dagster.defs.materialization_codec.records import (
    HEALTH_JSON,
    STATE,
    STATE_RANK,
    SUMMARY,
    Metadata,
    decode_model,
    record,
    table,
)
from icepack_dagster.domain.health.model import HealthState, TableHealth

HEALTH_CHECK = "healthy"
HEALTH_CHECK_DESCRIPTION = (
    "Passes when the table is healthy; fails with severity WARN when its health is warning, ERROR when "
    "critical or unknown (status could not be measured). One result per table, written with each "
    "table_health materialization."
)
_SEVERITY = {
    HealthState.HEALTHY: dg.AssetCheckSeverity.WARN,
    HealthState.WARNING: dg.AssetCheckSeverity.WARN,
    HealthState.CRITICAL: dg.AssetCheckSeverity.ERROR,
    HealthState.UNKNOWN: dg.AssetCheckSeverity.ERROR,
}


def health_markdown(health: TableHealth) -> str:
    if health.state is HealthState.UNKNOWN:
        return f"**unknown**: status could not be measured.\n\n`{health.error}`"
    if not health.issues:
        return "**healthy**: no issue."
    lines = [f"**{health.state.value}**: {len(health.issues)} issue(s)", ""]
    lines += [f"- `{i.code}` ({i.severity.value}): {i.message}" for i in health.issues]
    return "\n".join(lines)


def health_metadata(health: TableHealth) -> Metadata:
    issues = [
        {
            "code": i.code,
            "severity": i.severity.value,
            "metric": i.metric,
            "value": float(i.value),
            "threshold": float(i.threshold),
            "message": i.message,
        }
        for i in health.issues
    ]
    columns = [("code", "string"), ("severity", "string"), ("metric", "string"), ("value", "float"),
               ("threshold", "float"), ("message", "string")]
    metadata: Metadata = {
        SUMMARY: dg.MetadataValue.md(health_markdown(health)),
        STATE: dg.MetadataValue.text(health.state.value),
        STATE_RANK: dg.MetadataValue.int(health.state.plot_value),
        "issue_count": dg.MetadataValue.int(len(health.issues)),
        "issues": table(columns, issues),
    }
    if health.error:
        metadata["error"] = dg.MetadataValue.text(health.error)
    return metadata | record(HEALTH_JSON, health.model_dump(mode="json"))


def decode_health(metadata: Mapping[str, Any]) -> TableHealth | None:
    return decode_model(metadata, HEALTH_JSON, TableHealth)


def health_check_severity(state: HealthState) -> dg.AssetCheckSeverity:
    """WARN for a warning, ERROR for critical and for unknown (a table nobody can vouch for)."""
    return _SEVERITY[state]


def health_check_description(health: TableHealth) -> str:
    """The line the check tab shows: the state and each issue's sentence (or why it is unknown)."""
    if health.state is HealthState.UNKNOWN:
        return f"unknown: {health.error}"
    if not health.issues:
        return "healthy: no issue"
    return f"{health.state.value}: " + "; ".join(f"{i.code}: {i.message}" for i in health.issues)


def health_check_evaluation(
    health_key: dg.AssetKey,
    partition: str, health: TableHealth, materialization: dg.EventLogRecord
) -> dg.AssetCheckEvaluation:
    """The `healthy` check of one table, judging its `table_health` `materialization`."""
    return dg.AssetCheckEvaluation(
        asset_key=health_key,
        check_name=HEALTH_CHECK,
        passed=health.state is HealthState.HEALTHY,
        severity=health_check_severity(health.state),
        description=health_check_description(health),
        metadata={
            STATE: dg.MetadataValue.text(health.state.value),
            "issues": dg.MetadataValue.text(", ".join(i.code for i in health.issues) or "none"),
        },
        partition=partition,
        target_materialization_data=judged_materialization(materialization),
    )


def judged_materialization(
    materialization: dg.EventLogRecord,
) -> AssetCheckEvaluationTargetMaterializationData:
    """What an `AssetCheckEvaluation` names as the materialization it judged (any asset's)."""
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=materialization.storage_id,
        run_id=materialization.run_id,
        timestamp=materialization.timestamp,
    )
