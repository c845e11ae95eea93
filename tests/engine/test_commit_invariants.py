"""Contract: after each action, icepack checks from metadata what the action committed, and a commit
that changed what the action may not change is `violated`, never a success; the table is then paused
(quarantined with the evidence: both metadata files, the snapshots, the numbers), an alert says so, and
`icepack maintain` exits 8. A concurrent writer's commits (appends, row-level deletes) are not the
action's and never raise a violation; nor does a table dropped and created again under its name
while the action ran (a conflict: the action committed to the former table).

Every violation here is made by a real commit: a `replace` that drops a data file (Iceberg's RewriteFiles
through the Java API) or a snapshot removed against retention (ExpireSnapshots through the Java API),
committed while the action runs or between the action and its check; for orphan removal, a referenced
file deleted from storage. Where each rule holds, the same action runs without the faulty commit and
succeeds with every version of the table reading as before.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from sqlalchemy import text

from icepack_dagster.cli.context import EXIT_VIOLATED
from icepack_dagster.cli.maintain_command import _exit_code
from icepack_dagster.domain.actions.maintenance_action import ActionResult, MaintenanceAction
from icepack_dagster.domain.recommendation.model import RecommendedAction
from icepack_dagster.domain.reports.alerts import judge_streak
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.engine.commit_verification import CommitVerifier
from icepack_dagster.iceberg.catalogs import CatalogSet, load_table
from icepack_dagster.spark.runner import MaintenanceRunner
from tests.engine.safety_testkit import (
    MOR_V2,
    StalledTaskSlots,
    a_data_file,
    age_files,
    commit_dropping_a_data_file,
    commit_position_deletes,
    expire_snapshot_by_id,
    finished,
    locate_rows,
    run_in_thread,
    table_dir,
    wait_past_newest_snapshot,
)
from tests.factories import make_action, make_recommendation
from tests.tables_testkit import (
    append_rows,
    arrow_fingerprint,
    contents_by_version,
    local,
    make_table,
    table_key,
)

pytestmark = pytest.mark.spark

A = MaintenanceAction
REWRITE = make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2"})
THREE_DAYS_AGO = (datetime.now(UTC) - timedelta(days=3)).isoformat()
MAIN = "'main'"  # how `contents_by_version` names the main branch


class CommitBeforeTheCheck:
    """Loads the table as the engine does; on the read after the action, `commit` runs first: a real
    commit between the action and its check."""

    def __init__(self, catalogs: CatalogSet, key: TableKey, commit: Callable[[], Any]) -> None:
        self._catalogs, self._key, self._commit, self.reads = catalogs, key, commit, 0

    def __call__(self) -> Any:
        self.reads += 1
        if self.reads == 2:
            self._commit()
        return load_table(self._catalogs.get("lake"), self._key)


def checked(
    spark: SparkSession,
    catalogs: CatalogSet,
    key: TableKey,
    action: RecommendedAction,
    commit: Callable[[], Any] = lambda: None,
) -> ActionResult:
    """`action` run on Spark and checked, with `commit` made between the action and its check."""
    verifier = CommitVerifier(CommitBeforeTheCheck(catalogs, key, commit), key, [action])
    [result] = MaintenanceRunner(spark, "lake").run(key, [action], commit_check=verifier)
    return result


def unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Every version read before reads the same now (expired ones aside)."""
    assert {v: n for v, n in after.items() if v in before} == {v: before[v] for v in after if v in before}


