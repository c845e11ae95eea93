"""Contract: a catalog that stops answering defers maintenance; it is never the table's failure.

A PostgreSQL-backed Iceberg catalog on a private PostgreSQL server is stopped for real. Loading the table
is retried with backoff; when every attempt fails, maintenance reports `deferred` (the CLI exits 5),
nothing runs, nothing is recorded, so no failure counts towards quarantine. Once the server is back the
table is there with the same contents. What only a bug raises is told apart from a passing outage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import requests
import sqlalchemy
import sqlalchemy.exc

from icepack_dagster.config.settings import IcepackSettings, load_settings
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.iceberg.catalog_errors import (
    RETRY_DELAYS_SECONDS,
    is_programming_error,
    is_transient,
    with_retries,
)
from tests.private_postgres import PrivatePostgres
from tests.tables_testkit import arrow_fingerprint

pytestmark = pytest.mark.postgres

ICEPACK = str(Path(sys.executable).parent / "icepack")


@pytest.fixture
def private_server() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    server.start()
    server.create_database("lake")
    try:
        yield server
    finally:
        server.destroy()


def _catalog(server: PrivatePostgres, home: Path) -> dict[str, object]:
    return {"kind": "postgres", "host": "127.0.0.1", "port": server.port, "database": "lake",
            "user": "postgres", "warehouse": str(home / "warehouse")}


def test_a_catalog_down_through_every_retry_defers_maintenance(
    private_server: PrivatePostgres, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    settings: IcepackSettings = load_settings(home=home, catalogs={"pgcat": _catalog(private_server, home)})
    engine = Engine(settings)
    catalog = engine.catalogs.get("pgcat")
    catalog.create_namespace("sales")
    table = catalog.create_table(("sales", "orders"), schema=pa.schema([("id", pa.int64())]))
    for batch in range(3):
        table.append(pa.table({"id": list(range(batch * 10, batch * 10 + 10))}))
    key = TableKey(catalog="pgcat", namespace=("sales",), name="orders")
    before = arrow_fingerprint(catalog.load_table(key.identifier))

    private_server.stop()
    started = time.monotonic()
    report = engine.maintain(key)
    assert time.monotonic() - started >= sum(RETRY_DELAYS_SECONDS), "it did not wait between retries"
    assert report.outcome == "deferred"
    assert report.results and {r.status for r in report.results} == {"deferred"}
    reason = report.results[0].reason or ""
    assert key.text in reason and f"after {len(RETRY_DELAYS_SECONDS) + 1} attempts" in reason
    history = engine.history(key)
    assert history.consecutive_failures == 0 and not history.quarantined and history.last_run_at is None

    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    catalogs = json.dumps({"pgcat": _catalog(private_server, home)})
    env |= {"ICEPACK_HOME": str(home), "ICEPACK_CATALOGS": catalogs}
    done = subprocess.run([ICEPACK, "maintain", "pgcat.sales.orders", "--json"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 5, done.stderr
    assert json.loads(done.stdout)["outcome"] == "deferred"

    private_server.start()
    assert arrow_fingerprint(Engine(settings).catalogs.get("pgcat").load_table(key.identifier)) == before


def test_real_outage_errors_are_transient_and_bugs_are_not(private_server: PrivatePostgres) -> None:
    port = private_server.port
    private_server.stop()
    engine = sqlalchemy.create_engine(f"postgresql+psycopg2://postgres@127.0.0.1:{port}/lake")
    with pytest.raises(sqlalchemy.exc.OperationalError) as refused_sql:
        engine.connect()
    engine.dispose()
    with pytest.raises(requests.ConnectionError) as refused_http:
        requests.get(f"http://127.0.0.1:{port}/v1/config", timeout=5)
    assert is_transient(refused_sql.value) and is_transient(refused_http.value)
    private_server.start()
    rejected = sqlalchemy.create_engine(f"postgresql+psycopg2://no_such_role@127.0.0.1:{port}/lake")
    with pytest.raises(sqlalchemy.exc.OperationalError) as refused_role:
        rejected.connect()
    rejected.dispose()
    assert not is_transient(refused_role.value), "rejected credentials never pass by themselves"
    for bug in (TypeError("unsupported operand"), AttributeError("no attribute 'x'")):
        assert is_programming_error(bug) and not is_transient(bug)
    assert not is_transient(FileNotFoundError("metadata.json"))


def test_a_passing_failure_is_retried_until_it_answers() -> None:
    attempts: list[float] = []
    slept: list[float] = []

    def flaky() -> str:
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise ConnectionRefusedError("refused")
        return "answered"

    assert with_retries(flaky, sleep=slept.append) == "answered"
    assert len(attempts) == 3 and slept == list(RETRY_DELAYS_SECONDS[:2])
    with pytest.raises(FileNotFoundError):  # not transient: no retry
        with_retries(lambda: (_ for _ in ()).throw(FileNotFoundError("gone")), sleep=slept.append)
    assert len(slept) == 2
