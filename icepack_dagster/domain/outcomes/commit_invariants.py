"""What each maintenance action may and may not change, checked on the table's metadata before and after
it (no data is read): a commit that breaks one of these rules is `violated`, never a success.

Which commits are the action's: the snapshots that appeared on main since the action started whose
operation is `replace` (the only operation a rewrite commits). A concurrent writer's appends, deletes
and overwrites are told apart by their operation and left alone; a `replace` committed between the
action's start and the check is taken as the action's, since it changes what the action claims to have
done.

- data and delete rewrites: a commit whose operation is `replace` exists whenever the procedure reports
  rewritten files; schema and partition spec unchanged; the records of the table's live data files drop
  by no more than the delete records the rewrite could have applied (summary totals: a table without
  deletes keeps exactly its records), and never grow; the files removed are exactly the files the
  procedure reports it rewrote (a position delete rewrite removes no data file);
- manifest rewrite: the live data and delete files are the same set before and after (records and file
  totals equal too);
- snapshot expiry: the current snapshot and every branch and tag head unchanged (a concurrent writer may
  only move a branch forward), and no snapshot the retention keeps removed;
- orphan removal: every file any snapshot references still exists;
- every action, v3 tables: `next-row-id` never goes backwards (row lineage carried over).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from icepack_dagster.domain.actions.maintenance_action import ActionResult
from icepack_dagster.domain.table.snapshot_graph import SnapshotGraph, expired_by_iceberg

CLOCK_SKEW_MS = 5_000  # a commit this much before the action's start (clocks of the JVM and Python) counts

# Snapshot summary totals the rules read (Iceberg's `SnapshotSummary`), kept as integers.
SUMMARY_KEYS = (
    "total-records", "total-position-deletes", "total-equality-deletes", "total-data-files",
    "total-delete-files", "deleted-data-files", "added-data-files", "removed-delete-files",
    "added-delete-files",
)


class CommitCheck(Protocol):
    """What the runner calls around each action that ran: `before_action` just before it, and
    `after_action` with its result, which comes back as it was or as `violated` with the evidence."""

    def before_action(self) -> None: ...

    def after_action(self, result: ActionResult) -> ActionResult: ...


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SnapshotFacts(_Frozen):
    """One snapshot as the rules read it."""

    snapshot_id: int
    parent_id: int | None = None
    timestamp_ms: int
    operation: str | None = None
    schema_id: int | None = None
    totals: dict[str, int] = Field(default_factory=dict, description="Summary values of SUMMARY_KEYS")

    def describe(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(self.totals.items()))
        return f"snapshot {self.snapshot_id} ({self.operation}, parent {self.parent_id}; {shown})"


class TableFacts(_Frozen):
    """A table's metadata as the rules read it: one metadata file, no manifest."""

    metadata_location: str | None = None
    table_uuid: str | None = Field(default=None, description="The metadata's table-uuid: which table it is")
    format_version: int
    current_snapshot_id: int | None = None
    current_schema_id: int
    default_spec_id: int
    next_row_id: int | None = None
    graph: SnapshotGraph
    snapshots: dict[int, SnapshotFacts] = Field(default_factory=dict)
    max_ref_age_ms: int = Field(ge=0, description="The table's history.expire.max-ref-age-ms")


class FileSets(_Frozen):
    """The live data and delete files one commit of a manifest rewrite replaced, and the ones its new
    manifests hold: only the manifests it changed are read, so equal sets mean an unchanged table."""

    snapshot_id: int
    replaced: frozenset[str]
    written: frozenset[str]


def action_commits(before: TableFacts, after: TableFacts, started_ms: int) -> list[SnapshotFacts]:
    """The `replace` snapshots on main since the action started, oldest first (see the module)."""
    found: list[SnapshotFacts] = []
    current = after.current_snapshot_id
    while current is not None and current not in before.snapshots and current in after.snapshots:
        snapshot = after.snapshots[current]
        if snapshot.operation == "replace" and snapshot.timestamp_ms >= started_ms - CLOCK_SKEW_MS:
            found.append(snapshot)
        current = snapshot.parent_id
    return found[::-1]


Judge = Callable[
    [TableFacts, TableFacts, list[SnapshotFacts], Mapping[str, object], Mapping[str, str], int,
     Sequence["FileSets"], tuple[str, ...]],
    list[str],
]


