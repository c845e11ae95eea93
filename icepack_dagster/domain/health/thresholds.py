"""Thresholds that turn status numbers into health issues. Policy-independent: the same for every table
unless the operator changes them in settings (`ICEPACK_THRESHOLDS__...`)."""

from __future__ import annotations

from pydantic import Field, model_validator

from icepack_dagster.domain.frozen_model import FrozenModel


class HealthThresholds(FrozenModel):
    """Warning and critical levels per metric; critical must not be below warning."""

    small_file_min_count: int = Field(
        default=8, ge=1, description="Fewer small files than this is never an issue"
    )
    small_file_ratio_warning: float = Field(default=0.3, gt=0, le=1)
    small_file_ratio_critical: float = Field(default=0.7, gt=0, le=1)
    small_file_default_ratio: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description="A data file is small below this fraction of the target file size (Iceberg's own "
        "rewrite default for min-file-size-bytes)",
    )
    manifest_count_warning: int = Field(default=50, ge=1)
    manifest_count_critical: int = Field(default=500, ge=1)
    delete_file_ratio_warning: float = Field(default=0.1, gt=0, description="Delete files per data file")
    delete_file_ratio_critical: float = Field(default=0.5, gt=0)
    delete_file_min_count: int = Field(default=2, ge=1)
    deleted_row_share_warning: float = Field(
        default=0.1, gt=0, le=1, description="Share of rows deletion vectors delete (format v3)"
    )
    deleted_row_share_critical: float = Field(default=0.3, gt=0, le=1)
    snapshot_count_warning: int = Field(default=100, ge=1)
    snapshot_count_critical: int = Field(default=1000, ge=1)
    snapshot_age_warning_hours: float = Field(default=7 * 24, gt=0)
    snapshot_age_critical_hours: float = Field(default=30 * 24, gt=0)
    metadata_log_warning: int = Field(default=150, ge=1)
    metadata_log_critical: int = Field(default=500, ge=1)
    statistics_commits_behind_warning: int = Field(
        default=50, ge=1, description="Statistics this many commits behind main are stale (warning only)"
    )
    statistics_rows_changed_warning: float = Field(
        default=0.25, gt=0, description="Statistics are stale once commits since changed this share of rows"
    )

    @model_validator(mode="after")
    def _critical_not_below_warning(self) -> HealthThresholds:
        pairs = [
            ("small_file_ratio", self.small_file_ratio_warning, self.small_file_ratio_critical),
            ("manifest_count", self.manifest_count_warning, self.manifest_count_critical),
            ("delete_file_ratio", self.delete_file_ratio_warning, self.delete_file_ratio_critical),
            ("deleted_row_share", self.deleted_row_share_warning, self.deleted_row_share_critical),
            ("snapshot_count", self.snapshot_count_warning, self.snapshot_count_critical),
            ("snapshot_age_hours", self.snapshot_age_warning_hours, self.snapshot_age_critical_hours),
            ("metadata_log", self.metadata_log_warning, self.metadata_log_critical),
        ]
        for name, warning, critical in pairs:
            if critical < warning:
                raise ValueError(f"{name}_critical ({critical}) must not be below {name}_warning ({warning})")
        return self
