"""Versioned migrations of the state database with Alembic, applied by `icepack state upgrade` and when a
process first opens the database (state_database.py), never by `create_all`.

The revisions ship inside the package (state/migrations/versions). The version lives in
`icepack_alembic_version`, not Alembic's default `alembic_version`: production may point icepack at the
database Dagster's own storage migrates with Alembic, and two projects must not share one version row.
A database without that table is either new or written by an icepack from before migrations (its
tables created on first use): both are brought to the newest revision by the same revisions, which
create only the tables a database lacks. A database at a revision this icepack does not know was
migrated by a newer icepack and is refused rather than misread.

Two processes starting at once must not migrate together: PostgreSQL serialises them with a
transaction-scoped advisory lock, SQLite with a lock file beside the database.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from filelock import FileLock
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.engine import Engine as SqlEngine

from icepack_dagster.exceptions import ConfigurationError

VERSION_TABLE = "icepack_alembic_version"
_SCRIPT_LOCATION = "icepack_dagster.store:migrations"
_ADVISORY_LOCK = 0x1CE9AC  # PostgreSQL advisory lock key: icepack's state migrations
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchemaUpgrade:
    """What an upgrade found and left: revisions (None for a database without a version)."""

    before: str | None
    after: str
    adopted: bool  # the database was written by an icepack from before migrations

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPT_LOCATION)
    return config


@functools.cache
def _scripts() -> ScriptDirectory:
    """The shipped revisions, read once per process."""
    return ScriptDirectory.from_config(_config())


def head_revision() -> str:
    """The newest revision this icepack ships."""
    head = _scripts().get_current_head()
    assert head is not None
    return head


def current_revision(connection: Connection) -> str | None:
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def _refuse_unknown(revision: str | None, shown_url: str) -> None:
    if revision is None:
        return
    known = {script.revision for script in _scripts().walk_revisions()}
    if revision not in known:
        raise ConfigurationError(
            f"icepack state database ({shown_url}) is at schema revision {revision}, which this icepack "
            f"does not know (its newest is {head_revision()}): a newer icepack migrated it. Upgrade "
            "icepack, or point ICEPACK_STATE_URL elsewhere"
        )


def _written_before_migrations(connection: Connection) -> bool:
    return any(name.startswith("icepack_") for name in inspect(connection).get_table_names())


@contextmanager
def _migration_lock(engine: SqlEngine) -> Iterator[Connection]:
    """A connection in a transaction that only one migrating process holds at a time."""
    database = engine.url.database
    on_file = engine.dialect.name == "sqlite" and database not in (None, "", ":memory:")
    with FileLock(f"{database}.migrate.lock") if on_file else nullcontext():
        with engine.begin() as connection:
            if engine.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_LOCK})
            yield connection


def upgrade(engine: SqlEngine, shown_url: str) -> SchemaUpgrade:
    """Bring the database to the newest revision (a no-op when it is there); refuse a newer one."""
    with engine.connect() as connection:
        before = current_revision(connection)
    _refuse_unknown(before, shown_url)
    head = head_revision()
    if before == head:
        return SchemaUpgrade(before, head, adopted=False)
    with _migration_lock(engine) as connection:
        before = current_revision(connection)  # another process may have migrated meanwhile
        _refuse_unknown(before, shown_url)
        adopted = before is None and _written_before_migrations(connection)
        if adopted:
            _log.info("state database %s: written before migrations, adopting it at the baseline", shown_url)
        config = _config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    _log.info("state database %s: schema upgraded from %s to %s", shown_url, before, head)
    return SchemaUpgrade(before, head, adopted)