@dataclass(frozen=True)
class CommitRules:
    """What one action may change, as its module declares it (`domain/actions/<action>.py`): the judge
    of its commits, and which extra metadata the judge needs read (the manifests its commits changed,
    or whether every referenced file still exists)."""

    judge: Judge
    reads_changed_manifests: bool = False
    reads_referenced_files: bool = False


def violations(
    rules: CommitRules | None,
    before: TableFacts,
    after: TableFacts,
    commits: list[SnapshotFacts],
    output: Mapping[str, object],
    options: Mapping[str, str],
    now_ms: int,
    files: Sequence[FileSets] = (),
    missing: tuple[str, ...] = (),
) -> list[str]:
    """Every rule the change from `before` to `after` breaks, each with its numbers: row lineage for
    every action, and the action's own `rules`."""
    found = _row_lineage(before, after)
    if rules is not None:
        found += rules.judge(before, after, commits, output, options, now_ms, files, missing)
    return found


def rewrite_rules(
    reported: str, removed: str, *, applies_deletes: bool, removes_data_files: bool
) -> CommitRules:
    """A rewrite's rules: `reported` is the procedure output column counting the files it rewrote,
    `removed` the snapshot summary key counting the files its commits removed; `applies_deletes`: its
    records may drop by the deletes it applies; `removes_data_files`: it may remove data files."""

    def judge(before: TableFacts, after: TableFacts, commits: list[SnapshotFacts],
              output: Mapping[str, object], options: Mapping[str, str], now_ms: int,
              files: Sequence[FileSets], missing: tuple[str, ...]) -> list[str]:
        return _rewrite(
            before, after, commits, output, reported, removed, applies_deletes, removes_data_files
        )

    return CommitRules(judge=judge)


def _manifest_judge(before: TableFacts, after: TableFacts, commits: list[SnapshotFacts],
                    output: Mapping[str, object], options: Mapping[str, str], now_ms: int,
                    files: Sequence[FileSets], missing: tuple[str, ...]) -> list[str]:
    return _manifests(before, after, commits, files)


def _expiry_judge(before: TableFacts, after: TableFacts, commits: list[SnapshotFacts],
                  output: Mapping[str, object], options: Mapping[str, str], now_ms: int,
                  files: Sequence[FileSets], missing: tuple[str, ...]) -> list[str]:
    return _expiry(before, after, options, now_ms)


def _orphan_judge(before: TableFacts, after: TableFacts, commits: list[SnapshotFacts],
                  output: Mapping[str, object], options: Mapping[str, str], now_ms: int,
                  files: Sequence[FileSets], missing: tuple[str, ...]) -> list[str]:
    if not missing:
        return []
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    return [f"{len(missing)} file(s) a snapshot references no longer exist: {shown}"]


MANIFEST_RULES = CommitRules(judge=_manifest_judge, reads_changed_manifests=True)
EXPIRY_RULES = CommitRules(judge=_expiry_judge)
ORPHAN_RULES = CommitRules(judge=_orphan_judge, reads_referenced_files=True)


def _row_lineage(before: TableFacts, after: TableFacts) -> list[str]:
    if before.next_row_id is None or (after.next_row_id or 0) >= before.next_row_id:
        return []
    return [f"next-row-id went backwards: {before.next_row_id} before, {after.next_row_id} after"]


def _count(output: Mapping[str, object], name: str) -> int:
    value = output.get(name)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _parent(after: TableFacts, before: TableFacts, commit: SnapshotFacts) -> SnapshotFacts | None:
    if commit.parent_id is None:
        return None
    return after.snapshots.get(commit.parent_id) or before.snapshots.get(commit.parent_id)


def _rewrite(
    before: TableFacts,
    after: TableFacts,
    commits: list[SnapshotFacts],
    output: Mapping[str, object],
    column: str,
    removed_key: str,
    applies_deletes: bool,
    removes_data_files: bool,
) -> list[str]:
    reported = _count(output, column)
    found: list[str] = []
    if reported and not commits:
        new = [s.describe() for i, s in after.snapshots.items() if i not in before.snapshots]
        found.append(f"the procedure reports {reported} files rewritten but no replace snapshot was "
                     f"committed; new snapshots: {'; '.join(new) or 'none'}")
    if after.default_spec_id != before.default_spec_id:
        found.append(f"partition spec changed: {before.default_spec_id} before, "
                     f"{after.default_spec_id} after")
    removed = 0
    for commit in commits:
        parent = _parent(after, before, commit)
        if parent is None:
            continue
        found += _same_schema(parent, commit) + _records_kept(applies_deletes, parent, commit)
        removed += commit.totals.get(removed_key, 0)
        data_removed = commit.totals.get("deleted-data-files", 0)
        if not removes_data_files and data_removed:
            found.append(f"{commit.describe()} removed {data_removed} data file(s); "
                         "this rewrite removes none")
    if commits and removed != reported:
        found.append(f"the committed snapshots removed {removed} file(s) ({removed_key}) where the procedure "
                     f"reports {reported} rewritten ({column}): {'; '.join(c.describe() for c in commits)}")
    return found


