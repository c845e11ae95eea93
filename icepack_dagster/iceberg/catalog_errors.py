"""What a failure to reach a table's metadata means: passing, missing, damaged, or a bug.

A catalog or object store that answers 5xx, times out or refuses connections is usually back in
seconds; such a failure is retried with backoff and, if it persists, surfaces as
`CatalogUnavailableError`, which maintenance records as `deferred` (never as a failure that counts
towards quarantine: the table did nothing wrong). Errors that only a programming mistake raises are
`InternalError`, with the traceback logged, so a bug is never dressed up as damaged metadata.
"""

from __future__ import annotations

import logging
import sys
import time
import zlib
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy.exc
from fastavro.read import SchemaResolutionError
from pyiceberg.exceptions import ServerError, ServiceUnavailableError, TooManyRequestsError

from icepack_dagster.exceptions import CatalogUnavailableError, IcepackError, MetadataReadError

logger = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_DELAYS_SECONDS = (0.5, 1.0, 2.0)

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError,  # refused, reset, aborted
    TimeoutError,
    ServerError,  # REST 5xx
    ServiceUnavailableError,  # REST 503
    TooManyRequestsError,  # REST 429
)
# A SQL catalog's driver raises one OperationalError for an unreachable server and for rejected
# credentials alike; only the first passes by itself, so only its messages count as transient.
_PASSING_SQL_FAILURES = (
    "connection refused",
    "could not connect",
    "timeout expired",
    "timed out",
    "server closed the connection",
    "connection reset",
    "terminating connection",
    "the database system is starting up",
    "the database system is shutting down",
    "no route to host",
    "network is unreachable",
    "database is locked",
)
# Raised only by code that does not do what it was written to do.
PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    AttributeError, TypeError, NameError, AssertionError, ZeroDivisionError
)


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 20:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _http_transient_errors() -> tuple[type[BaseException], ...]:
    """requests' connection errors and timeouts (a REST catalog's, an object store's over HTTP), looked up
    only once requests is imported: no error of requests can exist before that, and importing it here
    would make every process pay for it, including health-sync runs on a SQL catalog, which never use it."""
    requests = sys.modules.get("requests")
    return (requests.ConnectionError, requests.Timeout) if requests is not None else ()


def _passing(link: BaseException) -> bool:
    if isinstance(link, TRANSIENT_ERRORS + _http_transient_errors()):
        return True
    if isinstance(link, sqlalchemy.exc.OperationalError):
        text = str(link).lower()
        return any(marker in text for marker in _PASSING_SQL_FAILURES)
    return False


def is_transient(error: BaseException) -> bool:
    """Whether the error, or one it was raised from, is a passing catalog or storage failure (an
    unreachable or restarting server; never rejected credentials or a missing database)."""
    return any(_passing(link) for link in _chain(error))


def is_programming_error(error: BaseException) -> bool:
    return isinstance(error, PROGRAMMING_ERRORS)


def with_retries(
    call: Callable[[], T],
    delays: tuple[float, ...] = RETRY_DELAYS_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`call()`, tried again after each delay while it fails transiently; the last error is raised."""
    for delay in delays:
        try:
            return call()
        except Exception as error:
            if not is_transient(error):
                raise
            logger.info("transient failure (%s: %s); retrying in %.1f s", type(error).__name__, error, delay)
            sleep(delay)
    return call()


# What a damaged or unreadable manifest raises: I/O, truncated or corrupt Avro, a schema that is no manifest.
METADATA_READ_ERRORS = (
    OSError, EOFError, ValueError, KeyError, TypeError, IndexError, zlib.error, SchemaResolutionError
)


def unreadable_metadata(table: str, what: str, error: Exception) -> IcepackError:
    """The error to raise for a metadata file that could not be read, by what went wrong: storage that
    kept failing transiently (deferred, not the table's fault), a missing or damaged file, or an error
    that may be a bug in the decoder (said so, traceback logged)."""
    cause = f"{type(error).__name__}: {error}"
    if is_transient(error):
        return CatalogUnavailableError(
            f"table {table}: {what} could not be read: its storage kept failing ({cause}); nothing was "
            "changed, and maintenance is deferred until the storage answers again"
        )
    if isinstance(error, KeyError | TypeError | IndexError):
        logger.warning("unexpected error decoding %s of table %s", what, table, exc_info=error)
        return MetadataReadError(
            f"table {table}: {what} could not be decoded ({cause}); if the file is intact this is a bug "
            "in icepack's manifest decoder (the traceback is in the log), otherwise the file is damaged"
        )
    hint = "check that the file exists and the table's storage is reachable" if isinstance(
        error, OSError
    ) else "the file is damaged or not an Iceberg manifest file"
    return MetadataReadError(f"table {table}: {what} could not be read ({cause}); {hint}")
