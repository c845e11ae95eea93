"""Contract: one maintenance per table holds across the CLI and the platform, and a crashed holder
never blocks a table for good.

Every maintenance takes the table's lease in the state database first. While another holder (here a
platform run, as a lease row) has it, `icepack maintain` runs nothing and exits 5 (`deferred`, naming
the holder), and the engine defers as well; released, the same maintenance runs with contents unchanged.
A holder that stopped renewing (crashed) loses the lease at expiry. Concurrent takers on SQLite and
PostgreSQL: exactly one wins. A holder's heartbeat keeps its lease alive while it works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.sql.procedures import qualified_table
from icepack_dagster.engine import Engine
from icepack_dagster.exceptions import TableLeaseHeldError
from icepack_dagster.iceberg.catalogs import CatalogSet
from icepack_dagster.store.table_lease import TableLeases, table_leases
from tests.conftest import PG_HOST, PG_PORT, PG_USER, fresh_database
from tests.polling import wait_until
from tests.tables_testkit import make_table, table_fingerprint, table_key

ICEPACK = str(Path(sys.executable).parent / "icepack")
ONLY_COMPACTION = {
    "format-version": "2",
    "icepack.action.rewrite_manifests.enabled": "false",
    "icepack.action.expire_snapshots.enabled": "false",
    "icepack.action.remove_orphan_files.enabled": "false",
}


@pytest.mark.spark
def test_a_held_table_is_deferred_by_the_cli_and_the_engine_until_released(
    spark, catalogs: CatalogSet, engine: Engine, settings: IcepackSettings, namespace: str  # type: ignore[no-untyped-def]
) -> None:
    key = make_table(catalogs, table_key(namespace, "leased"), commits=8, properties=ONLY_COMPACTION)
    q = qualified_table("lake", key)
    before = table_fingerprint(spark, q)
    files = spark.sql(f"SELECT count(*) FROM {q}.files").collect()[0][0]
    leases = TableLeases(settings.resolved_state_url, timedelta(minutes=10))
    token = leases.acquire(key.text, "dagster run 4f2a")

    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    catalog = json.dumps({"lake": {"kind": "embedded"}})
    env |= {"ICEPACK_HOME": str(settings.home), "ICEPACK_CATALOGS": catalog}
    done = subprocess.run([ICEPACK, "maintain", f"{namespace}.leased", "--json"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 5, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "deferred" and "dagster run 4f2a" in json.dumps(report)
    deferred = engine.maintain(key)
    assert deferred.outcome == "deferred"
    assert spark.sql(f"SELECT count(*) FROM {q}.files").collect()[0][0] == files, "it ran while held"

    leases.release(key.text, token)
    done_report = engine.maintain(key, only=[MaintenanceAction.REWRITE_DATA_FILES])
    assert done_report.outcome == "succeeded", done_report
    assert spark.sql(f"SELECT count(*) FROM {q}.files").collect()[0][0] < files
    assert table_fingerprint(spark, q) == before
    with create_engine(settings.resolved_state_url).connect() as connection:
        left = connection.execute(select(table_leases).where(table_leases.c.table_key == key.text)).all()
    assert left == [], "the lease was not given back"


def test_a_crashed_holders_lease_expires(tmp_path: Path) -> None:
    leases = TableLeases(f"sqlite:///{tmp_path / 'state.db'}", timedelta(minutes=10))
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    leases.acquire("lake.sales.orders", "pid 4242 on a node that died", now=an_hour_ago)
    token = leases.acquire("lake.sales.orders", "the next maintenance")
    with pytest.raises(TableLeaseHeldError, match="the next maintenance"):
        leases.acquire("lake.sales.orders", "a third")
    assert not leases.renew("lake.sales.orders", "the crashed holder's token")
    assert leases.renew("lake.sales.orders", token)


@pytest.mark.postgres
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_exactly_one_of_many_concurrent_takers_wins(database: str, tmp_path: Path) -> None:
    def race(url: str) -> None:
        leases = TableLeases(url, timedelta(minutes=10))
        start = threading.Barrier(8)
        won: list[str] = []
        refused: list[str] = []

        def take(n: int) -> None:
            start.wait()
            try:
                won.append(leases.acquire("lake.sales.orders", f"taker {n}"))
            except TableLeaseHeldError as error:
                refused.append(str(error))

        threads = [threading.Thread(target=take, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(won) == 1 and len(refused) == 7, (won, refused)

    if database == "sqlite":
        race(f"sqlite:///{tmp_path / 'state.db'}")
    else:
        with fresh_database("icepack_lease") as name:
            race(f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}")


def test_the_heartbeat_keeps_a_working_holders_lease(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    leases = TableLeases(url, timedelta(seconds=0.6))
    reader = create_engine(url)

    def expiry() -> datetime:
        with reader.connect() as connection:
            return connection.execute(select(table_leases.c.expires_at)).scalar_one()

    with leases.hold("lake.sales.orders", "a long compaction"):
        first = expiry()
        wait_until(lambda: expiry() > first, "the heartbeat to renew the lease", timeout=30, every=0.05)
    reader.dispose()