def _same_schema(parent: SnapshotFacts, commit: SnapshotFacts) -> list[str]:
    if parent.schema_id is None or commit.schema_id is None or parent.schema_id == commit.schema_id:
        return []
    return [f"schema changed: {parent.describe()} has schema {parent.schema_id}, "
            f"{commit.describe()} has {commit.schema_id}"]


def _records_kept(applies_deletes: bool, parent: SnapshotFacts, commit: SnapshotFacts) -> list[str]:
    """Records may only drop by the deletes the rewrite could apply, and only for a data rewrite."""
    if "total-records" not in parent.totals or "total-records" not in commit.totals:
        return []
    dropped = parent.totals["total-records"] - commit.totals["total-records"]
    deletes = parent.totals.get("total-position-deletes", 0) + parent.totals.get("total-equality-deletes", 0)
    allowed = deletes if applies_deletes else 0
    if 0 <= dropped <= allowed:
        return []
    change = f"lost {dropped}" if dropped > 0 else f"gained {-dropped}"
    return [f"the table's data files {change} record(s) where at most {allowed} deleted record(s) could be "
            f"applied: {parent.describe()} -> {commit.describe()}"]


def _manifests(
    before: TableFacts, after: TableFacts, commits: list[SnapshotFacts], files: Sequence[FileSets]
) -> list[str]:
    found: list[str] = []
    for commit in commits:
        parent = _parent(after, before, commit)
        if parent is None:
            continue
        changed = [k for k in ("total-records", "total-data-files", "total-delete-files")
                   if parent.totals.get(k) != commit.totals.get(k)]
        if changed:
            found.append(f"totals changed ({', '.join(changed)}): {parent.describe()} -> {commit.describe()}")
    for change in files:
        if change.replaced != change.written:
            gone, new = sorted(change.replaced - change.written), sorted(change.written - change.replaced)
            found.append(f"live files changed by snapshot {change.snapshot_id}: {len(gone)} gone "
                         f"({', '.join(gone[:3])}), {len(new)} new ({', '.join(new[:3])})")
    return found


def _expiry(before: TableFacts, after: TableFacts, options: Mapping[str, str], now_ms: int) -> list[str]:
    older_than = options.get("older_than")
    older_ms = int(datetime.fromisoformat(older_than).timestamp() * 1000) if older_than else now_ms
    retain = int(options.get("retain_last", "1"))
    forecast = expired_by_iceberg(before.graph, now_ms, older_ms, retain, before.max_ref_age_ms)
    found: list[str] = []
    heads_after = {ref.name: ref.snapshot_id for ref in after.graph.refs}
    for ref in before.graph.refs:
        if ref.name in forecast.dropped_refs:
            continue
        head = heads_after.get(ref.name)
        if head is None:
            found.append(f"{ref.kind} {ref.name} (at snapshot {ref.snapshot_id}) was removed")
        elif head != ref.snapshot_id and ref.snapshot_id not in {s for s, _ in after.graph.ancestry(head)}:
            found.append(f"{ref.kind} {ref.name} moved from snapshot {ref.snapshot_id} to {head}, "
                         "which does not descend from it")
    kept = {s[0] for s in before.graph.snapshots} - forecast.expired
    lost = sorted(kept - {s[0] for s in after.graph.snapshots})
    if lost:
        shown = ", ".join(map(str, lost[:10]))
        found.append(f"{len(lost)} snapshot(s) the retention keeps were removed: {shown} "
                     f"(older_than {older_than}, retain_last {retain}; current snapshot "
                     f"{before.current_snapshot_id} before, {after.current_snapshot_id} after)")
    if before.current_snapshot_id is not None and after.current_snapshot_id is None:
        found.append(f"the current snapshot {before.current_snapshot_id} is gone")
    return found

