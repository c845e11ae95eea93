"""The state database (SQLite under the icepack home by default, `ICEPACK_STATE_URL` for PostgreSQL):
opened the same way for every store that keeps icepack's own state in it."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import MetaData, create_engine, event
from sqlalchemy.engine import Engine as SqlEngine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from icepack_dagster.exceptions import ConfigurationError


def redacted_url(url: str) -> str:
    """The URL with its credentials masked, for messages and logs (user info and password parameters)."""
    url = re.sub(r"(?i)([?&][^=&]*pass[^=&]*=)[^&]*", r"\1**********", url)
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://**********@{rest.split('@', 1)[1]}"
    return url


def open_state_database(url: str, metadata: MetaData) -> SqlEngine:
    """An engine on the state database with `metadata`'s tables created. SQLite runs in WAL mode with a
    busy timeout, because health-sync and maintenance runs write to it from several processes."""
    try:
        database = make_url(url).database
        if url.startswith("sqlite:///") and database:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, pool_pre_ping=True)
        if url.startswith("sqlite"):
            event.listen(engine, "connect", _sqlite_wal)
        metadata.create_all(engine)
    except (SQLAlchemyError, OSError) as error:
        raise ConfigurationError(
            f"icepack state database ({redacted_url(url)}) is not usable: {type(error).__name__}. "
            "Check ICEPACK_STATE_URL."
        ) from None
    return engine


def _sqlite_wal(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()
