"""What one maintenance action is, as its own module declares it: the options its procedure takes and
those refused by name, how it is planned and what it predicts, the guards that refuse it, how its
output is read and compared with the prediction, when it is swept for, and the Iceberg runtime it
needs.

`registry.py` loads one `ActionDefinition` per action listed in `MaintenanceAction`. Recommendation,
SQL rendering, the runner, outcome comparison, the engine and the Dagster layer read these fields and
never branch on a particular action, so adding an action is its module, its line in
`MaintenanceAction` and its tests (`tests/domain/actions/test_action_registry.py` holds the package to
that).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from icepack_dagster.domain.actions.maintenance_action import ActionImpact, MaintenanceAction
from icepack_dagster.domain.actions.option_values import Validator
from icepack_dagster.domain.actions.planners.compaction import RewritePrediction
from icepack_dagster.domain.outcomes.commit_invariants import CommitRules
from icepack_dagster.domain.policy.model import Policy
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.domain.table.status import TableStatus

IcebergVersion = tuple[int, int, int]
"""An Iceberg runtime version, (major, minor, patch): compared as a tuple."""

Rendering = Literal["map", "string", "timestamp", "plain"]
"""Where an option goes in the CALL: an entry of `options => map(...)`, or a named argument rendered
as a string literal, a `TIMESTAMP` literal, or as its canonical text (numbers, booleans)."""


@dataclass(frozen=True)
class ProcedureOption:
    """One option a procedure accepts: its validator (parses the value and prints it back from its
    type), where it goes in the CALL, and the oldest Iceberg runtime that accepts it (None: any runtime
    that has the procedure). An option that changes only how the procedure works, never what it does
    (`left_out_below_runtime`), is left out of the CALL on an older runtime instead of refusing it."""

    validate: Validator
    rendering: Rendering = "plain"
    min_runtime: IcebergVersion | None = None
    verify: Verifier | None = None
    left_out_below_runtime: bool = False


@dataclass(frozen=True)
class Gain:
    """What a planned action is expected to gain, for the recommendation's priority."""

    files_removed: int = 0
    bytes_reclaimed: int = 0
    bytes_to_rewrite: int = 0


@dataclass(frozen=True)
class ActionEstimate:
    """What an action's planner decides before it becomes a `RecommendedAction`: the reason, the
    procedure options, the expected gain and the prediction the outcome is checked against; and what
    it leaves for the actions after it (it applies every delete file; it rewrites data files, so the
    manifests it leaves are unknown; it leaves hot partitions out, and their delete files with them).
    The SQL that runs it is another thing: `spark/prepared_actions.py`'s `PreparedAction`."""

    reason: str
    options: dict[str, str] = field(default_factory=dict)
    gain: Gain = Gain()
    prediction: RewritePrediction | None = None
    applies_deletes: bool = False
    rewrites_data_files: bool = False
    leaves_out_hot_partitions: bool = False


def whole_table_estimate(
    files_in: int, files_out: int | None = None, bytes_in: int | None = None
) -> RewritePrediction:
    """A whole-table estimate (no groups): the outcome check only tells "no effect" from "some"."""
    return RewritePrediction(files_in=files_in, files_out=files_out or 0, bytes_in=bytes_in or 0, exact=False)


@dataclass(frozen=True)
class PlanningContext:
    """What a planner sees: the table's status, its policy, the codes of its health issues, the
    moment, how many maintenances in a row conflicted with a concurrent writer, and what the actions
    planned before it in this recommendation leave behind."""

    status: TableStatus
    policy: Policy
    issues: frozenset[str]
    now: datetime
    conflicts: int = 0
    deletes_applied: bool = False
    data_files_rewritten: bool = False
    hot_partitions_left_out: bool = False

    @property
    def target_file_size_bytes(self) -> int:
        return self.policy.target_file_size_bytes or self.status.target_file_size_bytes

    def after(self, plan: ActionEstimate) -> PlanningContext:
        """The context of the next action, once this plan is recommended."""
        return replace(
            self,
            deletes_applied=self.deletes_applied or plan.applies_deletes,
            data_files_rewritten=self.data_files_rewritten or plan.rewrites_data_files,
            hot_partitions_left_out=self.hot_partitions_left_out or plan.leaves_out_hot_partitions,
        )


