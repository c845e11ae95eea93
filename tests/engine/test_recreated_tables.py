"""Contract: a table dropped and created again under its name is a new table to the engine as soon as
the engine reads it (`icepack maintain`, `icepack status`, a maintenance run): the former table's
recent compaction no longer holds the new one's back by cadence, nor its violation by a pause; the
former history stays readable under `name@former-uuid`. A table read again unchanged keeps its history.
Real Iceberg tables in the embedded catalog."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import ActionResult, MaintenanceAction
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.outcomes.maintenance_report import MaintenanceReport
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.iceberg.incremental_status.summary_status import summary_status
from icepack_dagster.iceberg.status_reader import read_status
from icepack_dagster.store.history_store import HistoryStore
from icepack_dagster.store.table_identities import set_aside_name
from tests.defs.dagster_testkit import small_file_table

REWRITE = MaintenanceAction.REWRITE_DATA_FILES


@pytest.fixture
def engine(settings: IcepackSettings, catalogs: CatalogSet, tmp_path: Path) -> Engine:
    """An engine with a history of its own; no Spark: nothing here runs maintenance."""
    return Engine(settings, catalogs, history=HistoryStore(f"sqlite:///{tmp_path / 'state.db'}"))


def _report(table: str, status: str, hours_ago: float) -> MaintenanceReport:
    at = datetime.now(UTC) - timedelta(hours=hours_ago)
    result = ActionResult(
        action=REWRITE, status=status, statements=("CALL ...",), duration_seconds=1.0,
        error="replace removed 1 file it did not plan" if status == "violated" else None,
    )
    ended = at + timedelta(seconds=1)
    return MaintenanceReport(table=table, started_at=at, finished_at=ended, results=(result,))


def test_a_table_created_again_is_judged_on_a_history_of_its_own(
    engine: Engine, catalogs: CatalogSet, namespace: str
) -> None:
    lake = catalogs.get("lake")
    key = TableKey(catalog="lake", namespace=(namespace,), name="orders")
    former = small_file_table(lake, f"{namespace}.orders", appends=12)
    assert engine.status(key).table_uuid == str(former.metadata.table_uuid)
    engine.record(_report(key.text, "succeeded", hours_ago=2))
    engine.record(_report(key.text, "violated", hours_ago=1))
    held = engine.recommend(key)
    assert engine.history(key).violation is not None and not held.needs_work
    assert engine.status(key).table_uuid == str(former.metadata.table_uuid)
    assert engine.history(key).violation is not None, "read again unchanged: the same table, its history"

    lake.drop_table(f"{namespace}.orders")
    again = small_file_table(lake, f"{namespace}.orders", appends=12)
    status = engine.status(key)

    assert status.table_uuid == str(again.metadata.table_uuid) != str(former.metadata.table_uuid)
    fresh = engine.history(key)
    assert (fresh.violation, fresh.last_succeeded, fresh.last_run_at) == (None, {}, None)
    assert REWRITE in [action.action for action in engine.recommend(key, status=status).actions]
    aside = engine.history_store.history(set_aside_name(key.text, str(former.metadata.table_uuid)), 3)
    assert aside.violation is not None and REWRITE in aside.last_succeeded


def test_the_status_from_summaries_never_starts_from_the_former_table(
    catalogs: CatalogSet, namespace: str
) -> None:
    """The new table's commits could look like appends after the former one's snapshot only by chance,
    but its figures must never be carried from the former table: it is read in full, and says why."""
    lake = catalogs.get("lake")
    key = TableKey(catalog="lake", namespace=(namespace,), name="events")
    small_file_table(lake, f"{namespace}.events", appends=2)
    known = read_status(lake.load_table(key.identifier), key, HealthThresholds(), datetime.now(UTC))
    lake.drop_table(f"{namespace}.events")
    again = small_file_table(lake, f"{namespace}.events", appends=3)

    reason = summary_status(again, key, known, HealthThresholds(), datetime.now(UTC))

    assert reason == f"the table was created again under its name (its UUID was {known.table_uuid})"
