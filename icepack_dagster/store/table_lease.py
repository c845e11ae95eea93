"""One maintenance per table, wherever it starts: a lease row per table in the state database.

The Dagster run coordinator keeps two platform runs of one table apart, but it cannot see `icepack
maintain` run from a shell or a cron job. Every maintenance (CLI or Dagster) therefore takes the table's
lease in the state database both share before it plans or runs anything, and gives it back when done.
A holder renews its lease from a heartbeat thread while it works; a holder that crashed stops renewing,
so its lease expires after `maintenance_lease_seconds` and never blocks the table for longer.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from sqlalchemy import Column, DateTime, MetaData, String, Table, delete, insert, select, update
from sqlalchemy.engine import Engine as SqlEngine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from icepack_dagster.domain.clock import utc_now
from icepack_dagster.exceptions import TableLeaseHeldError
from icepack_dagster.store.state_database import open_state_database

logger = logging.getLogger(__name__)
_metadata = MetaData()

table_leases = Table(
    "icepack_table_leases",
    _metadata,
    Column("table_key", String(1024), primary_key=True),
    Column("holder", String(512), nullable=False),
    Column("token", String(64), nullable=False),
    Column("acquired_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)


def default_holder() -> str:
    """Who holds a lease, for the message another maintenance of the table gets."""
    return f"pid {os.getpid()} on {socket.gethostname()}"


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class TableLeases:
    """Acquire, renew and release table leases; safe to share across threads."""

    def __init__(self, url: str, ttl: timedelta) -> None:
        self._engine: SqlEngine = open_state_database(url)
        self.ttl = ttl

    def acquire(self, table: str, holder: str, now: datetime | None = None) -> str:
        """Take the table's lease and return its token, or raise `TableLeaseHeldError` naming the live
        holder. An expired lease is taken over: its holder stopped renewing it (crashed)."""
        now = now or utc_now()
        token = uuid.uuid4().hex
        row = {"holder": holder, "token": token, "acquired_at": now, "expires_at": now + self.ttl}
        try:
            with self._engine.begin() as connection:
                connection.execute(insert(table_leases).values(table_key=table, **row))
            return token
        except IntegrityError:
            pass
        with self._engine.begin() as connection:
            taken = connection.execute(
                update(table_leases)
                .where(table_leases.c.table_key == table, table_leases.c.expires_at < now)
                .values(**row)
            ).rowcount
            if taken == 1:
                return token
            current = connection.execute(
                select(table_leases.c.holder, table_leases.c.acquired_at, table_leases.c.expires_at).where(
                    table_leases.c.table_key == table
                )
            ).one_or_none()
        if current is None:  # released between our insert and our look: try once more
            return self.acquire(table, holder, now)
        raise TableLeaseHeldError(
            f"table {table}: another maintenance holds it ({current.holder}, since "
            f"{_aware(current.acquired_at):%Y-%m-%d %H:%M:%S} UTC, lease valid until "
            f"{_aware(current.expires_at):%Y-%m-%d %H:%M:%S} UTC unless renewed); nothing was run"
        )

    def renew(self, table: str, token: str, now: datetime | None = None) -> bool:
        """Push the lease's expiry out; False if it is no longer ours."""
        now = now or utc_now()
        with self._engine.begin() as connection:
            return bool(
                connection.execute(
                    update(table_leases)
                    .where(table_leases.c.table_key == table, table_leases.c.token == token)
                    .values(expires_at=now + self.ttl)
                ).rowcount
            )

    def release(self, table: str, token: str) -> None:
        with self._engine.begin() as connection:
            connection.execute(
                delete(table_leases).where(table_leases.c.table_key == table, table_leases.c.token == token)
            )

    @contextmanager
    def hold(self, table: str, holder: str) -> Iterator[None]:
        """The table's lease for the duration of the block, renewed every third of its lifetime."""
        token = self.acquire(table, holder)
        stop = threading.Event()

        def heartbeat() -> None:
            while not stop.wait(self.ttl.total_seconds() / 3):
                try:
                    self.renew(table, token)
                except SQLAlchemyError as error:  # the next beat tries again; expiry is the backstop
                    logger.warning("table %s: could not renew its maintenance lease (%s)", table, error)

        beat = threading.Thread(target=heartbeat, name=f"lease {table}", daemon=True)
        beat.start()
        try:
            yield
        finally:
            stop.set()
            beat.join()
            self.release(table, token)
