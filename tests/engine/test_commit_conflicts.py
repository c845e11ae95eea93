"""Contract: a maintenance whose commit conflicts with a concurrent writer is a `conflict`, not a
failure: with a real writer committing row-level deletes between the rewrite's planning and its commit,
the maintenance commits nothing, its outcome is `conflict` (`icepack maintain` exits 7), the table's
history counts no failure (so a table written all the time is never quarantined for it) and one
conflict, every snapshot and ref reads as before, and the next recommendation waits for a quieter
moment, naming the table's commit cadence read from its snapshots. Once the table has been quiet for
its cadence, the maintenance runs and compacts with the deletes applied."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.cli.context import EXIT_CONFLICT
from icepack_dagster.cli.maintain_command import _exit_code
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
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
