"""A changed table's status from its snapshot summaries and manifest list, without reading its manifests.

When the status tracker knows a table's status at snapshot k and main's current snapshot descends from
k, the commits since are in the loaded metadata file. The summary status is used only when all of these
hold; otherwise the manifests are read exactly as before (`status_reader.read_status`):

1. the known status is of this table (the same UUID: not one dropped and created again under its
   name), has a snapshot and no delete file, and was measured under today's file-size limits;
2. walking main's parents from the current snapshot reaches k through retained snapshots only;
3. every commit since k is a plain append whose summary has `added-data-files`, `added-records` and
   `added-files-size`, and reports nothing deleted or removed and no delete file added;
4. the current summary's totals (`total-data-files`, `-records`, `-files-size`, `-delete-files`,
   `-position-deletes`, `-equality-deletes`) are the known figures plus the appends, with no delete file;
5. the manifest list (read: one file) lists as many live data files as those totals, and no live
   delete file;
6. at the high ends of the carried bounds (every appended file counted small and mergeable) there is no
   issue that needs manifest entries (SMALL_FILES, FINE_PARTITIONING, DELETE_FILE_BUILDUP): then none
   shows anywhere within the bounds, and the health at both ends is a full read's
   (`domain/health/summary_sufficiency.py` says why).

What is then exact: everything the metadata file gives (as in a full status), the data files, records and
bytes (the known figures plus the appends, equal to the summary totals), the delete fields (none), and the
manifest counts and bytes (the manifest list: read so that health and the manifest-rewrite plan, which
read them, are exact; a merging append can fold manifests together and no summary gives a manifest's
size, so bounds on them could not keep that plan). What is carried from the snapshot the manifest
entries were last read at (`manifests_read_at`): the small files and their bytes, the size histogram, the
partition count and the layout's candidates, with bounds (`carried`); the layout's specs are today's. A
summary status known later is extended the same way, its bounds widening with each append, until a full
read is needed again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icepack_dagster.domain.health.summary_sufficiency import summary_falls_short
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.table.appends import Appends, appends, carried_bounds, totals, totals_disagree
from icepack_dagster.domain.table.file_size_limits import file_size_limits
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.iceberg.manifest_reader import MANIFEST_CONTENT_DELETES, ManifestRef
from icepack_dagster.iceberg.partition_layout_reader import spec_layouts
from icepack_dagster.iceberg.statistics_reader import read_statistics_freshness
from icepack_dagster.iceberg.status_reader import (
    current_manifests,
    manifest_facts,
    metadata_facts,
    snapshot_graph,
    snapshot_span,
)


def _summary(snapshot: Snapshot) -> dict[str, str]:
    found = snapshot.summary
    if found is None:
        return {}
    return {"operation": found.operation.value, **found.additional_properties}


def commits_since(table: Table, known_id: int) -> list[Snapshot] | str:
    """Main's commits after snapshot `known_id`, oldest first, or why they cannot all be found."""
    current = table.current_snapshot()
    if current is None:
        return "main has no snapshot now"
    by_id = {snapshot.snapshot_id: snapshot for snapshot in table.metadata.snapshots}
    found: list[Snapshot] = []
    snapshot = current
    while snapshot.snapshot_id != known_id:
        found.append(snapshot)
        parent = snapshot.parent_snapshot_id
        if parent is None:
            return f"snapshot {known_id} is not an ancestor of main's snapshot {current.snapshot_id}"
        if parent == known_id:
            break
        if parent not in by_id:
            return f"snapshot {parent}, between {known_id} and main's {current.snapshot_id}, is not retained"
        snapshot = by_id[parent]
    return found[::-1]


def summary_status(
    table: Table, key: TableKey, known: TableStatus, thresholds: HealthThresholds, now: datetime
) -> TableStatus | str:
    """The table's status from its snapshot summaries, the manifest list and the `known` status, or why
    its manifests must be read (the rule of this module's docstring)."""
    name = key.text
    if known.snapshot_id is None:
        return "the known status has no snapshot to start from"
    if known.table_uuid is not None and known.table_uuid != str(table.metadata.table_uuid):
        return f"the table was created again under its name (its UUID was {known.table_uuid})"
    if known.live_delete_files:
        return f"the known status has {known.live_delete_files} delete files"
    metadata = table.metadata
    target, small = file_size_limits(name, metadata.properties, thresholds)
    if (target, small) != (known.target_file_size_bytes, known.small_file_threshold_bytes):
        return "the file-size limits changed since the known status"
    commits = commits_since(table, known.snapshot_id)
    if isinstance(commits, str):
        return commits
    summaries = [_summary(commit) for commit in commits]
    appended = appends(summaries)
    if isinstance(appended, str):
        return appended
    if summaries:
        now_totals = totals(summaries[-1])
        if isinstance(now_totals, str):
            return now_totals
        disagreement = totals_disagree(known, appended, now_totals)
        if disagreement is not None:
            return disagreement
    refs = current_manifests(table, name)
    listed = _listed_files(refs)
    if listed != (known.live_data_files + appended.data_files, 0):
        return f"the manifest list lists {listed[0]} live data and {listed[1]} delete files, not the totals"
    status = _status(table, key, known, appended, now) | {
        **manifest_facts(refs), "target_file_size_bytes": target, "small_file_threshold_bytes": small,
    }
    built = TableStatus(**status)
    short = summary_falls_short(built, thresholds)
    return short if short is not None else built


def _listed_files(refs: list[ManifestRef]) -> tuple[int | None, int | None]:
    """Live data files and live delete files the manifest list counts (None where it leaves counts out)."""
    counts = [0, 0]
    for ref in refs:
        if ref.live_files is None:
            return None, None
        counts[ref.content == MANIFEST_CONTENT_DELETES] += ref.live_files
    return counts[0], counts[1]


def _status(
    table: Table, key: TableKey, known: TableStatus, appended: Appends, now: datetime
) -> dict[str, Any]:
    """Every field but the manifest list's and the file-size limits."""
    metadata = table.metadata
    layout = known.layout
    if layout is not None:
        today = {"current_spec_id": metadata.default_spec_id, "specs": spec_layouts(metadata)}
        layout = layout.model_copy(update=today)
    return {
        **metadata_facts(table, key.text, now),
        "snapshot_span_ms": snapshot_span(metadata),
        "snapshot_graph": snapshot_graph(metadata),
        "statistics": read_statistics_freshness(metadata),
        "live_data_files": known.live_data_files + appended.data_files,
        "total_records": known.total_records + appended.records,
        "live_data_bytes": known.live_data_bytes + appended.files_size,
        "live_position_delete_files": 0,
        "live_deletion_vectors": 0,
        "live_equality_delete_files": 0,
        "live_delete_files": 0,
        "live_delete_bytes": 0,
        "position_delete_records": 0,
        "deletion_vector_records": 0,
        "equality_delete_records": 0,
        "small_file_count": known.small_file_count,
        "small_file_bytes": known.small_file_bytes,
        "file_size_histogram": known.file_size_histogram,
        "partition_count": known.partition_count,
        "layout": layout,
        "depth": "summary",
        "manifests_read_at": known.entries_read_at,
        "carried": carried_bounds(known, appended),
    }
