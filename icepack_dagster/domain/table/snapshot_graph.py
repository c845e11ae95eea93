"""A table's snapshots and refs as expiry sees them, and which snapshots Iceberg's expiry removes.

`expired_by_iceberg` follows `RemoveSnapshots` of Iceberg 1.10, as `expire_snapshots` runs it with
`older_than` and `retain_last`:
- a branch or tag other than main whose snapshot is older than its `max-ref-age-ms` (else the table's
  `history.expire.max-ref-age-ms`) is dropped; main is always kept;
- each kept branch keeps, walking back from its head through ancestors still in the metadata, at least
  its own `min-snapshots-to-keep` (else `retain_last`) snapshots, and every ancestor committed at or
  after its own `max-snapshot-age-ms` cutoff (else `older_than`); the walk stops at the first snapshot
  that is neither;
- each kept tag keeps its snapshot;
- a snapshot no kept ref reaches is kept while committed at or after `older_than`;
- every other snapshot is expired.
Field names are a public contract (`icepack status --json`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel

MAIN = "main"


class RefFacts(FrozenModel):
    """One branch or tag: where it points and its own retention settings (None: the table's)."""

    name: str
    kind: Literal["branch", "tag"]
    snapshot_id: int
    min_snapshots_to_keep: int | None = Field(default=None, ge=1)
    max_snapshot_age_ms: int | None = Field(default=None, ge=0)
    max_ref_age_ms: int | None = Field(default=None, ge=0)


class SnapshotGraph(FrozenModel):
    """Every retained snapshot as (id, parent id, commit time in epoch ms), and every ref."""

    snapshots: tuple[tuple[int, int | None, int], ...]
    refs: tuple[RefFacts, ...] = ()

    def ancestry(self, head: int) -> list[tuple[int, int]]:
        """(id, commit ms) from `head` back through parents still in the metadata."""
        known = {s[0]: s for s in self.snapshots}
        found: list[tuple[int, int]] = []
        current: int | None = head
        while current is not None and current in known and len(found) < len(known):
            snapshot_id, parent, committed = known[current]
            found.append((snapshot_id, committed))
            current = parent
        return found


class ExpiryForecast(FrozenModel):
    """What an expiry with given options removes: snapshot ids and ref names."""

    expired: frozenset[int] = frozenset()
    dropped_refs: tuple[str, ...] = ()


def _kept_refs(graph: SnapshotGraph, now_ms: int, table_max_ref_age_ms: int) -> list[RefFacts]:
    committed = {s[0]: s[2] for s in graph.snapshots}
    kept = []
    for ref in graph.refs:
        if ref.name == MAIN:
            kept.append(ref)
            continue
        max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else table_max_ref_age_ms
        if ref.snapshot_id in committed and now_ms - committed[ref.snapshot_id] <= max_age:
            kept.append(ref)
    return kept


def _branch_keeps(
    graph: SnapshotGraph, ref: RefFacts, now_ms: int, older_than_ms: int, retain: int
) -> set[int]:
    cutoff = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else older_than_ms
    minimum = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else retain
    keeps: set[int] = set()
    for snapshot_id, committed in graph.ancestry(ref.snapshot_id):
        if len(keeps) < minimum or committed >= cutoff:
            keeps.add(snapshot_id)
        else:
            break
    return keeps


def expired_by_iceberg(
    graph: SnapshotGraph, now_ms: int, older_than_ms: int, retain_last: int, table_max_ref_age_ms: int
) -> ExpiryForecast:
    """The snapshots and refs `expire_snapshots(older_than, retain_last)` removes at `now_ms`."""
    kept_refs = _kept_refs(graph, now_ms, table_max_ref_age_ms)
    keep = {ref.snapshot_id for ref in kept_refs}
    reached: set[int] = set()
    for ref in kept_refs:
        if ref.kind == "branch":
            keep |= _branch_keeps(graph, ref, now_ms, older_than_ms, retain_last)
            reached |= {snapshot_id for snapshot_id, _ in graph.ancestry(ref.snapshot_id)}
        else:
            reached.add(ref.snapshot_id)
    keep |= {s[0] for s in graph.snapshots if s[0] not in reached and s[2] >= older_than_ms}
    kept_names = {ref.name for ref in kept_refs}
    return ExpiryForecast(
        expired=frozenset(s[0] for s in graph.snapshots if s[0] not in keep),
        dropped_refs=tuple(sorted(ref.name for ref in graph.refs if ref.name not in kept_names)),
    )
