"""A private PostgreSQL 15 cluster for one test, so the test can restart (or crash) the database
without touching the machine's shared server that other test runs use.

initdb refuses to run as root, so the cluster belongs to the `postgres` OS user, in a fresh directory
it owns; the server listens on a free port on 127.0.0.1 with trust authentication.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg2

from tests.network import free_port

BIN = Path("/usr/lib/postgresql/15/bin")
OWNER = "postgres"




class PrivatePostgres:
    """initdb + pg_ctl as the postgres user; `restart` crashes or stops the server and starts it again."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="icepack_private_pg_"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        shutil.chown(self.root, OWNER, OWNER)

    def _as_owner(self, *command: str, timeout: float = 120) -> None:
        done = subprocess.run(
            ["runuser", "-u", OWNER, "--", *command], capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}\n{log}")

    def _ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        self._as_owner(
            str(BIN / "pg_ctl"),
            action,
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            *extra,
        )

    def start(self) -> None:
        if not self.data.exists():
            self._as_owner(
                str(BIN / "initdb"), "-D", str(self.data), "-U", OWNER, "--auth=trust", "-E", "UTF8"
            )
        self._ctl("start")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("stop", "-m", mode)

    def restart(self, mode: str = "immediate") -> None:
        """`immediate` ends every backend at once without a checkpoint (what a crash does); the start
        that follows recovers from the write-ahead log."""
        self.stop(mode)
        self.start()

    def create_database(self, name: str) -> None:
        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user=OWNER, dbname="postgres")
        connection.autocommit = True
        try:
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._ctl("stop", "-m", "immediate")
        shutil.rmtree(self.root, ignore_errors=True)
