"""PgBouncer in front of the benchmarks' PostgreSQL server (bench/_postgres.py), as a production deployment
would put it in front of Dagster's storage database.

Dagster's PostgreSQL storages open a new connection for each write outside the webserver and the daemon
(SQLAlchemy's `NullPool`; dagster-io/dagster#20325, #33935), so a run that logs an event opens one or two
connections for it: without a pooler each is a server process forked and authenticated. PgBouncer in
session mode hands each client connection one of the server connections it keeps open and takes it back
at disconnect: the client's connect is cheap, the server forks nothing, and every session behaves as a
direct one (session mode is the one that keeps all of a session's semantics; Dagster's storages need no
more than autocommit statements). Started on a free port as the `postgres` OS user (PgBouncer refuses to
run as root), with trust authentication as the local server has it; stopped on exit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg2

from bench._postgres import HOST, PORT, USER
from tests.network import free_port
from tests.polling import poll
from tests.processes import stop

INSTALL = "PgBouncer is not installed: install it with `apt-get install -y pgbouncer` (Debian 12: 1.18)"


def _binary() -> str:
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
    if found is None:
        raise SystemExit(INSTALL)
    return found


@contextlib.contextmanager
def pgbouncer(root: Path, pool_size: int = 20) -> Iterator[int]:
    """A PgBouncer (session mode, up to `pool_size` server connections per database) in front of the
    local server, configured and logging under `root`; yields its port."""
    binary = _binary()
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    users = root / "userlist.txt"
    users.write_text(f'"{USER}" ""\n')
    ini = root / "pgbouncer.ini"
    ini.write_text(
        f"[databases]\n* = host={HOST} port={PORT}\n\n[pgbouncer]\n"
        f"listen_addr = {HOST}\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {users}\npool_mode = session\n"
        f"default_pool_size = {pool_size}\nmax_client_conn = 1000\n"
        f"logfile = {root / 'pgbouncer.log'}\npidfile = {root / 'pgbouncer.pid'}\n"
    )
    as_owner: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        as_owner = ["runuser", "-u", "postgres", "--"]
    process = subprocess.Popen([*as_owner, binary, str(ini)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_until_serving(port, process, root)
        yield port
    finally:
        stop(process, group=True)


def _wait_until_serving(port: int, process: subprocess.Popen[bytes], root: Path) -> None:
    def serving() -> bool:
        try:
            psycopg2.connect(host=HOST, port=port, user=USER, dbname="postgres", connect_timeout=2).close()
            return True
        except psycopg2.OperationalError:
            return False

    if poll(lambda: serving() or process.poll() is not None, timeout=30, every=0.2) and serving():
        return
    log = root / "pgbouncer.log"
    tail = log.read_text()[-2000:] if log.exists() else "(no log)"
    raise SystemExit(f"PgBouncer did not start on port {port}: {tail}")
