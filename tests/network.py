"""Loopback ports for the servers tests start (Spark, PostgreSQL, HTTP): every server here listens on
127.0.0.1 only."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
