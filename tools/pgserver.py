"""A throwaway PostgreSQL server on 127.0.0.1, for the tests and the benchmarks.

``running_postgres()`` runs Debian's ``initdb`` into a temporary folder and starts ``postgres``
on a free loopback port (its unix socket in the data folder; fsync off unless ``durable``: a
test database need not survive a power cut), and stops it (fast shutdown) on the way out.
``initdb`` refuses to run as root, and CI runs as root: then both run as the ``postgres`` user
(``runuser``), the folder handed to it. Authentication: ``trust`` on loopback, except for the
role ``PASSWORD_ROLE``, which must give ``PASSWORD`` (scram-sha-256), for the tests of password
hygiene.
"""

from __future__ import annotations

import contextlib
import glob
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


@contextlib.contextmanager
def running_postgres(*, durable: bool = False, settings: dict[str, str] | None = None
                     ) -> Iterator[PostgresServer]:
    """A PostgreSQL server that runs until the block ends; ``durable`` keeps fsync on (the
    benchmarks: a fair comparison with SQLite's synced writes); ``settings`` are more server
    settings (``{"shared_buffers": "4GB"}``)."""
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
             *([] if durable else
               ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]),
             *[arg for key, value in (settings or {}).items() for arg in ("-c", f"{key}={value}")]],
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
