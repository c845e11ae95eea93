"""What the two statistics actions share: when policy wants their statistics computed (none for main, or
at least N commits or a share M of the rows behind the current snapshot), what they predict (one
statistics file, registered for the snapshot main is at when the action runs), how the procedure's one
output column is read, and how the table's metadata after the run verifies it (the file listed for that
snapshot, and not one that was already there: a no-op is never a success).

Both are off unless a policy sets one of their fields (`icepack.stats.table.*`, `icepack.stats.partition.*`):
computing table statistics reads every row, and a new action must not start writing into tables whose
owners never asked for it. Neither changes a row or a snapshot; each commits new table metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from icepack_dagster.domain.actions.definition import ActionEstimate, PlanningContext
from icepack_dagster.domain.actions.maintenance_action import ActionImpact
from icepack_dagster.domain.actions.planners.compaction import RewritePrediction
from icepack_dagster.domain.outcomes.commit_invariants import CommitRules, FileSets, SnapshotFacts, TableFacts
from icepack_dagster.domain.table.statistics_freshness import RegisteredStatistics, StatisticsFreshness
from icepack_dagster.domain.table.status import TableStatus

WRITTEN = "statistics_files_written"
"""The procedure output icepack counts: 1 when the procedure returned a file, else 0."""
ONE_FILE = RewritePrediction(files_in=1, files_out=1, exact=True)
"""The prediction: one statistics file written and registered (files in and out count that file)."""
SWEPT = 0.0
"""Their `sweep_cadence_hours`: health never asks for statistics a policy wants but the table lacks, so
the maintenance sensor's sweep looks for them on healthy tables too; no cadence beyond the policy's (a
table whose statistics are current has nothing to gain)."""


@dataclass(frozen=True)
class StatisticsKind:
    """One kind of statistics: how it is named, where its facts and its policy fields are, and the
    procedure's output column."""

    label: str
    setting: str
    output_column: str
    facts: Callable[[StatisticsFreshness], RegisteredStatistics | None]
    policy: Callable[[PlanningContext], tuple[int | None, float | None]]


def plan_statistics(kind: StatisticsKind, context: PlanningContext) -> ActionEstimate | str:
    """Compute when policy asks and the statistics main plans with are missing or stale by its fields."""
    s = context.status
    commits, share = kind.policy(context)
    if commits is None and share is None:
        return (
            f"{kind.label} are not kept by policy: set icepack.stats.{kind.setting}.commits-behind or "
            f"icepack.stats.{kind.setting}.rows-changed to keep them fresh"
        )
    if s.snapshot_id is None:
        return f"main has no snapshot to compute {kind.label} for"
    if s.statistics is None:
        return f"the status carries no {kind.label} facts; measure the table again"
    facts = kind.facts(s.statistics)
    target = (
        f"computed for the snapshot main is at when it runs ({s.snapshot_id} unless an action before it "
        "in this run commits)"
    )
    if facts is None:
        return ActionEstimate(f"main has no {kind.label}; {target}", {}, prediction=ONE_FILE)
    changed = facts.rows_changed / max(s.total_records, 1)
    behind = (
        f"{kind.label} of snapshot {facts.snapshot_id} are {facts.commits_behind} commits behind main, "
        f"which changed {facts.rows_changed} rows ({changed:.0%})"
    )
    if facts.commits_behind == 0:
        return f"{kind.label} are current (snapshot {facts.snapshot_id})"
    if commits is not None and facts.commits_behind >= commits:
        return ActionEstimate(f"{behind}, at least {commits} commits; {target}", {}, prediction=ONE_FILE)
    if share is not None and changed >= share:
        return ActionEstimate(f"{behind}, at least {share:.0%}; {target}", {}, prediction=ONE_FILE)
    limits = [] if commits is None else [f"{commits} commits"]
    limits += [] if share is None else [f"{share:.0%} of rows"]
    return f"{behind}: within policy ({' or '.join(limits)})"


def _commits_nothing(
    before: TableFacts, after: TableFacts, commits: list[SnapshotFacts], output: Mapping[str, object],
    options: Mapping[str, str], now_ms: int, files: Sequence[FileSets], missing: tuple[str, ...],
) -> list[str]:
    """Computing statistics commits table metadata only: no snapshot of its own, the schema and the
    partition spec as they were (a concurrent writer's appends are not its commits)."""
    found = [f"{c.describe()} was committed; computing statistics commits no snapshot" for c in commits]
    for what, was, now in (
        ("schema", before.current_schema_id, after.current_schema_id),
        ("partition spec", before.default_spec_id, after.default_spec_id),
    ):
        if was != now:
            found.append(f"{what} changed: {was} before, {now} after")
    return found


STATISTICS_RULES = CommitRules(judge=_commits_nothing)
"""Their commit rules (`domain/outcomes/commit_invariants.py`): metadata only, no snapshot."""


def read_statistics_outcome(
    kind: StatisticsKind, rows: Sequence[Mapping[str, object]]
) -> ActionImpact:
    """The procedure returns one row with the file's path, or none when it wrote nothing."""
    path = rows[0].get(kind.output_column) if rows else None
    if not isinstance(path, str):
        return ActionImpact(procedure_output={WRITTEN: 0})
    return ActionImpact(procedure_output={WRITTEN: 1, kind.output_column: path})


def verify_statistics(
    kind: StatisticsKind,
    output: Mapping[str, object],
    before: TableStatus | None,
    after: TableStatus | None,
) -> str | None:
    """The file the procedure returned is what main's metadata now lists for the snapshot main was at
    before it ran, and was not listed already."""
    path = output.get(kind.output_column)
    if not isinstance(path, str):
        return f"the procedure wrote no {kind.label} file"
    if after is None or after.statistics is None:
        return f"the table's metadata could not be read after it, so {path} is not verified"
    registered = kind.facts(after.statistics)
    if registered is None or registered.path != path:
        return f"the table's metadata does not list {path} as the {kind.label} of main"
    expected = before.snapshot_id if before is not None else None
    if expected is not None and registered.snapshot_id != expected:
        return (
            f"{path} is registered for snapshot {registered.snapshot_id}, not for snapshot {expected} "
            "main was at when it ran (a commit came in between)"
        )
    earlier = kind.facts(before.statistics) if before is not None and before.statistics else None
    if earlier is not None and earlier.path == path:
        return f"{path} was already the {kind.label} of snapshot {earlier.snapshot_id}: nothing was computed"
    return None