Planner = Callable[[PlanningContext], ActionEstimate | str]
"""An action's plan for one table, or why there is nothing to gain."""

Guard = Callable[[TableKey, Mapping[str, str], Mapping[str, str], datetime], None]
"""Raises `UnsafeMaintenanceError` (or `InvalidProcedureOptionError`) for what must never run, given
the table, the action's options, the table's properties and the moment (UTC)."""

OutputFields = tuple[str, str | None, str | None]
"""The procedure's output columns for files in, files out and bytes in (None where it has none)."""

OutcomeReader = Callable[[Sequence[Mapping[str, object]], Mapping[str, str]], ActionImpact]
"""What the procedure's result rows say it did, given the options it ran with."""

Verifier = Callable[[Mapping[str, object], TableStatus | None, TableStatus | None], str | None]
"""Why the table's metadata after the action does not show what the procedure's output says it did,
given that output and the table's status just before and just after it; None when it does."""


def first_row(rows: Sequence[Mapping[str, object]], options: Mapping[str, str]) -> ActionImpact:
    """A procedure's one result row, its numbers and text kept as the procedure output."""
    output: dict[str, int | float | str | None] = {}
    if rows:
        output = {k: v for k, v in rows[0].items() if isinstance(v, int | float | str)}
    return ActionImpact(procedure_output=output)


def as_given(options: dict[str, str]) -> dict[str, str]:
    return options


@dataclass(frozen=True)
class ActionDefinition:
    """Everything one maintenance action is, and which part of the package reads each field.

    - `options`, `refused_options`, `completed_options`: what `procedure_options.validate_options`
      accepts, refuses by name (with why) and adds to what it accepted; `sql/procedures.py` renders them.
    - `plan`: the recommendation's per-action step (`recommendation/recommender.py`).
    - `destructive` (deletes files: refused when gc.enabled is false), `reads_properties` (table
      properties Iceberg parses on every run of it) and `guard`: the gates before it runs (the
      recommender; `guard_action` in `sql/procedures.py`, which also runs its own `guard`).
    - `output_fields`, `read_outcome`: how the procedure's output is read (`spark/runner.py`) and
      compared with the prediction (`outcomes/action_outcome.py`).
    - `sweep_cadence_hours`: run at most this often, and looked for even on healthy tables, because
      its need is invisible in metadata (the maintenance sensor's sweep).
    - `refused_session_settings`: Spark settings whose value (lower case) refuses it, with why.
    - `deletes_unreferenced_files`: it deletes files no metadata references, so it runs only where the
      table's location listing can be trusted, and what it left is reported after it.
    - `object_store_options`: options it takes when the table lives on an object store.
    - `removal_options`: options it takes given how many files the engine's listing before it predicts
      it deletes (orphan removal streams a large removal's results).
    - `expires_snapshots`: its snapshots before and after count as snapshots expired.
    - `min_runtime`: the oldest Iceberg runtime that has the procedure (None: any icepack runs on).
    - `verify`: what the table's metadata after a run must show; a run it does not verify is
      `no_effect`, never a success (`spark/runner.py`).
    - `commit_rules`: what its commits may change, checked after it ran
      (`engine/commit_verification.py`, `domain/outcomes/commit_invariants.py`).
    - `counts_rewritten_bytes`: its rewritten bytes count towards the write-amplification breaker
      (`recommendation/circuit_breakers.py`).
    """

    action: MaintenanceAction
    plan: Planner
    options: Mapping[str, ProcedureOption]
    refused_options: Mapping[str, str] = field(default_factory=dict)
    completed_options: Callable[[dict[str, str]], dict[str, str]] = as_given
    destructive: bool = False
    reads_properties: tuple[str, ...] = ()
    guard: Guard | None = None
    output_fields: OutputFields | None = None
    read_outcome: OutcomeReader = first_row
    sweep_cadence_hours: float | None = None
    refused_session_settings: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    deletes_unreferenced_files: bool = False
    object_store_options: Mapping[str, str] = field(default_factory=dict)
    removal_options: Callable[[int], Mapping[str, str]] | None = None
    expires_snapshots: bool = False
    min_runtime: IcebergVersion | None = None
    verify: Verifier | None = None
    commit_rules: CommitRules | None = None
    counts_rewritten_bytes: bool = False
