"""A table's partition layout as compaction planning sees it, measured from the manifests status reads.

Only partitions holding a file a bin-pack rewrite would pick (a data file below the small-file threshold
or above the large-file threshold, or a delete file) are listed: a table of well-sized files lists none,
so the status stays small. Partition values are as the manifests store them (dates as days since
1970-01-01, timestamps and hours as counts since the epoch, bytes as a ("bytes", hex) pair).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from icepack_dagster.domain.frozen_model import FrozenModel


class PartitionField(FrozenModel):
    """One field of a partition spec: its transform of a source column."""

    name: str
    transform: str = Field(description="Iceberg's text form: identity, day, month, bucket[16], ...")
    source_column: str | None = Field(description="Dotted column name; None when no schema has it any more")
    source_type: str | None = Field(description="Iceberg type of the source column, e.g. timestamptz, date")


class PartitionSpecLayout(FrozenModel):
    spec_id: int = Field(ge=0)
    fields: tuple[PartitionField, ...] = ()


class PartitionCandidates(FrozenModel):
    """One partition's files a rewrite would pick, and when the partition was last written."""

    spec_id: int = Field(ge=0)
    values: tuple[Any, ...]
    small_files: int = Field(default=0, ge=0)
    small_bytes: int = Field(default=0, ge=0)
    large_files: int = Field(default=0, ge=0)
    large_bytes: int = Field(default=0, ge=0)
    delete_files: int = Field(default=0, ge=0)
    last_write_ms: int | None = Field(
        default=None, description="Commit time of the newest retained snapshot that added one of its files"
    )
    position_delete_files: int | None = Field(
        default=None,
        ge=0,
        description="Position delete files (not deletion vectors) among delete_files; None when not counted",
    )
    position_delete_bytes: int | None = Field(default=None, ge=0, description="Their bytes; None likewise")
    deletion_vectors: int = Field(default=0, ge=0, description="Deletion vectors (v3) among delete_files")
    deleted_rows: int = Field(default=0, ge=0, description="Rows the deletion vectors delete")

    @field_validator("values", mode="before")
    @classmethod
    def _hashable(cls, value: Any) -> Any:
        """A ("bytes", hex) pair read back from JSON is a list: a tuple again, so values stay hashable."""
        if isinstance(value, list | tuple):
            return tuple(tuple(v) if isinstance(v, list) else v for v in value)
        return value


class PartitionLayout(FrozenModel):
    """The current spec, every spec's fields, and the partitions holding rewrite candidates."""

    current_spec_id: int = Field(ge=0)
    specs: tuple[PartitionSpecLayout, ...]
    large_file_threshold_bytes: int = Field(gt=0, description="Data files above this are split")
    candidates: tuple[PartitionCandidates, ...] = ()

    def spec(self, spec_id: int) -> PartitionSpecLayout:
        return next(spec for spec in self.specs if spec.spec_id == spec_id)
