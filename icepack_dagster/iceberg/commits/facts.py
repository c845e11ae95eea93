"""What the commit checks read of a table's metadata file (`domain/outcomes/commit_invariants.py`), through
PyIceberg: snapshots with their operation, schema and summary totals, refs, schema and spec ids,
next-row-id. No manifest and no data file is read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icepack_dagster.domain.outcomes.commit_invariants import SUMMARY_KEYS, SnapshotFacts, TableFacts
from icepack_dagster.domain.table.iceberg_properties import MAX_REF_AGE_MS, iceberg_value
from icepack_dagster.iceberg.status_reader import snapshot_graph

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot


def _totals(snapshot: Snapshot) -> dict[str, int]:
    summary = snapshot.summary
    if summary is None:
        return {}
    found = {}
    for name in SUMMARY_KEYS:
        value = summary.get(name)
        if value is not None and str(value).lstrip("-").isdigit():
            found[name] = int(value)
    return found


def commit_facts(table: Table) -> TableFacts | None:
    """What the commit checks read of the table's metadata file (`domain/outcomes/commit_invariants.py`):
    no manifest is read. None past MAX_GRAPH_SNAPSHOTS snapshots (the checks are then skipped rather
    than made slow)."""
    metadata = table.metadata
    graph = snapshot_graph(metadata)
    if graph is None:
        return None
    return TableFacts(
        metadata_location=table.metadata_location,
        table_uuid=str(metadata.table_uuid),
        format_version=metadata.format_version,
        current_snapshot_id=metadata.current_snapshot_id,
        current_schema_id=metadata.current_schema_id,
        default_spec_id=metadata.default_spec_id,
        next_row_id=getattr(metadata, "next_row_id", None),
        graph=graph,
        snapshots={
            s.snapshot_id: SnapshotFacts(
                snapshot_id=s.snapshot_id,
                parent_id=s.parent_snapshot_id,
                timestamp_ms=s.timestamp_ms,
                operation=s.summary.operation.value if s.summary is not None else None,
                schema_id=s.schema_id,
                totals=_totals(s),
            )
            for s in metadata.snapshots
        },
        max_ref_age_ms=int(iceberg_value(metadata.properties, MAX_REF_AGE_MS).value),
    )
