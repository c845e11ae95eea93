"""Table status: the raw facts about one table, measured from its Iceberg metadata alone (no Spark).

Current-snapshot metrics describe what a query reads now; retention metrics (snapshots, metadata log)
describe history kept across all retained snapshots. The JSON field names are a public contract
(`icepack status --json`, Dagster metadata): keep them.

A `full` status read every manifest of its snapshot. A `summary` status (docs/STATUS.md, "Status from
snapshot summaries") took its file and record totals from the snapshot summaries and its manifest counts
from the manifest list, exactly, and carried what only manifest entries tell (small files, the size
histogram, partitions, the layout) from the snapshot `manifests_read_at`, with the bounds in `carried`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, model_validator

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.table.partition_layout import PartitionLayout
from icepack_dagster.domain.table.snapshot_graph import SnapshotGraph
from icepack_dagster.domain.table.statistics_freshness import StatisticsFreshness


class FileSizeBucket(FrozenModel):
    """Live data files whose size is in [lower_bytes, upper_bytes); upper None means unbounded."""

    label: str
    lower_bytes: int = Field(ge=0)
    upper_bytes: int | None = Field(default=None, ge=0)
    file_count: int = Field(ge=0)


class CarriedBounds(FrozenModel):
    """What a summary status knows of the fields only manifest entries give: each carried value was
    exact at `manifests_read_at`; only appends came since, so the true value now is within (low, high)."""

    data_files_added: int = Field(ge=0, description="Data files appended since, whose sizes were not read")
    small_files: tuple[int, int] = Field(description="Small data files now: at least, at most")
    small_bytes: tuple[int, int] = Field(description="Their bytes now: at least, at most")
    partitions: tuple[int, int] = Field(description="Partitions holding data now: at least, at most")

    @model_validator(mode="after")
    def _ordered(self) -> CarriedBounds:
        for name in ("small_files", "small_bytes", "partitions"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise ValueError(f"carried bounds {name}: need 0 <= low <= high, got ({low}, {high})")
        return self


class TableStatus(FrozenModel):
    """Everything health, policy and recommendation need to know about a table, from metadata."""

    depth: Literal["full", "summary"] = Field(
        default="full",
        description="full: every manifest entry of the snapshot read; summary: totals from the snapshot "
        "summaries, manifest counts from the manifest list, the rest carried (see `carried`)",
    )
    manifests_read_at: int | None = Field(
        default=None,
        description="The snapshot whose manifest entries the small files, histogram, partitions and "
        "layout were read at; None means `snapshot_id` (every full status)",
    )
    carried: CarriedBounds | None = Field(
        default=None, description="Bounds of the carried fields now; set exactly when depth is summary"
    )
    table: str = Field(description="Table key text: catalog.namespace.table")
    collected_at: datetime
    metadata_location: str | None = Field(
        default=None, description="The metadata file measured; same file, same facts (only ages move)"
    )
    catalog_etag: str | None = Field(
        default=None, description="The REST catalog's ETag for the metadata measured (a load sent it back "
        "as If-None-Match is answered 304 while the table is the same); None for other catalogs",
    )
    table_uuid: str | None = Field(
        default=None, description="The table's UUID in its metadata: a table dropped and created again under "
        "its name has a new one (None in a status recorded before icepack read it)",
    )
    location: str
    format_version: int = Field(ge=1, le=3)
    snapshot_id: int | None = Field(description="Current snapshot of main; None for a table with no snapshot")
    # current snapshot
    live_data_files: int = Field(ge=0)
    live_position_delete_files: int = Field(ge=0, description="Content 1 entries: deletion vectors included")
    live_deletion_vectors: int = Field(
        default=0, ge=0, description="Deletion vectors (format v3, Puffin) among the position delete files"
    )
    live_equality_delete_files: int = Field(ge=0)
    live_delete_files: int = Field(ge=0)
    live_data_bytes: int = Field(ge=0)
    live_delete_bytes: int = Field(ge=0)
    total_records: int = Field(ge=0, description="Records in live data files (before deletes apply)")
    position_delete_records: int = Field(ge=0)
    deletion_vector_records: int = Field(
        default=0, ge=0, description="Rows the deletion vectors delete (their cardinalities, from manifests)"
    )
    equality_delete_records: int = Field(ge=0)
    target_file_size_bytes: int = Field(gt=0)
    small_file_threshold_bytes: int = Field(gt=0)
    small_file_count: int = Field(ge=0)
    small_file_bytes: int = Field(ge=0)
    file_size_histogram: tuple[FileSizeBucket, ...]
    manifest_count: int = Field(ge=0)
    data_manifest_count: int = Field(ge=0)
    delete_manifest_count: int = Field(ge=0)
    manifest_bytes: int = Field(ge=0)
    partition_count: int = Field(ge=0)
    partition_spec_count: int = Field(ge=1)
    # retention / history
    snapshot_count: int = Field(ge=0)
    oldest_snapshot_age_seconds: float | None = Field(ge=0)
    newest_snapshot_age_seconds: float | None = Field(ge=0)
    snapshot_span_ms: tuple[int, int] | None = Field(
        default=None, description="Commit times (epoch ms) of the oldest and newest snapshot: ages at any now"
    )
    metadata_log_entries: int = Field(ge=0)
    branch_count: int = Field(ge=0, description="Branches besides main")
    tag_count: int = Field(ge=0)
    properties: dict[str, str] = Field(
        default_factory=dict, description="Table properties (policy reads them)"
    )
    layout: PartitionLayout | None = Field(
        default=None, description="Partitions with rewrite candidates (the compaction planner reads them)"
    )
    snapshot_graph: SnapshotGraph | None = Field(
        default=None, description="Snapshots (id, parent, commit ms) and refs: what expiry would remove"
    )
    statistics: StatisticsFreshness | None = Field(
        default=None, description="Which snapshot the table and partition statistics were computed for"
    )
    schema_types: dict[str, str] = Field(
        default_factory=dict,
        description="Each primitive type in the current schema (`timestamp_ns`, `decimal`...), with the "
        "first column holding it, nested fields included: the runtime gate refuses a Spark that cannot "
        "read one (`domain/actions/readable_types.py`)",
    )

    @model_validator(mode="after")
    def _provenance(self) -> TableStatus:
        provenance = self.carried is not None, self.manifests_read_at is not None
        if provenance != ((True, True) if self.depth == "summary" else (False, False)):
            raise ValueError(
                f"table {self.table}: a summary status needs carried bounds and manifests_read_at, "
                "a full status neither"
            )
        return self

    @property
    def entries_read_at(self) -> int | None:
        """The snapshot the manifest-entry fields (small files, histogram, partitions, layout) describe."""
        return self.manifests_read_at if self.manifests_read_at is not None else self.snapshot_id

    @property
    def small_files_known(self) -> str:
        """The small-file count as exactly as the status knows it, for a sentence: `12`, or for a summary
        status its bounds now, `12-15`."""
        if self.carried is None:
            return str(self.small_file_count)
        low, high = self.carried.small_files
        return f"{low}-{high}"

    @property
    def small_file_ratio(self) -> float:
        return self.small_file_count / self.live_data_files if self.live_data_files else 0.0

    @property
    def delete_file_ratio(self) -> float:
        if not self.live_delete_files:
            return 0.0
        return self.live_delete_files / max(self.live_data_files, 1)

    @property
    def leftover_position_delete_files(self) -> int:
        """Position delete files that are not deletion vectors (Parquet, Avro, ORC): on a v3 table,
        what an upgrade from v2 left, which a rewrite turns into deletion vectors."""
        return self.live_position_delete_files - self.live_deletion_vectors

    @property
    def deleted_row_share(self) -> float:
        """The share of live data rows the deletion vectors delete: the delete debt of a v3 table."""
        return self.deletion_vector_records / self.total_records if self.total_records else 0.0

    @property
    def average_data_file_bytes(self) -> float:
        return self.live_data_bytes / self.live_data_files if self.live_data_files else 0.0


def snapshot_ages(span: tuple[int, int] | None, now: datetime) -> tuple[float | None, float | None]:
    """Ages in seconds at `now` of the oldest and newest snapshot of `span` (never negative)."""
    if span is None:
        return None, None
    now_ms = now.timestamp() * 1000
    return max(0.0, (now_ms - span[0]) / 1000), max(0.0, (now_ms - span[1]) / 1000)
