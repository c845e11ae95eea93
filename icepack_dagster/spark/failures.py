"""What a failed maintenance call on Spark means, in words an operator can act on.

Spark errors carry a JVM stack trace and, through JDBC URLs, sometimes credentials; the message keeps
the first line and the Java root cause, with secrets masked. For the failures where data safety is at
stake (a commit conflict, a commit whose outcome is unknown, a scheme or authority mismatch during
orphan removal, a file group failing under partial progress) it also says what was and was not
changed, so a report never claims more or less than what happened.
"""

from __future__ import annotations

import re

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

_SECRETS = [
    (re.compile(r"(://)[^/\s:@]+:[^/\s@]+@"), r"\1**********@"),
    (
        re.compile(r"((?:password|secret|token|credential)[\"']?\s*[=:]\s*)[^\s,;&\"']+", re.IGNORECASE),
        r"\1**********",
    ),
]
_MAX_MESSAGE = 600
_ERROR_CLASS = re.compile(r"^\[([A-Z][A-Z0-9_.]*)\]")

UNKNOWN_COMMIT = (
    "the catalog did not confirm the commit, so its outcome is unknown: the files it wrote are kept in "
    "case it landed; if it did not, they stay unreferenced and orphan removal collects them once they "
    "are older than the orphan age"
)
PREFIX_MISMATCH = (
    "nothing was deleted: the table's metadata references files under another scheme or authority than "
    "the listing of its location shows (for example s3 vs s3a, or another bucket or host), and icepack "
    "never widens that matching; make the table location and the paths in its metadata agree"
)
PARTIAL_COMMITS = (
    "partial progress: file groups committed before the failure stay committed (see the impact) and the "
    "table is consistent; the groups that failed, to be written or to commit, were not committed and "
    "their new files were removed; the next run retries them"
)
CONFLICT = (
    "a concurrent commit conflicted with this action, so it committed nothing and removed the files it "
    "had written; the table is as the other writer left it and the next run retries on that state"
)
ORPHAN_AGE_GUARD = "Iceberg's 24-hour guard refused it, so nothing was deleted"
CONNECT_LOST = (
    "the Spark Connect server stopped answering (the client retried for about ten minutes), so whether "
    "the action committed on the server is unknown: check the server, then the table's snapshots; the "
    "next run plans on whatever state the table is in"
)
# Checked in order against the Java exception chain: the first match explains the failure.
_HINTS: tuple[tuple[str, str], ...] = (
    ("CommitStateUnknownException", UNKNOWN_COMMIT),
    ("Unable to determine whether certain files are orphan", PREFIX_MISMATCH),
    ("rewrite commits failed", PARTIAL_COMMITS),
    ("exceptions.ValidationException", CONFLICT),
    ("exceptions.CommitFailedException", CONFLICT),
    ("Cannot remove orphan files with an interval less than 24 hours", ORPHAN_AGE_GUARD),
    ("failed to connect to all addresses", CONNECT_LOST),
)


def clean_message(message: str) -> str:
    """The message with credentials masked, cut to a readable length."""
    for pattern, replacement in _SECRETS:
        message = pattern.sub(replacement, message)
    return _clip(message, _MAX_MESSAGE)


def _java_exception(error: Exception) -> object | None:
    if isinstance(error, Py4JJavaError):
        return error.java_exception
    return getattr(error, "_origin", None)  # pyspark's CapturedException keeps the Java exception here


def java_chain(error: Exception) -> list[str]:
    """`class: message` of the Java exception and each of its causes, outermost first."""
    chain: list[str] = []
    java = _java_exception(error)
    while java is not None and len(chain) < 20:
        chain.append(str(java.toString()))  # type: ignore[attr-defined]
        java = java.getCause()  # type: ignore[attr-defined]
    return chain


def spark_error_message(error: Exception) -> str:
    """The useful part of a Spark or Java error: its first line and the Java root cause, no secrets."""
    if isinstance(error, Py4JJavaError):
        chain = [" ".join(link.strip().splitlines()[:2]) for link in java_chain(error)]
        text = chain[0]
        if len(chain) > 1 and chain[-1] not in text:  # the root cause is often the telling part
            text = f"{_clip(text, _MAX_MESSAGE // 2)} (caused by {chain[-1]})"
    else:
        text = " ".join(str(error).split("\n\nJVM stacktrace:")[0].strip().splitlines()[:2])
    return clean_message(text)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_class(error: PySparkException) -> str | None:
    """Spark's error class, such as TABLE_OR_VIEW_NOT_FOUND. pyspark 3.5's Connect client does not carry
    it; the server's message starts with it."""
    match = _ERROR_CLASS.match(str(error))
    return error.getErrorClass() or (match.group(1) if match else None)


def is_conflict(error: Exception) -> bool:
    """Iceberg refused the commit because a concurrent writer committed first: nothing committed."""
    return failure_hint(error) == CONFLICT


def failure_hint(error: Exception) -> str | None:
    """What a failure left behind, for the failures where that matters; None for the rest."""
    chain = " | ".join(java_chain(error)) or str(error)
    return next((hint for marker, hint in _HINTS if marker in chain), None)
