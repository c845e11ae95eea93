"""The Spark session each table's maintenance runs in.

A table's `icepack.spark.sql.*` overrides are `SET` in its session and must never reach another table.
By default every table gets a fresh `newSession()`, closed after it. Inside `shared()` (a batch run, a
multi-table CLI run) each thread keeps one session for table after table instead, and after each
table the settings it overrode are put back to the session's own values. Both keep one table's SETs
from the next: the only settings a table can SET are its allowlisted overrides
(`domain/sql/spark_overrides.py`) and the constant `SESSION_SETUP`. A batch run's `shared()` also
sets its small tables' settings (`connect_batch_conf` in `spark/session.py`) in each session it
shares; those are the session's own values the overrides are put back to.

Why share: every new session opens its own catalog clients (a JDBC pool per catalog). A classic
session's are closed here; a Spark Connect server's cannot be from the client, and the server keeps
them after the session is gone (Spark 3.5 has no call to release a session): one leaked catalog
client, file handles or PostgreSQL connections, per table. Shared, it is one per thread per run. A
session that saw a failure is not reused: the next table gets a fresh one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from py4j.protocol import Py4JError
from pyspark.errors import AnalysisException, PySparkException

from icepack_dagster.domain.sql.procedures import SESSION_SETUP
from icepack_dagster.exceptions import ConfigurationError, InternalError
from icepack_dagster.spark.failures import spark_error_message
from icepack_dagster.spark.iceberg_runtime import iceberg_runtime, spark_version
from icepack_dagster.spark.session import is_connect_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


class _Kept:
    """A thread's shared session: the session, the starting values (None: unset) of the settings
    tables overrode in it, and the catalogs whose clients it opened."""

    def __init__(self, session: SparkSession) -> None:
        self.session = session
        self.baseline: dict[str, str | None] = {}
        self.catalogs: set[str] = set()
        self.answers: dict[str, str] = {}  # what the session's Spark said of itself, by question

    def remember(self, overrides: Collection[str]) -> None:
        """Read the starting value of each key a table is about to override, the first time one does:
        until then the session still holds it (every override is restored after its table)."""
        for key in overrides:
            if key not in self.baseline:
                self.baseline[key] = self.session.conf.get(key, None)


class TableSessions:
    """Hands out the session for one table at a time per thread (see the module docstring)."""

    def __init__(self, base: Callable[[], SparkSession]) -> None:
        """`base` returns the process's Spark session; tables' sessions are its `newSession()`s."""
        self._base = base
        self._sharing = 0
        self._shared_conf: dict[str, str] = {}
        self._local = threading.local()
        self._kept: list[_Kept] = []
        self._lock = threading.Lock()
        # Threads asking for their first session at once must not start two Spark applications: the
        # base session is looked up (and started, the first time) by one thread at a time.
        self._base_lock = threading.Lock()

    @contextmanager
    def shared(self, conf: Mapping[str, str] | None = None) -> Iterator[None]:
        """Tables maintained inside share their thread's session, which sets `conf` when it is opened;
        every shared session is closed on exit. A `shared()` inside another shares the outer one's
        sessions, so it may not ask for other settings."""
        with self._lock:
            if self._sharing == 0:
                self._shared_conf = dict(conf or {})
            elif conf and dict(conf) != self._shared_conf:
                raise InternalError(f"a nested shared() cannot change the shared sessions' settings "
                                    f"{self._shared_conf} to {dict(conf)}")
            self._sharing += 1
        try:
            yield
        finally:
            with self._lock:
                self._sharing -= 1
                closing = self._kept if self._sharing == 0 else []
                if closing:
                    self._kept = []
                if self._sharing == 0:
                    self._shared_conf = {}
            for kept in closing:
                _close(kept.session, kept.catalogs)

    @contextmanager
    def session_for(self, catalog: str, overrides: Collection[str]) -> Iterator[SparkSession]:
        """The session for one table of `catalog` whose actions `SET` the keys `overrides`. The block
        raising, or `discard()` called in it, keeps the session from being reused."""
        kept = self._shared_session() if self._sharing else None
        session = kept.session if kept is not None else self._fresh()
        self._local.discarded = False
        try:
            if kept is not None:
                kept.catalogs.add(catalog)
                kept.remember(overrides)
            yield session
        except BaseException:
            self._local.discarded = True
            raise
        finally:
            if kept is None:
                _close(session, {catalog})
            elif self._local.discarded or not _restored(kept, overrides):
                self._drop(kept)

    def iceberg_runtime(self, session: SparkSession) -> str | None:
        """The Iceberg runtime of the Spark behind `session` (`spark/iceberg_runtime.py`), asked once
        per shared session (`_asked_once`)."""
        return self._asked_once(session, iceberg_runtime)

    def spark_version(self, session: SparkSession) -> str | None:
        """The version of the Spark behind `session` (on Spark Connect, a round trip to the server),
        asked once per shared session (`_asked_once`)."""
        return self._asked_once(session, spark_version)

    def _asked_once(self, session: SparkSession, ask: Callable[[SparkSession], str | None]) -> str | None:
        """`ask(session)`; a shared session asks once and keeps the answer for its later tables, since
        a Spark application's versions and classpath cannot change while it runs; a fresh session, or
        one whose question went unanswered, asks."""
        kept: _Kept | None = getattr(self._local, "kept", None) if self._sharing else None
        if kept is None or kept.session is not session:
            return ask(session)
        question = ask.__name__
        if question not in kept.answers and (answer := ask(session)) is not None:
            kept.answers[question] = answer
        return kept.answers.get(question)

    def discard(self) -> None:
        """The current table's session saw a failure: do not reuse it."""
        self._local.discarded = True

    def _fresh(self) -> SparkSession:
        with self._base_lock:
            base = self._base()
        session = base.newSession()
        for statement in SESSION_SETUP:
            session.sql(statement)
        return session

    def _shared_session(self) -> _Kept:
        kept: _Kept | None = getattr(self._local, "kept", None)
        with self._lock:
            closed = kept is not None and kept not in self._kept  # an earlier shared() closed it
            conf = self._shared_conf
        if kept is None or closed:
            kept = _Kept(_configured(self._fresh(), conf))
            self._local.kept = kept
            with self._lock:
                self._kept.append(kept)
        return kept

    def _drop(self, kept: _Kept) -> None:
        self._local.kept = None
        with self._lock:
            if kept in self._kept:
                self._kept.remove(kept)
        _close(kept.session, kept.catalogs)


