"""Every site's inbox in one SQLite database, ``<root>/crawl-queues/inbox.sqlite``: the URLs other
processes queued for a site (the links batch; ``archiver seeds`` while a crawler holds the site),
waiting for the site's crawl queue to merge them into its log (archiver.queues.embedded.crawlqueue).

Table ``inbox``: one row per append, the site's origin and its ``depth<TAB>url\\n`` lines as one
blob. A links checkpoint appends to tens of thousands of sites at once: one row each, in one
transaction, costs no directory and no file per site (a site gets its directory when its crawl
queue is first opened). ``stage`` gathers appends in memory and ``commit`` writes them in one
transaction that fsyncs the WAL, so they are durable when it returns; a crash before loses only
what was staged. SQLite then copies a WAL grown past 1,000 pages into the database at once, in
the commit; a writer opened with ``checkpoints=False`` (the links batch) leaves that to
``checkpoint``, which it runs beside other work: a links checkpoint's tens of megabytes of lines
would otherwise be written twice before its commit returns.

A merge reads a site's rows (``take``: their lines and the highest row id), adds the lines to the
log through the site's bitmap, fsyncs the log, and only then deletes the rows up to that id
(``delete``): rows appended meanwhile have higher ids (AUTOINCREMENT never hands out an id
again) and stay. A crash between the log's fsync and the delete leaves the rows, which the next
merge adds again and the bitmap drops; so the delete need not be durable.

Crawler processes, the links batch and seeds runs use the file at once: every transaction is
short, and a writer waits for another's lock up to ``store.embedded.sqlite.INBOX_TIMEOUT``. ``waiting``
(a crawler's event loop asks it when a queue runs dry) reads through a read-only connection that
never waits. Only ``commit`` creates the file; readers of an absent one find no rows.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from archiver.store.durable import fsync_directory
from archiver.store.embedded import sqlite

INBOXES = "inbox.sqlite"
# A links checkpoint writes tens of megabytes of lines at once: with 16 KiB pages a quarter of the
# WAL frames and B-tree pages that 4 KiB took, and 50,000 sites' rows (36 MB) go in in 0.19-0.24 s
# instead of 0.30-0.32 s. A file made with 4 KiB pages keeps them.
PAGE_SIZE = 16384
_SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    origin TEXT NOT NULL,
    lines BLOB NOT NULL   -- depth<TAB>url\\n lines, whole
);
CREATE INDEX IF NOT EXISTS inbox_origin ON inbox (origin);
"""


