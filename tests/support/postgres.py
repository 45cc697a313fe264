"""A real PostgreSQL server for the tests, on 127.0.0.1, started once per test session.

``postgres_server`` runs Debian's ``initdb`` into a temporary folder and starts ``postgres`` on a
free loopback port (its unix socket in the data folder, fsync off: a test database need not
survive a power cut). ``initdb`` refuses to run as root, and CI runs as root: then both run as the
``postgres`` user (``runuser``), the folder handed to it. ``pg_url`` gives each test an empty
database of its own, dropped afterwards, and ``pg_store_url`` one at archiver's schema.
Authentication: ``trust`` on loopback, except for the role ``PASSWORD_ROLE``, which must give
``PASSWORD`` (scram-sha-256), for the tests of password hygiene.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from archiver.store.pgschema import init_schema

PASSWORD_ROLE = "archiver_pw"
PASSWORD = "s3cret-Pa55-in-test"
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 60.0
_HBA = f"""\
local all all trust
host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256
host all all 127.0.0.1/32 trust
"""


@dataclass(frozen=True)
class PostgresServer:
    """A running server: its port and superuser; ``url`` names one of its databases."""

    port: int
    user: str
    data: Path

    def url(self, database: str = "postgres", *, user: str | None = None) -> str:
        return f"postgresql://{user or self.user}@127.0.0.1:{self.port}/{database}"


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError("no PostgreSQL server: run `bash tools/install_servers.sh` (README's test line)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(server: PostgresServer, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Return once the server accepts connections; RuntimeError if it died or the deadline passed."""
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"postgres exited with {proc.returncode}: {log.read_text(errors='replace')}")
        try:
            psycopg.connect(server.url(), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres not ready after {_START_TIMEOUT}s: "
                                   f"{log.read_text(errors='replace')}") from None
        time.sleep(0.05)  # polling with a deadline: the server gives no other readiness signal


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session, stopped (fast shutdown) at its end."""
    bindir = _bin_dir()
    base = Path(tempfile.mkdtemp(prefix="archiver-pg-"))
    data = base / "data"
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    user = "postgres" if as_root else os.environ.get("USER") or "postgres"
    if as_root:
        shutil.chown(base, "postgres", "postgres")
    subprocess.run([*prefix, str(bindir / "initdb"), "-D", str(data), "-U", user, "-A", "trust",
                    "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
                   check=True, capture_output=True)
    (data / "pg_hba.conf").write_text(_HBA)
    port = _free_port()
    log = base / "postgres.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*prefix, str(bindir / "postgres"), "-D", str(data), "-p", str(port),
             "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={data}",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
            stdout=out, stderr=subprocess.STDOUT)
    server = PostgresServer(port, user, data)
    try:
        _wait_ready(server, proc, log)
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        yield server
    finally:
        _stop(proc, data)
        shutil.rmtree(base, ignore_errors=True)


def _stop(proc: subprocess.Popen[bytes], data: Path) -> None:
    """Fast shutdown: SIGINT to the postmaster itself (runuser may stand between it and us)."""
    pidfile = data / "postmaster.pid"
    if proc.poll() is None and pidfile.exists():
        os.kill(int(pidfile.read_text().split("\n", 1)[0]), signal.SIGINT)
    try:
        proc.wait(_STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


_numbers = itertools.count()


def _database(server: PostgresServer, template: str = "template1") -> Iterator[str]:
    name = f"test_{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    yield server.url(name)
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a fresh, empty database for one test (dropped after it)."""
    yield from _database(postgres_server)


@pytest.fixture(scope="session")
def _pg_schema_template(postgres_server: PostgresServer) -> str:
    """A database with archiver's schema, made once, that ``pg_store_url`` copies."""
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE archiver_schema")
    init_schema(postgres_server.url("archiver_schema"))
    return "archiver_schema"


@pytest.fixture
def pg_store_url(postgres_server: PostgresServer, _pg_schema_template: str) -> Iterator[str]:
    """The URL of a fresh database at archiver's current schema (as ``archiver store init`` leaves it)."""
    yield from _database(postgres_server, _pg_schema_template)
