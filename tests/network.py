"""Loopback ports for the servers tests start (Spark, PostgreSQL, HTTP): every server here listens on
127.0.0.1 only. And whether an HTTP server answers yet, for waiting on one to come up."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers(url: str) -> bool:
    """Whether an HTTP server answers at `url` (with any status: an error page is an answer)."""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
