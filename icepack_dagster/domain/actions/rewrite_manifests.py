"""`rewrite_manifests`: fewer, larger manifests, so query planning reads less. Recommended when the
table holds at least `MANIFEST_MIN_COUNT` manifests and twice as many as its bytes need at
`commit.manifest.target-size-bytes` (or health flags too many manifests and there are more than needed).
"""

from __future__ import annotations

from math import ceil

from icepack_dagster.domain.actions.definition import (
    ActionDefinition,
    ActionEstimate,
    Gain,
    PlanningContext,
    ProcedureOption,
    whole_table_estimate,
)
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.option_values import boolean, int_between
from icepack_dagster.domain.health.judging import TOO_MANY_MANIFESTS, format_bytes
from icepack_dagster.domain.outcomes.commit_invariants import MANIFEST_RULES
from icepack_dagster.domain.table.iceberg_properties import MANIFEST_TARGET_SIZE_BYTES, iceberg_value

MANIFEST_MIN_COUNT = 10
OPTIONS = {
    "use_caching": ProcedureOption(boolean),
    "spec_id": ProcedureOption(int_between(0, 100_000)),
}


def plan(context: PlanningContext) -> ActionEstimate | str:
    """The manifests' bytes over the target size is the ideal count; after a data rewrite in the same
    recommendation the manifests it leaves are unknown, so there is no prediction."""
    s = context.status
    target = iceberg_value(s.properties, MANIFEST_TARGET_SIZE_BYTES).value
    ideal = max(1, ceil(s.manifest_bytes / max(1, int(target))))
    many = s.manifest_count >= max(MANIFEST_MIN_COUNT, 2 * ideal)
    if not many and not (TOO_MANY_MANIFESTS in context.issues and s.manifest_count > ideal):
        return f"{s.manifest_count} manifests ({format_bytes(s.manifest_bytes)}), about {ideal} ideally"
    return ActionEstimate(
        f"{s.manifest_count} manifests ({format_bytes(s.manifest_bytes)}) would fit in about {ideal} "
        f"of {format_bytes(int(target))}; fewer manifests make query planning cheaper",
        {},
        Gain(files_removed=s.manifest_count - ideal, bytes_to_rewrite=s.manifest_bytes),
        None
        if context.data_files_rewritten
        else whole_table_estimate(s.manifest_count, ideal, s.manifest_bytes),
    )


DEFINITION: ActionDefinition = ActionDefinition(
    action=MaintenanceAction.REWRITE_MANIFESTS,
    plan=plan,
    options=OPTIONS,
    output_fields=("rewritten_manifests_count", "added_manifests_count", None),
    commit_rules=MANIFEST_RULES,
)