def test_data_rewrite_that_keeps_every_row_passes_and_one_that_drops_a_file_is_violated(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    good = make_table(catalogs, table_key(namespace, "rewrite_holds"), commits=4)
    before = contents_by_version(spark, good)
    held = checked(spark, catalogs, good, REWRITE)
    assert held.status == "succeeded", held.error
    unchanged(before, contents_by_version(spark, good))

    bad = make_table(catalogs, table_key(namespace, "rewrite_breaks"), commits=4)
    before = contents_by_version(spark, bad)
    lost: list[int] = []
    broken = checked(
        spark,
        catalogs,
        bad,
        REWRITE,
        lambda: lost.append(commit_dropping_a_data_file(spark, bad, a_data_file(spark, bad))),
    )
    assert broken.status == "violated"
    error = broken.error or ""
    assert f"table {bad.text}: rewrite_data_files committed what it may not change" in error
    assert f"lost {lost[0]} record(s) where at most 0 deleted record(s) could be applied" in error
    assert "removed 5 file(s) (deleted-data-files) where the procedure reports 4 rewritten" in error
    assert "Metadata before: " in error and f"icepack rollback {bad.text}" in error
    after = contents_by_version(spark, bad)
    unchanged({v: n for v, n in before.items() if v != MAIN}, after)
    assert after[MAIN][0] == before[MAIN][0] - lost[0]  # the faulty commit's loss, and only it


def test_a_violation_during_maintenance_pauses_the_table_and_alerts(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    key = make_table(catalogs, table_key(namespace, "paused"), commits=4, partitions=2)
    victim = a_data_file(spark, key, "p = 1")
    before = contents_by_version(spark, key)
    only_p0 = make_recommendation(
        make_action(A.REWRITE_DATA_FILES, **{"min-input-files": "2", "where": "p = 0"}), table=key.text
    )
    with StalledTaskSlots(spark, tmp_path / "release") as stall:
        thread, outcome = run_in_thread(lambda: engine.maintain(key, recommendation=only_p0))
        stall.wait_for_other_job()
        lost = commit_dropping_a_data_file(spark, key, victim)  # a faulty replace lands meanwhile
        stall.release()
        report = finished(thread, outcome)

    assert report.outcome == "violated" and _exit_code({report.outcome}, False) == EXIT_VIOLATED
    assert f"lost {lost} record(s)" in (report.first_error or "")
    history = engine.history(key)
    assert history.quarantined and history.violation == report.first_error
    waiting = engine.recommend(key, force=True)
    assert waiting.actions == () and waiting.skipped[0].reason.startswith("quarantined")
    alert, _ = judge_streak(key.text, history, None, failing_after=2, quarantine_after=3)
    assert alert is not None and "broke an invariant" in alert.text and f"lost {lost}" in alert.text
    after = contents_by_version(spark, key)
    unchanged({v: n for v, n in before.items() if v != MAIN}, after)
    assert after[MAIN][0] == before[MAIN][0] - lost

    restored = engine.rollback(key)  # the faulty replace and the rewrite both landed while it ran
    assert restored.done and restored.restore_to == report.snapshot_id and len(restored.undone) == 2
    assert contents_by_version(spark, key)[MAIN] == before[MAIN]
    assert engine.history(key).quarantined  # still paused: a person releases it


def test_a_concurrent_append_is_the_other_writer_s_and_no_violation(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    key = make_table(catalogs, table_key(namespace, "appended_meanwhile"), commits=4)
    before = contents_by_version(spark, key)
    with StalledTaskSlots(spark, tmp_path / "release") as stall:
        compaction = make_recommendation(REWRITE, table=key.text)
        thread, outcome = run_in_thread(lambda: engine.maintain(key, recommendation=compaction))
        stall.wait_for_other_job()
        append_rows(catalogs, key, 1000, 1010)
        stall.release()
        report = finished(thread, outcome)
    assert report.outcome == "succeeded", report.first_error
    after = contents_by_version(spark, key)
    unchanged({v: n for v, n in before.items() if v != MAIN}, after)
    assert after[MAIN][0] == before[MAIN][0] + 10


def test_a_table_created_again_while_its_action_ran_is_a_conflict_and_the_new_table_is_untouched(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    """Dropped and created again under its name between the action and its check: the action committed
    to the former table, and the new one's metadata is not judged against the former one's (that
    would report a violation no action made, and pause a table nobody maintained)."""
    key = make_table(catalogs, table_key(namespace, "created_again"), commits=4)
    catalog = catalogs.get("lake")
    new_table: dict[str, Any] = {}

    def create_again() -> None:
        schema = catalog.load_table(key.identifier).schema()
        catalog.drop_table(key.identifier)
        catalog.create_table(key.identifier, schema)
        append_rows(catalogs, key, 500, 507)
        table = catalog.load_table(key.identifier)
        new_table.update(uuid=str(table.metadata.table_uuid), contents=arrow_fingerprint(table))

    result = checked(spark, catalogs, key, REWRITE, create_again)
    assert result.status == "conflict", (result.status, result.error)
    reason = result.reason or ""
    assert f"table {key.text} was dropped and created again while rewrite_data_files ran" in reason
    assert f"now {new_table['uuid']}" in reason
    assert result.impact.data_files_after is None  # no numbers comparing two tables
    table = catalog.load_table(key.identifier)
    assert str(table.metadata.table_uuid) == new_table["uuid"] and len(table.metadata.snapshots) == 1
    assert arrow_fingerprint(table) == new_table["contents"] == (7, new_table["contents"][1])


def test_manifest_rewrite_keeps_the_live_files_and_one_that_loses_a_file_is_violated(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    manifests = make_action(A.REWRITE_MANIFESTS)
    good = make_table(catalogs, table_key(namespace, "manifests_hold"), commits=4)
    before = contents_by_version(spark, good)
    held = checked(spark, catalogs, good, manifests)
    assert held.status == "succeeded", held.error
    unchanged(before, contents_by_version(spark, good))

    bad = make_table(catalogs, table_key(namespace, "manifests_break"), commits=4)
    broken = checked(
        spark,
        catalogs,
        bad,
        manifests,
        lambda: commit_dropping_a_data_file(spark, bad, a_data_file(spark, bad)),
    )
    assert broken.status == "violated"
    assert "totals changed (total-records, total-data-files)" in (broken.error or "")
    assert "live files changed by snapshot " in (broken.error or "") and " 1 gone" in (broken.error or "")


def test_expiry_keeps_what_retention_keeps_and_one_that_removes_a_kept_snapshot_is_violated(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    for name, breaks in (("expiry_holds", False), ("expiry_breaks", True)):
        key = make_table(catalogs, table_key(namespace, name), commits=5)
        q = qualified_table("lake", key)
        history = spark.sql(f"SELECT snapshot_id FROM {q}.history ORDER BY made_current_at").collect()
        ids = [r[0] for r in history]
        spark.sql(f"ALTER TABLE {q} CREATE TAG kept AS OF VERSION {ids[1]}")
        wait_past_newest_snapshot(catalogs, key)
        cutoff = datetime.now(UTC).replace(microsecond=0).isoformat()
        expiry = make_action(A.EXPIRE_SNAPSHOTS, older_than=cutoff, retain_last="2")
        before = contents_by_version(spark, key)
        fault = (lambda k=key, s=ids[3]: expire_snapshot_by_id(spark, k, s)) if breaks else (lambda: None)
        result = checked(spark, catalogs, key, expiry, fault)
        remaining = {r[0] for r in spark.sql(f"SELECT snapshot_id FROM {q}.snapshots").collect()}
        unchanged(before, contents_by_version(spark, key))
        if not breaks:
            assert result.status == "succeeded", result.error
            assert remaining == {ids[1], ids[3], ids[4]}  # the tag's, and the newest two of main
        else:
            assert result.status == "violated"
            assert f"1 snapshot(s) the retention keeps were removed: {ids[3]}" in (result.error or "")
            assert remaining == {ids[1], ids[4]}


def test_orphan_removal_keeps_every_referenced_file_and_a_referenced_file_gone_is_violated(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    orphans = make_action(A.REMOVE_ORPHAN_FILES, older_than=THREE_DAYS_AGO)
    good = make_table(catalogs, table_key(namespace, "orphans_hold"), commits=2)
    age_files(table_dir(catalogs, good))
    before = contents_by_version(spark, good)
    held = checked(spark, catalogs, good, orphans)
    assert held.status == "succeeded", held.error
    unchanged(before, contents_by_version(spark, good))

    bad = make_table(catalogs, table_key(namespace, "orphans_break"), commits=2)
    age_files(table_dir(catalogs, bad))
    referenced = local(a_data_file(spark, bad))
    broken = checked(spark, catalogs, bad, orphans, lambda: os.remove(referenced))
    assert broken.status == "violated"
    assert "1 file(s) a snapshot references no longer exist" in (broken.error or "")
    assert referenced.name in (broken.error or "")


def test_delete_rewrite_that_keeps_every_row_passes_and_one_that_drops_a_data_file_is_violated(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    deletes = make_action(A.REWRITE_POSITION_DELETE_FILES, **{"rewrite-all": "true"})
    for name, breaks in (("deletes_hold", False), ("deletes_break", True)):
        key = make_table(
            catalogs,
            table_key(namespace, name),
            commits=3,
            properties={**MOR_V2, "write.delete.granularity": "partition"},
        )
        for ids in ([1, 2], [3, 12]):  # two delete files on each data file: worth merging
            commit_position_deletes(spark, key, locate_rows(spark, key, ids))
        before = contents_by_version(spark, key)
        fault = (
            (lambda k=key: commit_dropping_a_data_file(spark, k, a_data_file(spark, k, "id >= 20")))
            if breaks
            else (lambda: None)
        )  # the third file: no delete points at it
        result = checked(spark, catalogs, key, deletes, fault)
        after = contents_by_version(spark, key)
        if not breaks:
            assert result.status == "succeeded", result.error
            assert result.impact.procedure_output["rewritten_delete_files_count"] == 3
            unchanged(before, after)
        else:
            assert result.status == "violated"
            assert "removed 1 data file(s); this rewrite removes none" in (result.error or "")
            assert "where at most 0 deleted record(s) could be applied" in (result.error or "")
            unchanged({v: n for v, n in before.items() if v != MAIN}, after)


def test_row_lineage_carried_over_passes_and_next_row_id_going_backwards_is_violated(
    spark: SparkSession, catalogs: CatalogSet, namespace: str
) -> None:
    """v3: the fault is a catalog commit of a metadata file whose next-row-id went back, the way an old
    runtime that drops row lineage writes one."""
    manifests = make_action(A.REWRITE_MANIFESTS)
    for name, breaks in (("lineage_holds", False), ("lineage_breaks", True)):
        key = TableKey(catalog="lake", namespace=(namespace,), name=name)
        q = qualified_table("lake", key)
        spark.sql(f"CREATE TABLE {q} (id bigint) USING iceberg TBLPROPERTIES ('format-version'='3')")
        for start in (0, 10, 20):
            spark.sql(f"INSERT INTO {q} SELECT id FROM range({start}, {start + 10})")
        before = contents_by_version(spark, key)
        fault = (lambda k=key: lower_next_row_id(catalogs, k)) if breaks else (lambda: None)
        result = checked(spark, catalogs, key, manifests, fault)
        unchanged(before, contents_by_version(spark, key))
        if not breaks:
            assert result.status == "succeeded", result.error
        else:
            assert result.status == "violated"
            assert "next-row-id went backwards: 30 before, 0 after" in (result.error or "")


def lower_next_row_id(catalogs: CatalogSet, key: TableKey) -> None:
    """Commits, through the SQL catalog's own table, a copy of the current metadata file with its
    next-row-id set to 0."""
    catalog = catalogs.get("lake")
    current = catalog.load_table(key.identifier).metadata_location
    document = json.loads(local(current).read_text())
    document["next-row-id"] = 0
    replacement = local(current).with_name(f"99999-{uuid.uuid4()}.metadata.json")
    replacement.write_text(json.dumps(document))
    with catalog.engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE iceberg_tables SET metadata_location = :new, previous_metadata_location = :old "
                "WHERE table_name = :name AND metadata_location = :old"
            ),
            {"new": f"file:{replacement}", "old": current, "name": key.name},
        )
