"""Throwaway PostgreSQL servers on 127.0.0.1, for the tests and the benchmarks, and their faults.

``running_postgres()`` runs Debian's ``initdb`` into a temporary folder and starts the server with
``pg_ctl`` on a free loopback port (its unix socket in the data folder; fsync off unless
``durable``: a test database need not survive a power cut), and stops it (fast shutdown) on the
way out. ``initdb`` refuses to run as root, and CI runs as root: then the server's programs run
as the ``postgres`` user (``runuser``), the folder handed to it. Authentication: ``trust`` on
loopback (replication included), except for the role ``PASSWORD_ROLE``, which must give
``PASSWORD`` (scram-sha-256), for the tests of password hygiene.

The faults a deployment meets, for the fault tests and ``tools/bench_chaos.py``:
``PostgresServer.restart`` (``pg_ctl restart``, by default ``-m immediate``: a crash and its
recovery), ``stop`` and ``start``; ``running_standby(primary)`` adds a streaming-replication
standby (``pg_basebackup -R``) on a free port, and ``fail_over(primary, standby)`` stops the
primary (fast: the standby receives every WAL record it wrote) and promotes the standby;
``rejoin(old, primary)`` makes a stopped former primary a standby of the new one, on its own
port, so that failovers can go back and forth behind one multi-host URL (``multi_host_url``);
``switch_over(primary, standby)`` does both and gives the pair the other way round.
``store_database`` makes a database at archiver's schema; a server whose faults are caused runs
with ``FAULT_SETTINGS``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shlex
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
_HBA = f"""\
local all all trust
host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256
host all all 127.0.0.1/32 trust
host replication all 127.0.0.1/32 trust
"""
# What a server that need not survive a power cut skips.
_VOLATILE = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
# For a server whose faults are caused: a commit is answered once its WAL is written (fsync stays
# off: the machine does not crash, only the server), so a crash loses no commit it answered.
FAULT_SETTINGS = {"synchronous_commit": "on"}


@dataclass(frozen=True)
class PostgresServer:
    """A server started by ``pg_ctl``: its port, superuser and data folder; ``url`` names one of
    its databases. The methods below stop, start, restart and promote it."""

    port: int
    user: str
    data: Path

    def url(self, database: str = "postgres", *, user: str | None = None) -> str:
        return f"postgresql://{user or self.user}@127.0.0.1:{self.port}/{database}"

    @property
    def log(self) -> Path:
        return self.data.parent / f"postgres-{self.port}.log"

    def restart(self, mode: str = "immediate") -> None:
        """Stop the server (``immediate``: every backend killed at once, as in a crash, and crash
        recovery at the start) and start it again; returns once it accepts connections."""
        _pg_ctl(self, "restart", "-m", mode, "-l", str(self.log))
        _wait_ready(self)

    def stop(self, mode: str = "fast") -> None:
        _pg_ctl(self, "stop", "-m", mode)

    def start(self) -> None:
        """Start a stopped server on its port with the settings it was first started with."""
        _pg_ctl(self, "start", "-l", str(self.log), "-o", _options(self.port, self.data, _settings_of(self)))
        _wait_ready(self)

    def promote(self) -> None:
        """Promote a standby to a primary; returns once it takes writes."""
        _pg_ctl(self, "promote")
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            with psycopg.connect(self.url(), autocommit=True, connect_timeout=2) as conn:
                if conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,):
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby on port {self.port} was not promoted: {self._tail()}")
            time.sleep(0.05)  # polling with a deadline: pg_ctl promote -w returns before writes

    def is_running(self) -> bool:
        return subprocess.run([*_runner(), str(_bin_dir() / "pg_ctl"), "-D", str(self.data), "status"],
                              capture_output=True, check=False).returncode == 0

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"


def store_database(server: PostgresServer, name: str = "archive") -> str:
    """A new database ``name`` on ``server`` at archiver's schema (``archiver store init``); its
    URL."""
    from archiver.store.postgres.schema import init_schema

    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    init_schema(server.url(name))
    return server.url(name)


def multi_host_url(servers: list[PostgresServer], database: str, *, user: str | None = None) -> str:
    """The libpq URL that reaches whichever of ``servers`` takes writes."""
    hosts = ",".join(f"127.0.0.1:{s.port}" for s in servers)
    return (f"postgresql://{user or servers[0].user}@{hosts}/{database}"
            "?target_session_attrs=read-write")


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError("no PostgreSQL server: run `bash tools/install_servers.sh` (README's test line)")
    return Path(found[-1]).parent


def _runner() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_ctl(server: PostgresServer, action: str, *args: str) -> None:
    """``pg_ctl ACTION -w``; its output goes to the server's log (a started server keeps the
    descriptors it is given open: never a pipe of ours)."""
    server.log.touch()
    _own(server.log)  # the server appends to it (-l) as its own user
    with server.log.open("ab") as log:
        done = subprocess.run([*_runner(), str(_bin_dir() / "pg_ctl"), action, "-w", "-t",
                               str(int(_START_TIMEOUT)), "-D", str(server.data), *args],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                              check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pg_ctl {action} failed ({done.returncode}): {server._tail()}")


def _options(port: int, data: Path, settings: dict[str, str]) -> str:
    return shlex.join(["-p", str(port), "-c", "listen_addresses=127.0.0.1",
                       "-c", f"unix_socket_directories={data}",
                       *[arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]])


def _settings_of(server: PostgresServer) -> dict[str, str]:
    """The settings a server was started with (kept beside its data folder)."""
    path = server.data.parent / f"settings-{server.port}"
    lines = path.read_text().splitlines() if path.exists() else []
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _keep_settings(server: PostgresServer, settings: dict[str, str]) -> None:
    path = server.data.parent / f"settings-{server.port}"
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))


def _wait_ready(server: PostgresServer) -> None:
    """Return once the server accepts connections; RuntimeError past the deadline."""
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        try:
            psycopg.connect(server.url(), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres not ready after {_START_TIMEOUT}s: {server._tail()}") from None
        time.sleep(0.05)  # polling with a deadline: the server gives no other readiness signal


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


@contextlib.contextmanager
def running_postgres(*, durable: bool = False, settings: dict[str, str] | None = None
                     ) -> Iterator[PostgresServer]:
    """A PostgreSQL server that runs until the block ends; ``durable`` keeps fsync on (the
    benchmarks: a fair comparison with SQLite's synced writes); ``settings`` are more server
    settings (``{"shared_buffers": "4GB"}``), over the volatile ones when not ``durable``."""
    bindir = _bin_dir()
    base = Path(tempfile.mkdtemp(prefix="archiver-pg-"))
    data = base / "data"
    user = "postgres" if os.geteuid() == 0 else os.environ.get("USER") or "postgres"
    _own(base)
    subprocess.run([*_runner(), str(bindir / "initdb"), "-D", str(data), "-U", user, "-A", "trust",
                    "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
                   check=True, capture_output=True)
    (data / "pg_hba.conf").write_text(_HBA)
    server = PostgresServer(_free_port(), user, data)
    _keep_settings(server, {**({} if durable else _VOLATILE), **(settings or {})})
    try:
        server.start()
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        yield server
    finally:
        _stop_quietly(server)
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def running_standby(primary: PostgresServer) -> Iterator[PostgresServer]:
    """A streaming-replication standby of ``primary`` (``pg_basebackup -R``) on a free port, with
    the primary's settings, running until the block ends."""
    folder = primary.data.parent / f"standby-{time.monotonic_ns()}"
    standby = PostgresServer(_free_port(), primary.user, folder)
    try:
        _base_backup(primary, standby)
        yield standby
    finally:
        _stop_quietly(standby)
        shutil.rmtree(standby.data, ignore_errors=True)


def _base_backup(primary: PostgresServer, standby: PostgresServer) -> None:
    """Copy ``primary`` into ``standby.data`` as its streaming standby, and start it there."""
    subprocess.run([*_runner(), str(_bin_dir() / "pg_basebackup"), "-h", "127.0.0.1", "-p",
                    str(primary.port), "-U", primary.user, "-D", str(standby.data), "-R",
                    "-X", "stream", "--no-sync", "--checkpoint=fast"], check=True, capture_output=True)
    for copied in standby.data.glob(".s.PGSQL.*"):  # the primary's socket lock, copied with
        copied.unlink()                              # the data (its sockets live there)
    _keep_settings(standby, _settings_of(primary))
    standby.start()
    _wait_streaming(primary, standby)  # ready: a failover before that would lose what it lacks


def fail_over(primary: PostgresServer, standby: PostgresServer) -> None:
    """A planned failover, losing no commit: once the standby streams from the primary (after a
    restart of either it reconnects within seconds), stop the primary (fast shutdown: it sends
    the standby every WAL record first), wait until the standby has them all (past the primary's
    shutdown checkpoint), and promote it. (Promoted at once, a standby can miss the last records
    still on their way: the chaos benchmark saw leases and bundles' states go back seconds.)"""
    _wait_streaming(primary, standby)
    primary.stop("fast")
    last = _checkpoint_lsn(primary)
    deadline = time.monotonic() + _START_TIMEOUT
    with psycopg.connect(standby.url(), autocommit=True) as conn:
        # Received and flushed: promotion replays every record on the standby's disk first.
        while conn.execute("SELECT pg_last_wal_receive_lsn() > %s::pg_lsn", (last,)).fetchone() != (True,):
            if time.monotonic() > deadline:
                found = conn.execute("SELECT pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()").fetchone()
                raise RuntimeError(f"the standby on port {standby.port} did not receive the primary's"
                                   f" WAL up to {last} (received, replayed: {found})")
            time.sleep(0.05)  # polling with a deadline: the server gives no other signal
    standby.promote()


def _wait_streaming(primary: PostgresServer, standby: PostgresServer) -> None:
    """Return once ``primary`` streams WAL to a standby (``standby``, the one on its own)."""
    deadline = time.monotonic() + _START_TIMEOUT
    with psycopg.connect(primary.url(), autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
                           ).fetchone() == (0,):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby on port {standby.port} does not stream: {standby._tail()}")
            time.sleep(0.05)  # polling with a deadline: the server gives no other signal


def _checkpoint_lsn(server: PostgresServer) -> str:
    """The WAL location of a stopped server's last checkpoint (its shutdown checkpoint)."""
    done = subprocess.run([*_runner(), str(_bin_dir() / "pg_controldata"), "-D", str(server.data)],
                          capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"})
    for line in done.stdout.splitlines():
        if line.startswith("Latest checkpoint location:"):
            return line.split(":", 1)[1].strip()
    raise RuntimeError(f"pg_controldata gave no checkpoint location: {done.stdout[-500:]}")


def rejoin(former: PostgresServer, primary: PostgresServer) -> None:
    """Make the stopped former primary ``former`` a standby of ``primary``, on its own port and
    in its own folder (its data is copied anew), so that the next failover can come back."""
    shutil.rmtree(former.data)
    _base_backup(primary, former)


def switch_over(primary: PostgresServer, standby: PostgresServer
                ) -> tuple[PostgresServer, PostgresServer]:
    """``fail_over`` to ``standby``, then ``rejoin`` the former primary as its standby: the pair
    (primary, standby) after, ready for the next switch back."""
    fail_over(primary, standby)
    rejoin(primary, standby)
    return standby, primary


def _stop_quietly(server: PostgresServer) -> None:
    """Fast shutdown of a server still running, by a signal to its postmaster, waited for: no
    program is started, so it also works where none may be (a test session's last teardown may
    come in a unit test's, which refuses child processes)."""
    try:
        pid = int((server.data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):  # stopped, or never started
        return
    deadline = time.monotonic() + _START_TIMEOUT
    with contextlib.suppress(ProcessLookupError):  # gone: stopped
        os.kill(pid, signal.SIGINT)
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.05)  # polling with a deadline: the postmaster is not our child
