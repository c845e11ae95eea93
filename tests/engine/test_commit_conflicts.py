"""Contract: a maintenance whose commit conflicts with a concurrent writer is a `conflict`, not a
failure: with a real writer committing row-level deletes between the rewrite's planning and its commit,
the maintenance commits nothing, its outcome is `conflict` (`icepack maintain` exits 7), the table's
history counts no failure (so a table written all the time is never quarantined for it) and one
conflict, every snapshot and ref reads as before, and the next recommendation waits for a quieter
moment, naming the table's commit cadence read from its snapshots. Once the table has been quiet for
its cadence, the maintenance runs and compacts with the deletes applied.

After two real conflicts in a row on a partitioned table (each a maintenance that a writer deleting rows
in partitions p=0 and p=1 beat to the commit), the next compaction narrows to the colder partitions:
at a moment when the policy's hot window (60 minutes) would leave nothing out, the window widened to
120 minutes leaves out exactly the partitions the writer wrote, the reason says so, and the maintenance
commits without touching their files, every snapshot and ref reading as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.cli.context import EXIT_CONFLICT
from icepack_dagster.cli.maintain_command import _exit_code
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.recommendation.recommender import recommend
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from tests.compaction_testkit import files_by_partition
from tests.engine.safety_testkit import (
    MOR_V2,
    StalledTaskSlots,
    commit_position_deletes,
    finished,
    locate_rows,
    run_in_thread,
)
from tests.factories import make_action, make_recommendation
from tests.tables_testkit import (
    contents_by_version,
    kept_versions,
    make_table,
    table_key,
)

pytestmark = pytest.mark.spark

REWRITE = MaintenanceAction.REWRITE_DATA_FILES
MAIN = "'main'"  # how `contents_by_version` names the main branch


def test_a_commit_conflict_is_its_own_outcome_and_never_a_failure(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    key = make_table(catalogs, table_key(namespace, "streamed"), commits=4, properties=MOR_V2)
    doomed = locate_rows(spark, key, [3, 15, 27])
    compaction = make_recommendation(make_action(REWRITE, **{"min-input-files": "2"}), table=key.text)
    before = contents_by_version(spark, key)

    with StalledTaskSlots(spark, tmp_path / "release") as stall:
        thread, outcome = run_in_thread(lambda: engine.maintain(key, recommendation=compaction))
        stall.wait_for_other_job()
        deleted = commit_position_deletes(spark, key, doomed)  # the other writer commits meanwhile
        stall.release()
        report = finished(thread, outcome)

    assert report.outcome == "conflict" and _exit_code({report.outcome}, False) == EXIT_CONFLICT
    [result] = report.results
    assert result.status == "conflict" and result.error is None
    assert "concurrent commit" in (result.reason or "") and "committed nothing" in (result.reason or "")
    assert catalogs.get("lake").load_table(key.identifier).metadata.current_snapshot_id == deleted
    after_writer = contents_by_version(spark, key)  # every snapshot and ref as the writer left it:
    assert set(after_writer) == {*before, str(deleted)} and after_writer[MAIN] == after_writer[str(deleted)]
    assert {v: after_writer[v] for v in before if v != MAIN} == {v: n for v, n in before.items() if v != MAIN}
    assert after_writer[MAIN][0] == before[MAIN][0] - 3

    history = engine.history(key)
    assert (history.consecutive_failures, history.quarantined, history.consecutive_conflicts) == (0, False, 1)
    assert (history.last_conflict or "").startswith("rewrite_data_files: conflict: ")

    waiting = engine.recommend(key, now=history.last_conflict_at)  # right after the conflict
    assert waiting.actions == ()
    reason = waiting.skipped[0].reason
    assert reason.startswith("waiting for a quieter moment") and "the table commits every" in reason

    quiet = datetime.now(UTC) + timedelta(hours=1)  # an hour without commits: quieter than its cadence
    again = engine.maintain(key, recommendation=engine.recommend(key, now=quiet), only=[REWRITE])
    assert again.outcome == "succeeded", again.results
    assert contents_by_version(spark, key)[MAIN] == after_writer[MAIN]
    assert engine.history(key).consecutive_conflicts == 0


def commit_ms(catalogs: CatalogSet, key: TableKey) -> dict[int, int]:
    """Each snapshot's commit time (ms), as Iceberg recorded it."""
    metadata = catalogs.get(key.catalog).load_table(key.identifier).metadata
    return {s.snapshot_id: s.timestamp_ms for s in metadata.snapshots}


