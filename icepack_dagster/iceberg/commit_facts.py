"""The table metadata the commit checks read (`domain/outcomes/commit_invariants.py`), through PyIceberg: the
metadata file for every rule, the manifests a manifest rewrite changed (only those), and for orphan
removal whether each referenced file still exists. No data file is opened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icepack_dagster.domain.outcomes.commit_invariants import (
    SUMMARY_KEYS,
    FileSets,
    SnapshotFacts,
    TableFacts,
)
from icepack_dagster.domain.table.iceberg_properties import MAX_REF_AGE_MS, iceberg_value
from icepack_dagster.iceberg.manifest_reader import live_file_paths, read_manifest_list
from icepack_dagster.iceberg.status_reader import MAX_GRAPH_SNAPSHOTS, snapshot_graph
from icepack_dagster.iceberg.unreferenced_files import list_files, referenced_locations

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


def table_facts(table: Table) -> TableFacts | None:
    """The facts of the table's metadata file; None past MAX_GRAPH_SNAPSHOTS snapshots (the checks
    are then skipped rather than made slow)."""
    metadata = table.metadata
    graph = snapshot_graph(metadata)
    if graph is None:
        return None
    return TableFacts(
        metadata_location=table.metadata_location,
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


def manifest_file_sets(table: Table, commits: list[SnapshotFacts]) -> list[FileSets]:
    """Per commit, the live files of the manifests it replaced against those of the manifests it wrote
    (manifests both its parent and it list hold the same entries and are not read)."""
    by_id = {s.snapshot_id: s for s in table.metadata.snapshots}
    found = []
    for commit in commits:
        snapshot, parent = by_id.get(commit.snapshot_id), by_id.get(commit.parent_id or -1)
        if snapshot is None or parent is None:
            continue
        new = {m.path for m in read_manifest_list(table.io, snapshot.manifest_list)}
        old = {m.path for m in read_manifest_list(table.io, parent.manifest_list)}
        replaced = {f for path in old - new for f in live_file_paths(table.io, path)}
        written = {f for path in new - old for f in live_file_paths(table.io, path)}
        found.append(FileSets(snapshot_id=commit.snapshot_id, replaced=frozenset(replaced),
                              written=frozenset(written)))
    return found


def missing_referenced_files(table: Table) -> tuple[str, ...]:
    """Files some snapshot, branch or tag references that no longer exist: those under the table's
    location are looked up in one listing, any elsewhere one by one."""
    referenced = referenced_locations(table)
    listed = {_plain(f.location) for f in list_files(table.location(), table.io)}
    missing = [
        path for path in referenced
        if _plain(path) not in listed and not table.io.new_input(path).exists()
    ]
    return tuple(sorted(missing))


def _plain(location: str) -> str:
    """A location without its `file:` scheme spelling (`file:/x`, `file:///x` and `/x` are one file)."""
    if location.startswith("file:"):
        return "/" + location.removeprefix("file:").lstrip("/")
    return location


__all__ = ["MAX_GRAPH_SNAPSHOTS", "manifest_file_sets", "missing_referenced_files", "table_facts"]
