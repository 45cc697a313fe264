"""The crawler processes' status in PostgreSQL: column ``status`` of table ``crawlers``.

A crawler process registers its row of ``crawlers`` (process, epoch, host, pid, started,
heartbeat) when it starts and renews the heartbeat while it runs; :meth:`PgStatus.write` only
replaces the status a process reports of itself, so a process that has not registered is told so
rather than reported by a row nobody renews. :meth:`PgStatus.read_all` gives every process of the
cluster, running or gone, each with its host and how many seconds ago its heartbeat was renewed
(``heartbeat_age``, by the database's clock, so the machines' clocks need not agree).
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from archiver.store.postgres.connection import PgConnection, StoreWatch, retried
from archiver.store.postgres.schema import StoreError

_READ = (
    "SELECT process, epoch, host, pid, started, extract(epoch FROM now() - heartbeat)::float8, status"
    " FROM crawlers ORDER BY process"
)


class PgStatus:
    """Each crawler process's status in the PostgreSQL database at ``url`` (a StatusStore).

    One connection, made again if the server went away (``store.postgres.connection``), used from one
    thread at a time (psycopg serialises the calls of several).
    """

    def __init__(self, url: str, *, watch: StoreWatch | None = None) -> None:
        self.url = url
        self._db = PgConnection(url, watch=watch)

    @retried
    def write(self, process: int, status: dict[str, Any]) -> None:
        """Replace what process ``process`` says of itself; StoreError if it has no row."""
        done = self._db.execute("UPDATE crawlers SET status = %s WHERE process = %s",
                                (Jsonb(status), process))
        if done.rowcount == 0:
            raise StoreError(f"crawler process {process} has no row in table crawlers: "
                             "a crawler registers itself before it reports its status")

    @retried
    def read_all(self) -> list[dict[str, Any]]:
        """Every registered process, in process order: its last status (empty before the first),
        with ``process``, ``epoch``, ``host``, ``pid`` and ``heartbeat_age`` (seconds) from its row."""
        out = []
        for process, epoch, host, pid, started, age, status in self._db.execute(_READ).fetchall():
            entry = dict(status or {})
            entry.setdefault("started", started)
            entry.update(process=process, epoch=epoch, host=host, pid=pid,
                         heartbeat_age=round(max(age, 0.0), 3))
            out.append(entry)
        return out

    def close(self) -> None:
        self._db.close()
