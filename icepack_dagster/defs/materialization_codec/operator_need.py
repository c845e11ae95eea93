"""The `needs_operator` check of `table_health`: its result per table (failed, with the reason, what to
do and the evidence, for a table a person must act on) and the verdict each `table_health`
materialization shows. A scheduled sync tells when the verdict changed (a quarantine released, a streak
begun) from the verdict recorded in the table's facts (store/table_facts.py), and writes the table
again."""

from __future__ import annotations

import dagster as dg

from icepack_dagster.defs.materialization_codec.health import judged_materialization
from icepack_dagster.defs.materialization_codec.records import Metadata
from icepack_dagster.domain.health.needs_operator import OperatorNeed

NEEDS_OPERATOR_CHECK = "needs_operator"
NEEDS_OPERATOR_CHECK_DESCRIPTION = (
    "Fails for exactly the tables a person must act on: quarantined, maintenance failing repeatedly, "
    "metadata unreadable. The reason, what to do and the evidence are in its metadata. One result per "
    "table, written with each table_health materialization."
)
# The verdict as each table_health materialization records it: the reason, or "no".
OPERATOR_VERDICT = "needs_operator"
_NO = "no"


def operator_verdict_metadata(need: OperatorNeed | None) -> Metadata:
    return {OPERATOR_VERDICT: dg.MetadataValue.text(need.reason if need is not None else _NO)}


def verdict_of(need: OperatorNeed | None) -> str:
    return need.reason if need is not None else _NO


def operator_check_evaluation(
    health_key: dg.AssetKey, partition: str, need: OperatorNeed | None, materialization: dg.EventLogRecord
) -> dg.AssetCheckEvaluation:
    """The `needs_operator` check of one table, judging its `table_health` `materialization`."""
    if need is None:
        metadata: Metadata = {"reason": dg.MetadataValue.text(_NO)}
        description = "icepack handles this table on its own"
    else:
        metadata = {
            "reason": dg.MetadataValue.text(need.reason),
            "what_to_do": dg.MetadataValue.md(f"**{need.reason}**: {need.summary}"),
            "evidence": dg.MetadataValue.json(need.evidence),
        }
        description = f"{need.reason}: {need.summary}"
    return dg.AssetCheckEvaluation(
        asset_key=health_key,
        check_name=NEEDS_OPERATOR_CHECK,
        passed=need is None,
        severity=dg.AssetCheckSeverity.ERROR,
        description=description,
        metadata=metadata,
        partition=partition,
        target_materialization_data=judged_materialization(materialization),
    )