class InboxDatabase:
    """The inbox database at ``path``; one per process, usable from several threads."""

    def __init__(self, path: Path, *, checkpoints: bool = True) -> None:
        """``checkpoints`` False: commits leave the WAL to ``checkpoint`` (see the module docstring)."""
        self.path = path
        self._checkpoints = checkpoints
        self._lock = threading.Lock()  # the writer connection, one thread at a time
        self._writer: sqlite3.Connection | None = None
        self._probe_lock = threading.Lock()
        self._probe: sqlite3.Connection | None = None
        self._staged: list[tuple[str, bytes | memoryview]] = []

    def stage(self, lines: Mapping[str, bytes | memoryview]) -> None:
        """Keep each site's ``lines`` (whole ``depth<TAB>url\\n`` lines) until ``commit``."""
        self._staged += [(origin, site_lines) for origin, site_lines in lines.items() if site_lines]

    def commit(self) -> None:
        """Write every staged append in one transaction, durable when this returns (the file is
        created if absent). On an error the appends stay staged."""
        with self._lock:
            rows, self._staged = self._staged, []
            if not rows:
                return
            try:
                db, new_dirs = self._open_writer(create=True)
                assert db is not None
                with sqlite.transaction(db, durable=True):
                    sqlite.insert_rows(db, "INSERT INTO inbox (origin, lines)", rows)
            except BaseException:
                self._staged[:0] = rows
                raise
        for directory in new_dirs:  # the new file's name (and its folder's) made durable
            fsync_directory(directory)

    def checkpoint(self) -> None:
        """Copy what the commits left in the WAL into the database, waiting for no reader (a
        passive checkpoint: pages a reader still needs wait for the next one)."""
        with self._lock:
            if self._writer is not None:
                self._writer.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def take(self, origin: str) -> tuple[int, bytes] | None:
        """The highest row id of ``origin`` and the lines of its rows up to it, oldest first; None
        if it has none."""
        with self._lock:
            db, _ = self._open_writer(create=False)
            if db is None:
                return None
            rows = db.execute("SELECT id, lines FROM inbox WHERE origin = ? ORDER BY id",
                              (origin,)).fetchall()
        if not rows:
            return None
        return rows[-1][0], b"".join(lines for _, lines in rows)

    def delete(self, origin: str, last_row: int) -> None:
        """Remove the rows of ``origin`` up to id ``last_row`` (those a ``take`` returned)."""
        with self._lock:
            db, _ = self._open_writer(create=False)
            if db is not None:
                db.execute("DELETE FROM inbox WHERE origin = ? AND id <= ?", (origin, last_row))

    def waiting(self, origin: str) -> bool:
        """True if ``origin`` may have rows: it has some, or the file was busy (never waits)."""
        with self._probe_lock:
            if self._probe is None:
                if not self.path.exists():
                    return False
                self._probe = sqlite.open_reader(self.path, sqlite.INBOX_PROBE_TIMEOUT)
            try:
                row = self._probe.execute("SELECT EXISTS (SELECT 1 FROM inbox WHERE origin = ?)",
                                          (origin,)).fetchone()
            except sqlite3.OperationalError:  # locked, or created this instant: the merge looks
                return True
        return bool(row[0])

    def origins(self) -> list[str]:
        """Every origin with rows, sorted."""
        with self._lock:
            db, _ = self._open_writer(create=False)
            if db is None:
                return []
            return [origin for (origin,) in db.execute("SELECT DISTINCT origin FROM inbox ORDER BY origin")]

    def close(self) -> None:
        """Close the connections; appends still staged are lost."""
        with self._lock, self._probe_lock:
            self._staged = []
            if self._probe is not None:
                sqlite.close(self._probe, writer=False)
                self._probe = None
            if self._writer is not None:
                sqlite.close(self._writer, writer=True)
                self._writer = None

    def _open_writer(self, *, create: bool) -> tuple[sqlite3.Connection | None, list[Path]]:
        """The writer connection (the caller holds ``_lock``), and the folders whose new entries
        (this file, the folder itself) must be fsynced once written; None if the file is absent
        and not to be created."""
        if self._writer is not None:
            return self._writer, []
        new_dirs = []
        if not self.path.exists():
            if not create:
                return None, []
            new_dirs.append(self.path.parent)
            if not self.path.parent.exists():
                self.path.parent.mkdir(parents=True)
                new_dirs.append(self.path.parent.parent)
        db = sqlite.open_writer(self.path, sqlite.INBOX_TIMEOUT, cache_mib=sqlite.SITES_CACHE_MIB,
                                page_size=PAGE_SIZE)
        try:
            if not self._checkpoints:
                db.execute("PRAGMA wal_autocheckpoint = 0")
            db.executescript(_SCHEMA)
        except BaseException:
            db.close()
            raise
        self._writer = db
        return db, new_dirs


@dataclass(frozen=True, slots=True)
class SiteInbox:
    """One site's rows in the inbox database, as its crawl queue reads them."""

    database: InboxDatabase
    origin: str

    def waiting(self) -> bool:
        return self.database.waiting(self.origin)

    def take(self) -> tuple[int, bytes] | None:
        return self.database.take(self.origin)

    def delete(self, last_row: int) -> None:
        self.database.delete(self.origin, last_row)
