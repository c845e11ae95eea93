"""The state database (SQLite under the icepack home by default, `ICEPACK_STATE_URL` for PostgreSQL):
opened the same way for every store that keeps icepack's own state in it.

One SQLAlchemy engine per database URL and process, shared by every store (maintenance history,
manifest summaries), disposed when the process exits; a forked child (a run worker) opens its own
rather than reusing its parent's pooled connections. The first open in a process brings the database
to the newest schema revision (schema_migrations.py: one version check when it is current); a database
a newer icepack migrated is refused instead of misread.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine as SqlEngine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from icepack_dagster.exceptions import ConfigurationError
from icepack_dagster.store import schema_migrations

_engines: dict[str, SqlEngine] = {}
_lock = threading.Lock()
_hooks_registered = False


def redacted_url(url: str) -> str:
    """The URL with its credentials masked, for messages and logs (user info and password parameters)."""
    url = re.sub(r"(?i)([?&][^=&]*pass[^=&]*=)[^&]*", r"\1**********", url)
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://**********@{rest.split('@', 1)[1]}"
    return url


def open_state_database(url: str) -> SqlEngine:
    """The process's engine on the state database, its schema at the newest revision. SQLite runs in WAL
    mode with a busy timeout, because health-sync and maintenance runs write to it from several
    processes."""
    with _lock:
        try:
            engine = _engines.get(url)
            if engine is None:
                engine = _new_engine(url)
                _engines[url] = engine
                _register_process_hooks()
        except (SQLAlchemyError, OSError) as error:
            raise _unusable(url, error) from None
    return engine


def new_engine(url: str) -> SqlEngine:
    """An engine on the state database, not yet migrated (the process's shared one is
    `open_state_database`'s)."""
    database = make_url(url).database  # decoded: a home path may hold '%' or spaces
    if url.startswith("sqlite:///") and database:
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, pool_pre_ping=True)
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_wal)
    return engine


def upgrade_state_database(url: str) -> schema_migrations.SchemaUpgrade:
    """`icepack state upgrade`: migrate the database to the newest revision on an engine of its own."""
    engine = new_engine(url)
    try:
        return schema_migrations.upgrade(engine, redacted_url(url))
    except SQLAlchemyError as error:
        raise _unusable(url, error) from None
    finally:
        engine.dispose()


def _unusable(url: str, error: BaseException) -> ConfigurationError:
    return ConfigurationError(
        f"icepack state database ({redacted_url(url)}) is not usable: {type(error).__name__}. "
        "Check ICEPACK_STATE_URL."
    )


def _new_engine(url: str) -> SqlEngine:
    engine = new_engine(url)
    try:
        schema_migrations.upgrade(engine, redacted_url(url))
    except BaseException:
        engine.dispose()
        raise
    return engine


def dispose_engines() -> None:
    """Close every pooled connection of this process's state databases."""
    with _lock:
        engines = list(_engines.values())
        _engines.clear()
    for engine in engines:
        engine.dispose()


def _forget_parents_engines() -> None:
    """In a forked child: drop the parent's engines without closing connections the parent still uses."""
    for engine in list(_engines.values()):
        engine.dispose(close=False)
    _engines.clear()


def _register_process_hooks() -> None:
    """Once, with the first engine (importing this module registers nothing): dispose at exit, and
    forget the parent's engines in a forked child."""
    global _hooks_registered
    if not _hooks_registered:
        atexit.register(dispose_engines)
        os.register_at_fork(after_in_child=_forget_parents_engines)
        _hooks_registered = True


def _sqlite_wal(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()
