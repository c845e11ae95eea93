"""PostgreSQL for the benchmarks that measure production storage: a fresh database on the local server
(127.0.0.1:5432, user postgres, as the test suite uses it) per benchmark, dropped afterwards; the
production Dagster instance's storage (`deploy/dagster/dagster.prod.yaml`) pointed at one; and the
rows each table of a database gained and changed, as PostgreSQL's own statistics count them.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg2
import yaml

from bench._fixtures import REPO

HOST, PORT, USER = "127.0.0.1", 5432, "postgres"
PRODUCTION_INSTANCE = REPO / "deploy" / "dagster" / "dagster.prod.yaml"
STATS_FLUSH_SECONDS = 11  # an idle backend reports its counts within 10 s (PostgreSQL 15+)


def _connect(database: str) -> Any:
    connection = psycopg2.connect(host=HOST, port=PORT, user=USER, dbname=database)
    connection.autocommit = True
    return connection


@contextlib.contextmanager
def fresh_database(purpose: str) -> Iterator[str]:
    """A new, empty database named after `purpose`, dropped (its connections ended) on exit."""
    name = f"icepack_bench_{purpose}_{uuid.uuid4().hex[:8]}"
    admin = _connect("postgres")
    try:
        with admin.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        yield name
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def sqlalchemy_url(database: str) -> str:
    """The database as a SQLAlchemy URL, as `ICEPACK_STATE_URL` takes it."""
    return f"postgresql+psycopg2://{USER}@{HOST}:{PORT}/{database}"


def production_instance(database: str, port: int = PORT) -> dict[str, Any]:
    """The production instance's configuration with its storage on `database`: the environment
    variables it names (DAGSTER_PG_HOST, ...) replaced by this server's values, so every process of a
    benchmark (and the benchmark's own instance) reads the same storage without setting them. `port`:
    another port on this host that reaches the server (a PgBouncer in front of it, bench/_pgbouncer.py)."""
    config = yaml.safe_load(PRODUCTION_INSTANCE.read_text())
    values = {"hostname": HOST, "port": port, "username": USER, "password": "", "db_name": database}
    postgres_db = config["storage"]["postgres"]["postgres_db"]
    for key, value in values.items():
        assert isinstance(postgres_db[key], dict) and "env" in postgres_db[key], f"{key}: not from env"
        postgres_db[key] = value
    return dict(config)


def sessions(database: str) -> int:
    """Sessions established to `database` so far (`pg_stat_database.sessions`, PostgreSQL 14+): each is a
    server process forked, authenticated and ended, whoever connected."""
    time.sleep(STATS_FLUSH_SECONDS)
    connection = _connect("postgres")
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (database,))
            return int(cursor.fetchone()[0])
    finally:
        connection.close()


def row_writes(databases: dict[str, str]) -> dict[str, tuple[int, int, int]]:
    """Rows inserted, updated and deleted so far in each table of each database (named `label.table`
    after `databases`' keys), from `pg_stat_user_tables`, after waiting for idle backends to report."""
    time.sleep(STATS_FLUSH_SECONDS)
    counts = {}
    for label, database in databases.items():
        connection = _connect(database)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables")
                counts |= {f"{label}.{name}": (ins, upd, dele) for name, ins, upd, dele in cursor}
        finally:
            connection.close()
    return counts


def writes_between(
    before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]
) -> dict[str, tuple[int, int, int]]:
    """Per table, what changed from `before` to `after` (tables with no write left out)."""
    zero = (0, 0, 0)
    deltas = {
        name: tuple(a - b for a, b in zip(counts, before.get(name, zero), strict=True))
        for name, counts in after.items()
    }
    return {name: (d[0], d[1], d[2]) for name, d in sorted(deltas.items()) if any(d)}
