"""Checks what each maintenance action committed, right after it ran (`domain/outcomes/commit_invariants.py`):
the table's metadata is read before the action and after it through PyIceberg, the action's own commits
are told apart from a concurrent writer's, and a broken rule turns the action's result into `violated`
with the evidence (both metadata files, the snapshots, the numbers). The engine then records the
maintenance, and history pauses the table until a person releases it. A table dropped and created again
under its name while the action ran (another table UUID after it) is not judged by the rules: the
action's result becomes a `conflict` (`_replaced_meanwhile`).

Costs one metadata-file read per action plus one at the start; a manifest rewrite also reads the
manifests it replaced and wrote, orphan removal reads every manifest and lists the table's location
once more (as its guard before it does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from icepack_dagster.domain.actions.maintenance_action import ActionResult
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.outcomes.commit_invariants import (
    FileSets,
    SnapshotFacts,
    TableFacts,
    action_commits,
    violations,
)
from icepack_dagster.domain.recommendation.model import RecommendedAction
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import IcepackError
from icepack_dagster.iceberg.catalog_errors import METADATA_READ_ERRORS
from icepack_dagster.spark.status_meter import measured

if TYPE_CHECKING:
    from pyiceberg.table import Table

logger = logging.getLogger(__name__)
_CHECKED = ("succeeded", "no_effect")  # a failed or conflicting action committed nothing to check
PAUSED = (
    "the table is paused for maintenance until a person looks: `icepack rollback {table} --dry-run` "
    "shows whether the snapshot before it can be restored, then `icepack quarantine release {table}`"
)


class CommitVerifier:
    """The runner's `CommitCheck` for one maintenance of one table."""

    def __init__(
        self, load: Callable[[], Table], key: TableKey, actions: Sequence[RecommendedAction]
    ) -> None:
        self._load = load
        self._key = key
        self._options = {a.action: a.options for a in actions}
        self._before: TableFacts | None = None
        self._started_ms = 0

    def before_action(self) -> None:
        self._started_ms = int(utc_now().timestamp() * 1000)
        if self._before is None:  # later actions start from the state the previous check read
            self._before = self._read()[1]

    def after_action(self, result: ActionResult) -> ActionResult:
        before = self._before
        if result.status not in _CHECKED or before is None:
            self._before = None  # read afresh before the next action
            return result
        table, after = self._read()
        if after is None:
            return result
        if before.table_uuid is not None and after.table_uuid not in (None, before.table_uuid):
            self._before = None
            return _replaced_meanwhile(self._key, result, before, after)
        found = self._violations(result, table, before, after)
        self._before = after
        if not found:
            return result
        evidence = (
            f"table {self._key.text}: {result.action} committed what it may not change: {'; '.join(found)}. "
            f"Metadata before: {before.metadata_location}; after: {after.metadata_location}. "
            + PAUSED.format(table=self._key.text)
        )
        logger.error("%s", evidence)
        return result.model_copy(update={"status": "violated", "error": evidence})

    def _read(self) -> tuple[Table | None, TableFacts | None]:
        from icepack_dagster.iceberg.commits.facts import commit_facts

        try:
            table = self._load()
            return table, commit_facts(table)
        except (IcepackError, *METADATA_READ_ERRORS) as error:  # the action's outcome stands unchecked
            logger.warning("table %s: its commit could not be checked: %s", self._key.text, error)
            return None, None

    def _violations(
        self, result: ActionResult, table: Table | None, before: TableFacts, after: TableFacts
    ) -> list[str]:
        from icepack_dagster.iceberg.unreferenced_files import missing_referenced_files

        assert table is not None
        rules = definition(result.action).commit_rules
        commits = action_commits(before, after, self._started_ms)
        files = _file_sets(table, commits) if rules is not None and rules.reads_changed_manifests else []
        reads_files = rules is not None and rules.reads_referenced_files
        missing = missing_referenced_files(table) if reads_files else ()
        options = self._options.get(result.action, {})
        return violations(
            rules, before, after, commits, result.impact.procedure_output, options,
            int(utc_now().timestamp() * 1000), files, missing,
        )


def _replaced_meanwhile(
    key: TableKey, result: ActionResult, before: TableFacts, after: TableFacts
) -> ActionResult:
    """The table was dropped and created again under its name while the action ran: the action
    committed to the former table, and comparing the new table's metadata with the former one's would
    report changes no action made. Another writer's doing, so a conflict (nothing counted towards
    quarantine, the table's later actions skipped), never a success nor a violation; the measured
    numbers, which would compare two tables, are dropped."""
    reason = (
        f"conflict: table {key.text} was dropped and created again while {result.action} ran (table UUID "
        f"{before.table_uuid}, now {after.table_uuid}): the action committed to the former table; the new "
        "one was not checked against it and is maintained on its own from the next run"
    )
    logger.warning("%s", reason)
    return result.model_copy(
        update={"status": "conflict", "reason": reason, "impact": measured(result.impact, None, None)}
    )


def _file_sets(table: Table, commits: list[SnapshotFacts]) -> list[FileSets]:
    """Per commit of a manifest rewrite, the live files of the manifests it replaced and wrote."""
    from icepack_dagster.iceberg.manifest_reader import changed_live_files

    lists = {s.snapshot_id: s.manifest_list for s in table.metadata.snapshots}
    found = []
    for commit in commits:
        parent = lists.get(commit.parent_id) if commit.parent_id is not None else None
        if parent is None or commit.snapshot_id not in lists:
            continue
        replaced, written = changed_live_files(table.io, parent, lists[commit.snapshot_id])
        found.append(FileSets(snapshot_id=commit.snapshot_id, replaced=frozenset(replaced),
                              written=frozenset(written)))
    return found