def conflicting_maintenance(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, key: TableKey, ids: list[int], flag: Path
) -> int:
    """A maintenance of the table's recommended compaction (recommended two hours after its newest
    commit, past any wait) while a writer deletes the rows `ids`; returns the writer's snapshot id."""
    doomed = locate_rows(spark, key, ids)
    later = datetime.fromtimestamp(max(commit_ms(catalogs, key).values()) / 1000, UTC) + timedelta(hours=2)
    planned = engine.recommend(key, now=later)
    with StalledTaskSlots(spark, flag) as stall:
        thread, outcome = run_in_thread(lambda: engine.maintain(key, recommendation=planned, only=[REWRITE]))
        stall.wait_for_other_job()
        deleted = commit_position_deletes(spark, key, doomed)
        stall.release()
        report = finished(thread, outcome)
    assert report.outcome == "conflict", report.results
    assert catalogs.get(key.catalog).load_table(key.identifier).metadata.current_snapshot_id == deleted
    return deleted


def test_after_conflicts_in_a_row_compaction_leaves_the_writers_partitions_out(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    key = table_key(namespace, "streamed_parts")
    make_table(catalogs, key, commits=4, partitions=4, properties=MOR_V2)
    initial = contents_by_version(spark, key)
    cold_written = max(commit_ms(catalogs, key).values())
    first = conflicting_maintenance(spark, catalogs, engine, key, [0, 1, 4, 5], tmp_path / "first")
    second = conflicting_maintenance(spark, catalogs, engine, key, [8, 9, 12, 13], tmp_path / "second")
    history = engine.history(key)
    assert (history.consecutive_conflicts, history.consecutive_failures) == (2, 0)

    # now: the widened window (120 minutes) starts halfway between the last write of p=2 and p=3 and the
    # writer's first commit; the policy's (60 minutes) starts an hour after that, past every commit
    written = commit_ms(catalogs, key)
    boundary = (cold_written + written[first]) // 2
    now = datetime.fromtimestamp(boundary / 1000, UTC) + timedelta(minutes=120)
    assert max(written.values()) < boundary + 60 * 60 * 1000  # the policy's window holds no commit
    status = engine.status(key)
    policy = engine.policy(key, status.properties).policy
    no_conflicts = history.model_copy(update={"consecutive_conflicts": 0})  # what the base window plans
    unwidened = recommend(status, engine.health(status), policy, no_conflicts, now)
    [whole] = [a for a in unwidened.actions if a.action is REWRITE]
    assert whole.prediction is not None and whole.prediction.excluded_hot_partitions == ()
    assert {g.partition for g in whole.prediction.groups} == {"p=0", "p=1", "p=2", "p=3"}

    recommendation = engine.recommend(key, now=now)
    [narrowed] = [a for a in recommendation.actions if a.action is REWRITE]
    assert narrowed.prediction is not None and "where" in narrowed.options
    assert narrowed.prediction.excluded_hot_partitions == ("p=0", "p=1")
    assert {g.partition for g in narrowed.prediction.groups} == {"p=2", "p=3"}
    assert (
        "partitions written in the last 120 minutes (widened from 60 after 2 maintenances in a row "
        "conflicted with a concurrent writer) are left out: p=0, p=1"
    ) in narrowed.reason

    files_before, contents_before = files_by_partition(spark, key), contents_by_version(spark, key)
    report = engine.maintain(key, recommendation=recommendation, only=[REWRITE])
    assert report.outcome == "succeeded", report.results
    files_after, contents_after = files_by_partition(spark, key), contents_by_version(spark, key)
    hot = {p for p in files_before if p.endswith(("{0}", "{1}"))}
    assert len(hot) == 2 and {p: files_after[p] for p in hot} == {p: files_before[p] for p in hot}
    assert all(len(files_after[p]) == 1 < len(files_before[p]) for p in files_before if p not in hot)
    assert kept_versions(contents_before, contents_after)
    snapshots = {v for v in initial if v != MAIN}  # the table's first snapshots, as they were made
    assert {v: contents_after[v] for v in snapshots} == {v: initial[v] for v in snapshots}
    assert contents_after[MAIN][0] == initial[MAIN][0] - 8  # only the writer's deletes
    assert contents_after[MAIN] == contents_before[MAIN] == contents_before[str(second)]
    assert engine.history(key).consecutive_conflicts == 0
