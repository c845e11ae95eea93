"""Contract: the circuit breakers trip on real rewrites recorded in a real history, and lift.
- Same files rewritten: a compaction that does not converge (its real prediction, run with
  `rewrite-all`, a test-only stand-in for a planner that keeps asking) rewrites the same data three times
  in a row; the next recommendation, even a forced one, pauses the rewrite and names the breaker and the
  numbers from the procedures' own output; a writer's commit means new data and lifts it, and a
  person's release lifts every breaker of the table.
- Fleet daily budget: once the deployment's rewrites of the UTC day reach it, the next maintenance holds
  the rewrite (skipped, never failed) and says today's total; the next day, or a larger budget, lifts it.
Every snapshot, branch and tag reads as before each time (Spark reading every version)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icepack_dagster.config.platform import PlatformSettings
from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.clock import utc_now
from icepack_dagster.domain.recommendation.circuit_breakers import BREAKER, SAME_FILES, tripped_breaker
from icepack_dagster.domain.recommendation.model import Recommendation
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.history_store import HistoryStore
from tests.factories import settings_with_platform
from tests.polling import wait_until
from tests.tables_testkit import append_rows, contents_by_version, kept_versions, make_table, table_key

pytestmark = pytest.mark.spark

REWRITE = MaintenanceAction.REWRITE_DATA_FILES
COOL = {"format-version": "2", "icepack.compaction.hot-minutes": "0"}  # no partition is left out as hot


def _looping(engine: Engine, recommendation: Recommendation) -> Recommendation:
    """The recommendation's rewrite (with its real prediction) rewriting every file: what a planner that
    never converges would ask for."""
    [rewrite] = [a for a in recommendation.actions if a.action is REWRITE]
    forced = rewrite.model_copy(update={"options": {**rewrite.options, "rewrite-all": "true"}})
    return recommendation.model_copy(update={"actions": (forced,), "skipped": ()})


def _skip_reason(recommendation: Recommendation) -> str:
    return {s.action: s.reason for s in recommendation.skipped}.get(REWRITE, "")


def test_the_same_data_rewritten_three_times_pauses_compaction_until_new_data_or_a_release(
    spark: SparkSession, catalogs: CatalogSet, engine: Engine, namespace: str
) -> None:
    key = table_key(namespace, "looping")
    make_table(catalogs, key, commits=6, partitions=2, rows_per_commit=200, properties=COOL)
    q = f"lake.{namespace}.looping"
    spark.sql(f"ALTER TABLE {q} CREATE TAG before_maintenance")
    spark.sql(f"ALTER TABLE {q} CREATE BRANCH audit")
    loop = _looping(engine, engine.recommend(key))
    before = contents_by_version(spark, key)

    for _ in range(3):
        report = engine.maintain(key, recommendation=loop)
        assert report.outcome == "succeeded", report.results
        assert report.results[0].predicted_actual is not None
    after = contents_by_version(spark, key)
    assert kept_versions(before, after) and after["'main'"] == before["'main'"]

    history = engine.history(key)
    assert len(history.recent_rewrites) == 3
    files = ", ".join(str(r.files_rewritten) for r in reversed(history.recent_rewrites))
    paused = engine.recommend(key, force=True)  # a forced run passes the cadence, never a breaker
    reason = _skip_reason(paused)
    assert reason.startswith(f"{BREAKER}same files rewritten) tripped: rewrite_data_files rewrote this "
                             f"table 3 times in a row in the last 24 h ({files} files, "), reason
    assert f"icepack quarantine release {key.text}" in reason
    assert REWRITE not in {a.action for a in paused.actions}
    held = engine.maintain(key, recommendation=paused, only=[REWRITE])
    assert held.outcome == "nothing_to_do" and held.results[0].reason == reason

    append_rows(catalogs, key, 10_000, 10_200, partitions=2)  # a writer's commit: new data to compact
    assert tripped_breaker(_skip_reason(engine.recommend(key, force=True))) != SAME_FILES
    engine.release_quarantine(key)  # a person lifts every breaker: the history counts from the release
    assert engine.history(key).recent_rewrites == ()
    assert not _skip_reason(engine.recommend(key, force=True)).startswith(BREAKER)
    final = contents_by_version(spark, key)  # every version as before; main with the writer's rows
    assert kept_versions({v: n for v, n in before.items() if v != "'main'"}, final)
    assert final["'main'"][0] == before["'main'"][0] + 200

def test_the_fleet_s_daily_budget_holds_rewrites_until_the_day_rolls(
    spark: SparkSession, settings: IcepackSettings, catalogs: CatalogSet, namespace: str, tmp_path: Path
) -> None:
    def engine_with(budget: int | None) -> Engine:
        platform = settings.platform.model_copy(update={"daily_rewrite_budget_bytes": budget})
        budgeted = settings_with_platform(settings, PlatformSettings.model_validate(platform.model_dump()))
        return Engine(budgeted, catalogs, spark_provider=lambda: spark, history=history)

    history = HistoryStore(f"sqlite:///{tmp_path / 'state.db'}")
    # the budget is per UTC day: start the test far enough from midnight that one day holds it
    wait_until(lambda: utc_now().hour < 23 or utc_now().minute < 55, "the day to roll", 400, 1)
    first = make_table(catalogs, table_key(namespace, "first"), commits=9, properties=COOL)
    second = make_table(catalogs, table_key(namespace, "second"), commits=9, properties=COOL)
    before = contents_by_version(spark, second)
    report = engine_with(None).maintain(first, only=[REWRITE])
    assert report.outcome == "succeeded", report.results
    [done] = [r.predicted_actual.done for r in report.results if r.predicted_actual is not None]
    assert done is not None and done.bytes_in
    spent = done.bytes_in

    engine = engine_with(spent)  # a budget the first table's compaction used up
    budget = engine.rewrite_budget()
    assert budget is not None and budget.reached and budget.rewritten_bytes == spent
    held = engine.maintain(second, only=[REWRITE])
    [result] = [r for r in held.results if r.action is REWRITE]
    assert held.outcome != "failed" and result.status == "skipped"
    assert (result.reason or "").startswith(f"{BREAKER}fleet daily budget) tripped: this deployment's ")
    assert budget.describe() in (result.reason or "")
    assert "held, not failed, until the day rolls at 00:00 UTC" in (result.reason or "")
    assert contents_by_version(spark, second) == before  # nothing rewritten

    tomorrow = utc_now() + timedelta(days=1)
    assert [a.action for a in engine.recommend(second, now=tomorrow).actions][:1] == [REWRITE]
    raised = engine_with(spent * 100)  # or an operator raises the budget
    report = raised.maintain(second, only=[REWRITE])
    assert report.outcome == "succeeded", report.results
    assert kept_versions(before, contents_by_version(spark, second))
