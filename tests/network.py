"""Loopback ports for the servers tests start (Spark, PostgreSQL, HTTP): every server here listens on
127.0.0.1 only. And whether an HTTP server answers yet, for waiting on one to come up."""

from __future__ import annotations

import random
import socket
import urllib.error
import urllib.request

# Below Linux's ephemeral range (32768-60999): a port the kernel hands an outgoing connection (Spark's,
# a client's) would be taken between our probe and a server's bind, seconds later after a JVM starts.
PORTS = range(20000, 32000)


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now, outside the kernel's ephemeral range."""
    for port in random.sample(PORTS, 200):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on 127.0.0.1 in {PORTS.start}-{PORTS.stop - 1}")


def answers(url: str) -> bool:
    """Whether an HTTP server answers at `url` (with any status: an error page is an answer)."""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