def _configured(session: SparkSession, conf: Mapping[str, str]) -> SparkSession:
    """`session` with `conf` set (a batch's settings: `connect_batch_conf` in `spark/session.py`). On
    any error the session is closed; a setting Spark refuses is a `ConfigurationError` naming it."""
    key = ""
    try:
        for key, value in conf.items():
            session.conf.set(key, value)
    except AnalysisException as error:
        _close(session, ())
        raise ConfigurationError(
            f"Spark refused the batch session setting {key}={conf[key]}: {spark_error_message(error)}; "
            "spark.connect_batch_codegen=true leaves it out"
        ) from None
    except BaseException:
        _close(session, ())
        raise
    return session


def _restored(kept: _Kept, overrides: Collection[str]) -> bool:
    """Put `overrides` back to the session's starting values; False if Spark refused (the session is
    then dropped rather than reused with a table's setting still in it)."""
    try:
        for key in overrides:
            value = kept.baseline.get(key)
            if value is None:
                kept.session.conf.unset(key)
            else:
                kept.session.conf.set(key, value)
    except (PySparkException, Py4JError) as error:
        logger.warning("table session settings not restored, the session is dropped: %s", error)
        return False
    return True


def _close(session: SparkSession, catalogs: Collection[str]) -> None:
    """Release what a table session opened. A classic session's catalog clients (JDBC connections,
    HTTP pools) are closed; Spark has no public call for this. A Spark Connect client cannot reach the
    server's JVM: it closes its channel, and the server-side session (with its catalog clients) lives
    until the server drops it."""
    if is_connect_session(session):
        session.stop()
        return
    for catalog in catalogs:
        try:
            client = session._jsparkSession.sessionState().catalogManager().catalog(catalog).icebergCatalog()
            client.close()
        except Py4JError as error:  # not an Iceberg catalog, or its client has no close: nothing to release
            logger.debug("catalog %s of a table session not closed: %s", catalog, error)
