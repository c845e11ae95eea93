"""The codec of Dagster materializations: the metadata keys, their encoding for people (numbers the UI
plots, sizes and summaries to read, sortable tables) and the machine record each materialization
carries (`*_json`, versioned, listed after what a person reads), which the health asset, the
maintenance sensor and the fleet summary decode back; and the health asset check's result.

One module per materialized asset (status, health, recommendation, maintenance, fleet) over the shared
records; encoders return plain dicts of `dg.MetadataValue`, decoders take the metadata of an event and
return the domain model, or None when the record is absent or from another codec version. Importers use
this package, whichever module a name lives in.
"""

from icepack_dagster.defs.materialization_codec.fleet import (
    ATTENTION_PAGES,
    NEEDS_ATTENTION,
    decode_fleet,
    fleet_metadata,
    partition_page,
)
from icepack_dagster.defs.materialization_codec.health import (
    HEALTH_CHECK,
    HEALTH_CHECK_DESCRIPTION,
    decode_health,
    health_check_description,
    health_check_evaluation,
    health_check_severity,
    health_markdown,
    health_metadata,
    judged_materialization,
)
from icepack_dagster.defs.materialization_codec.maintenance import (
    decode_reclaimed,
    decode_report,
    maintenance_markdown,
    maintenance_metadata,
    sql_markdown,
)
from icepack_dagster.defs.materialization_codec.operator_need import (
    NEEDS_OPERATOR_CHECK,
    NEEDS_OPERATOR_CHECK_DESCRIPTION,
    decode_operator_verdict,
    operator_check_evaluation,
    operator_verdict_metadata,
    verdict_of,
)
from icepack_dagster.defs.materialization_codec.recommendation import (
    decode_recommendation,
    recommendation_markdown,
    recommendation_metadata,
)
from icepack_dagster.defs.materialization_codec.records import (
    BYTES_RECLAIMED,
    CODEC_VERSION,
    FILES_RECLAIMED,
    FLEET_JSON,
    HEALTH_JSON,
    OUTCOME,
    RECOMMENDATION_JSON,
    REPORT_JSON,
    SQL,
    STATE,
    STATE_RANK,
    STATUS_ERROR,
    STATUS_JSON,
    SUMMARY,
    VERSION,
    Metadata,
)
from icepack_dagster.defs.materialization_codec.status import (
    decode_status,
    decode_status_error,
    status_failure_metadata,
    status_metadata,
)

__all__ = [
    "ATTENTION_PAGES", "BYTES_RECLAIMED", "CODEC_VERSION", "FILES_RECLAIMED", "FLEET_JSON", "HEALTH_CHECK",
    "HEALTH_CHECK_DESCRIPTION", "HEALTH_JSON", "Metadata", "NEEDS_ATTENTION", "NEEDS_OPERATOR_CHECK",
    "NEEDS_OPERATOR_CHECK_DESCRIPTION", "OUTCOME", "RECOMMENDATION_JSON", "REPORT_JSON", "SQL", "STATE",
    "STATE_RANK", "STATUS_ERROR", "STATUS_JSON", "SUMMARY", "VERSION",
    "decode_fleet", "decode_health", "decode_operator_verdict", "decode_reclaimed", "decode_recommendation",
    "decode_report", "decode_status", "decode_status_error", "fleet_metadata", "health_check_description",
    "health_check_evaluation", "health_check_severity", "health_markdown", "health_metadata",
    "judged_materialization", "maintenance_markdown", "maintenance_metadata", "operator_check_evaluation",
    "operator_verdict_metadata", "partition_page", "recommendation_markdown", "recommendation_metadata",
    "sql_markdown", "status_failure_metadata", "status_metadata", "verdict_of",
]
