"""Contract: `scripts/postgres` (run by scripts/setup) leaves a PostgreSQL the tests can use, idempotently.

A server already accepting the test user is reused untouched; on a free port a disposable cluster of
icepack's own is created and started without systemd, and a second run starts nothing new; a port held by
something that is not such a server fails with one message saying what to do. Real initdb, pg_ctl, psql.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest

from tests.conftest import PG_PORT
from tests.network import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "postgres"
PG_CTL = Path("/usr/lib/postgresql/15/bin/pg_ctl")


def _run(port: int, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ICEPACK_TEST_PG", "ICEPACK_PG"))}
    return subprocess.run(
        [str(SCRIPT)], capture_output=True, text=True, timeout=120,
        env=clean | {"ICEPACK_TEST_PG_PORT": str(port), **env},
    )




@pytest.fixture
def private_data() -> Iterator[Path]:
    """A data directory the postgres OS user can reach (pytest's tmp_path is private to root); the
    server in it is stopped and the directory removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="icepack_setup_pg_"))
    root.chmod(0o755)
    data = root / "data"
    try:
        yield data
    finally:
        if (data / "postmaster.pid").exists():
            owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
            subprocess.run([*owner, str(PG_CTL), "-D", str(data), "stop", "-m", "immediate"],
                           capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def test_a_running_server_is_reused() -> None:
    done = _run(PG_PORT)
    assert done.returncode == 0, done.stderr
    assert "reusing it" in done.stderr


def test_a_free_port_gets_a_cluster_started_once(private_data: Path) -> None:
    port = free_port()
    first = _run(port, ICEPACK_PG_DATA=str(private_data))
    assert first.returncode == 0, first.stderr
    assert "creating a PostgreSQL cluster" in first.stderr
    connection = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
    with connection, connection.cursor() as cursor:
        cursor.execute("select current_setting('listen_addresses')")
        assert cursor.fetchone() == ("127.0.0.1",)
    connection.close()
    pid = (private_data / "postmaster.pid").read_text().split()[0]
    second = _run(port, ICEPACK_PG_DATA=str(private_data))
    assert second.returncode == 0 and "reusing it" in second.stderr, second.stderr
    assert (private_data / "postmaster.pid").read_text().split()[0] == pid, "the server was restarted"


def test_a_port_held_by_something_else_fails_saying_what_to_do(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        done = _run(port, ICEPACK_PG_DATA=str(tmp_path / "never"))
    assert done.returncode == 1
    assert f"127.0.0.1:{port} is taken" in done.stderr and "ICEPACK_TEST_PG_PORT" in done.stderr
    assert not (tmp_path / "never").exists()
