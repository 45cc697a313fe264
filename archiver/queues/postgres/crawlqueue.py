"""Each site's crawl queue in PostgreSQL, so that any machine can continue any site.

Tables (``store.postgres.schema`` version 2): ``crawl_entries`` holds a site's URLs in discovery order
(``seq`` from 1: the embedded queue's log), ``crawl_cursors`` the seq of the last finished entry
with the site's page and byte totals (its cursor file) and the epoch allowed to write, and
``crawl_inbox`` the URLs other processes queued for the site (its inbox).

A queue is opened only by the holder of the site's lease (``Leases``): opening records the lease's
epoch in ``crawl_cursors``, and every later write checks it, and the lease itself in ``sites``
(its row locked shared until the commit, so no claim slips between the check and the write), in
the same transaction, so a holder whose lease went to another process writes nothing more (its
queue is *fenced*: events ``fenced-write`` and ``lease-lost``, and the visit stops). Opening
rebuilds the site's Bloom bitmap from every entry, keeps the entries after the cursor in memory,
with the URLs found since (not yet written), and merges the inbox, as the embedded queue does.
Writes happen in worker threads: ``add_to`` gives the crawler's group commit a job that writes the
new entries and the cursor saved at the previous commit, whose records (and pending catalog
entries) are durable by then; the cursor never runs ahead of the entries discovered before it.

Columns ``budget_day`` and ``budget_pages`` of ``crawl_cursors`` (version 11) are the site's
daily page count for its sheet's budget (archiver.web.sheets), written with the cursor.

Table ``crawl_decisions`` (version 7) is the sites' decision logs (archiver.queues.decisions),
written with the entries; a site keeps between half and all of its newest ``crawl.max_decisions``.

``refetch`` inbox rows (URLs of a bundle lost with its machine) bypass the bitmap: the site has
seen them, but their records are gone. A refetch is queued once, and not if the visit has queued
its URL itself (still ahead, or fetched since: after the capture that was lost); it goes into the
bitmap, so the visit that finds it again queues it no more.

A call is run again on a new connection if the server went away (``store.postgres.connection``). A write
of entries whose answer was lost is settled by reading whether its last entry (or decision) is
there under our epoch; the cursor, the budget and the inbox rows deleted are set, so they may be
written twice; inbox rows appended twice are dropped by the site's bitmap when merged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from archiver.queues.bloom import GrowingBloom
from archiver.queues.decisions import MAX_DETAIL, Decision, loggable
from archiver.queues.leases import Leases, lost_to
from archiver.queues.models import CrawlQueueBusy, Entry, QueuePosition, parse_entry
from archiver.store.durable import SyncJob
from archiver.store.postgres.connection import NOT_DONE, NotDone, PgConnection, StoreWatch

log = logging.getLogger("archiver.queues.postgres.crawlqueue")

_FENCE = "UPDATE crawl_cursors SET {} WHERE origin = %(origin)s AND epoch = %(epoch)s"
_HELD = "origin = %(origin)s AND epoch = %(epoch)s AND state = 'active'"  # the site's lease


def _check(url: str, depth: int) -> None:
    if depth < 0 or not url or "\n" in url or "\x00" in url:
        raise ValueError(f"cannot queue {url!r} at depth {depth}")


@dataclass
class PgInbox:
    """Inbox rows taken for a merge: (id, url, depth, refetch) each; ``handled``: the refetched
    URLs this visit has queued itself (fetched since the loss, or still to fetch)."""

    rows: list[tuple[int, str, int, bool]]
    handled: set[str] = field(default_factory=set)

    def release(self) -> None:
        """The merge failed: the rows stay in the table for the next one."""


class PgCrawlQueue:
    """One site's crawl queue, held by the visit that holds the site's lease."""

    def __init__(self, queues: PgCrawlQueues, origin: str, epoch: int, bloom: GrowingBloom) -> None:
        self._queues = queues
        self.origin = origin
        self.epoch = epoch
        self._bloom = bloom
        self.cursor = 0
        self.pages = 0
        self.bytes = 0
        self._restarted: float | None = None
        self._ahead: deque[Entry] = deque()  # entries after the cursor not handed out yet
        self._count = 0  # entries in the queue (written or not)
        self._next_seq = 1
        self._new: list[Entry] = []  # entries not written yet
        self._new_lock = threading.Lock()  # _new is taken by the group commit's thread
        self._to_save: tuple[int, int, int] | None = None  # a saved mark not written yet
        self._written = (0, 0, 0)
        self._inbox_checked = False
        self._first = 0  # entries after this seq are this visit's to hand out (the cursor at open)
        self.fenced = False
        self._decisions: list[Decision] = []  # not written yet (under _new_lock)
        self._logged: set[int] = set()  # hashes of (kind, url) this visit logged
        self._decision_rows: int | None = None  # the site's rows in crawl_decisions, once counted
        self._budget = self._budget_written = (0, 0)  # (day, pages) of the daily budget

    # -- reading and adding

    def add(self, url: str, depth: int) -> bool:
        _check(url, depth)
        if not self._bloom.add(url):
            return False
        self._append(url, depth)
        return True

    def known(self, url: str) -> bool:
        return url in self._bloom

    def decide(self, url: str, kind: str, detail: str = "") -> None:
        """Log why ``url`` is not captured, once per visit per kind (written with the entries)."""
        key = hash((kind, url))
        if not self._queues.max_decisions or key in self._logged or not loggable(url):
            return
        self._logged.add(key)
        text = detail[:MAX_DETAIL].encode(errors="replace").decode()  # no lone surrogate
        with self._new_lock:
            self._decisions.append(Decision(time.time(), kind, url, text))

    def requeue(self, url: str, depth: int) -> None:
        _check(url, depth)
        self._append(url, depth)

    def _append(self, url: str, depth: int) -> None:
        entry = Entry(url, depth, self._next_seq)
        self._next_seq += 1
        self._count += 1
        self._ahead.append(entry)
        with self._new_lock:
            self._new.append(entry)

    def next(self, *, merge: bool = True) -> Entry | None:
        """The next entry, or None; the inbox is merged by the crawler (``take_inbox``)."""
        if self._ahead:
            return self._ahead.popleft()
        return None

    def commit(self, entry: Entry, *, pages: int, bytes_: int) -> None:
        self.cursor, self.pages, self.bytes = entry.end, pages, bytes_

    def mark(self) -> tuple[int, int, int]:
        return self.cursor, self.pages, self.bytes

    def save(self, mark: tuple[int, int, int]) -> None:
        """Keep ``mark`` (its records are durable) for the next write: the next group commit's
        job, or ``close``."""
        self._to_save = mark

    def day_pages(self, day: int) -> int:
        counted_day, pages = self._budget
        return pages if counted_day == day else 0

    def count_day_page(self, day: int) -> None:
        """Count one page fetched on ``day`` (written with the next group commit)."""
        self._budget = (day, self.day_pages(day) + 1)

    @property
    def restarted_at(self) -> float | None:
        return self._restarted

    @property
    def pending(self) -> int:
        return len(self._ahead)

    def __len__(self) -> int:
        return self._count

    # -- the inbox

    def inbox_waiting(self) -> bool:
        """True once each time the queue runs dry: the inbox is then read in a worker thread."""
        return not self._inbox_checked

    def take_inbox(self) -> PgInbox | None:
        """Blocking: the site's inbox rows, or None if it is empty. A refetch of a URL this visit
        queued itself (an entry after ``_first``: the capture lost was older) is ``handled``,
        while the lease holds (the captures of this visit's own bundle are lost only once its
        heartbeat is older than the TTL, after the lease's deadline)."""
        self._inbox_checked = True
        held = self._queues.leases.holds(self.origin, time.monotonic())
        with self._queues.connection() as db:
            rows = db.read("SELECT id, url, depth, refetch FROM crawl_inbox WHERE origin = %s"
                           " ORDER BY id", (self.origin,))
            refetched = {url for _, url, _, refetch in rows if refetch} if held else set()
            handled = {row[0] for row in db.read(
                "SELECT url FROM crawl_entries WHERE origin = %s AND seq > %s AND url = ANY(%s)",
                (self.origin, self._first, sorted(refetched)))} if refetched else set()
        with self._new_lock:  # found in this visit, not written yet
            handled.update(entry.url for entry in self._new if entry.url in refetched)
        return PgInbox(rows, handled) if rows else None

    def merge(self, inbox: PgInbox) -> bool:
        """Queue the inbox's URLs (through the bitmap unless refetched: a refetch is queued
        once, and not while the URL is still ahead); True if any was new."""
        added = False
        ahead: set[str] | None = None
        for _, url, depth, refetch in inbox.rows:
            try:
                if refetch:
                    if ahead is None:
                        ahead = {entry.url for entry in self._ahead} | inbox.handled
                    if url not in ahead:
                        self.requeue(url, depth)
                        ahead.add(url)
                        # Its entry may never have been written (the vanished holder found it
                        # and died before its commit): found again in this visit, not queued twice.
                        self._bloom.add(url)
                        added = True
                else:
                    added = self.add(url, depth) or added
            except ValueError:
                continue  # a row no crawl queue can hold: dropped with the others
        if added:
            self._inbox_checked = False
        return added

    def finish_inbox(self, inbox: PgInbox, added: bool) -> None:
        """Blocking: write the merged entries, then delete the inbox rows, in one transaction."""
        ids = [row[0] for row in inbox.rows]
        self._write(delete_inbox=ids)

    # -- writing

    def _take_new(self) -> tuple[list[Entry], list[Decision]]:
        with self._new_lock:
            new, self._new = self._new, []
            decisions, self._decisions = self._decisions, []
        return new, decisions

    def _write(self, *, delete_inbox: list[int] | None = None) -> None:
        """Write the new entries, decisions and the saved mark, fenced by the lease's epoch
        (blocking)."""
        new, decisions = self._take_new()
        mark, budget = self._to_save, self._budget
        if self.fenced or (not new and not decisions and not delete_inbox
                           and (mark is None or mark == self._written)
                           and budget == self._budget_written):
            return
        with self._queues.connection() as db:
            written = db.run(
                lambda: self._write_rows(db, new, decisions, mark, budget, delete_inbox),
                resolve=lambda: self._rows_written(db, new, decisions))
            if not written:
                self._fence(db, "crawl queue", entries=len(new), decisions=len(decisions),
                            cursor=None if mark is None else mark[0])
                return
        if mark is not None:
            self._written = mark
        self._budget_written = budget

    def _write_rows(self, db: PgConnection, new: list[Entry], decisions: list[Decision],
                    mark: tuple[int, int, int] | None, budget: tuple[int, int],
                    delete_inbox: list[int] | None) -> bool:
        """One transaction; False (nothing written) if another process holds the site now."""
        with db.transaction():
            sets = "budget_day = %(day)s, budget_pages = %(day_pages)s" + (
                "" if mark is None else ", cursor = %(cursor)s, pages = %(pages)s, bytes = %(bytes)s")
            cursor, pages, bytes_ = mark or (0, 0, 0)
            if not self._holds(db) or db.execute(_FENCE.format(sets), {
                    "origin": self.origin, "epoch": self.epoch, "cursor": cursor, "pages": pages,
                    "bytes": bytes_, "day": budget[0], "day_pages": budget[1]}).rowcount != 1:
                return False
            if new:
                with db.cursor().copy("COPY crawl_entries (origin, seq, depth, url) FROM STDIN") as copy:
                    for entry in new:
                        copy.write_row((self.origin, entry.end, entry.depth, entry.url))
            if delete_inbox:
                db.execute("DELETE FROM crawl_inbox WHERE origin = %s AND id = ANY(%s)",
                           (self.origin, delete_inbox))
            if decisions:
                self._write_decisions(db, decisions)
        return True

    def _rows_written(self, db: PgConnection, new: list[Entry], decisions: list[Decision]
                      ) -> bool | NotDone:
        """After a write whose answer was lost: True if it committed, False if another process
        holds the site now, NOT_DONE if it is to be made again (see the module docstring)."""
        row = db.execute("SELECT epoch FROM crawl_cursors WHERE origin = %s", (self.origin,)).fetchone()
        if row is None or row[0] != self.epoch:
            return False
        if new:
            found = db.execute("SELECT EXISTS (SELECT 1 FROM crawl_entries WHERE origin = %s"
                               " AND seq = %s)", (self.origin, new[-1].end)).fetchone()
        elif decisions:
            last = decisions[-1]
            found = db.execute("SELECT EXISTS (SELECT 1 FROM crawl_decisions WHERE origin = %s"
                               " AND url = %s AND at = %s AND kind = %s)",
                               (self.origin, last.url, last.time, last.kind)).fetchone()
        else:
            return NOT_DONE  # the cursor and the inbox rows deleted: set again
        return True if found == (True,) else NOT_DONE

    def _holds(self, db: PgConnection) -> bool:
        """In a write's transaction: True if the site's lease is still ours, its row locked
        (shared) until the commit, so no claim takes the site before the write is in."""
        return db.execute(f"SELECT 1 FROM sites WHERE {_HELD} FOR SHARE",
                          {"origin": self.origin, "epoch": self.epoch}).fetchone() is not None

    def _fence(self, db: PgConnection, write: str, **refused: Any) -> None:
        """A write refused: the lease went to another process (events ``fenced-write`` and
        ``lease-lost``); this queue writes nothing more."""
        self.fenced = True
        leases = self._queues.leases
        rows = db.read("SELECT state, holder, epoch FROM sites WHERE origin = %s", (self.origin,))
        cause = lost_to(rows[0] if rows else None)
        leases.report(log, logging.WARNING, "fenced-write", site=self.origin, write=write,
                      epoch=self.epoch, cause=cause, **refused)
        leases.lose(self.origin, during=write, cause=cause)

    def _write_decisions(self, db: PgConnection, decisions: list[Decision]) -> None:
        """Insert ``decisions``; past ``crawl.max_decisions`` rows, keep the newest half."""
        with db.cursor().copy("COPY crawl_decisions (origin, url, at, kind, detail) FROM STDIN") as copy:
            for d in decisions:
                copy.write_row((self.origin, d.url, d.time, d.kind, d.detail))
        if self._decision_rows is None:
            row = db.execute("SELECT count(*) FROM crawl_decisions WHERE origin = %s",
                             (self.origin,)).fetchone()
            self._decision_rows = row[0] if row else 0
        else:
            self._decision_rows += len(decisions)
        limit = self._queues.max_decisions
        if self._decision_rows > limit:
            keep = max(limit // 2, 1)
            db.execute("DELETE FROM crawl_decisions WHERE origin = %(origin)s AND id < ("
                       "SELECT id FROM crawl_decisions WHERE origin = %(origin)s"
                       " ORDER BY id DESC OFFSET %(keep)s LIMIT 1) + 1",
                       {"origin": self.origin, "keep": keep - 1})
            self._decision_rows = keep

    def add_to(self, job: SyncJob) -> None:
        """Give the group commit's job the writing of the new entries and the last saved mark."""
        job.calls.append(self._write)

    def sync(self) -> None:
        self._write()

    def restart(self) -> None:
        """A recrawl: the cursor goes back to the first entry, the totals to zero (blocking, fenced)."""
        self._write()
        now = time.time()

        def restart() -> list[tuple[Any, ...]] | None:  # twice is harmless: the cursor is set
            with db.transaction():
                if not self._holds(db) or db.execute(
                        _FENCE.format("cursor = 0, pages = 0, bytes = 0, restarted = %(now)s"),
                        {"origin": self.origin, "epoch": self.epoch, "now": now}).rowcount != 1:
                    return None
                return db.execute("SELECT seq, depth, url FROM crawl_entries WHERE origin = %s"
                                  " ORDER BY seq", (self.origin,)).fetchall()

        if self.fenced:
            return
        with self._queues.connection() as db:
            rows = db.run(restart)
            if rows is None:
                self._fence(db, "restart")
                return
        self._ahead = deque(Entry(url, depth, seq) for seq, depth, url in rows)
        self.cursor = self.pages = self.bytes = self._first = 0
        self._to_save = self._written = (0, 0, 0)
        self._restarted = now

    def close(self) -> None:
        """Write what is left (blocking)."""
        self._write()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


class PgCrawlQueues:
    """Every site's crawl queue in PostgreSQL; ``leases`` are the site leases of this process
    (a queue opens only for a site it holds)."""

    def __init__(self, url: str, leases: Leases, *, bloom_bits: int, max_fp: float,
                 max_decisions: int = 0, watch: StoreWatch | None = None) -> None:
        self._db = PgConnection(url, watch=watch)
        self._lock = threading.Lock()
        self.leases = leases
        self.bloom_bits = bloom_bits
        self.max_fp = max_fp
        self.max_decisions = max_decisions
        self._unsent: list[tuple[str, str, int]] = []  # inbox rows appended with sync=False

    def connection(self) -> _Held:
        """The process's one connection, for one thread at a time."""
        return _Held(self._lock, self._db)

    def close(self) -> None:
        self._db.close()

    def open(self, origin: str) -> PgCrawlQueue:
        """Open ``origin``'s queue under our lease (blocking); CrawlQueueBusy if we hold none."""
        epoch = self.leases.epoch(origin)
        if epoch is None:
            raise CrawlQueueBusy(f"crawl queue of {origin} is held by its lease holder")
        def read() -> tuple[tuple[Any, ...] | None, list[tuple[Any, ...]]]:
            with db.transaction():  # twice is harmless: the same epoch recorded again
                row = db.execute(
                    "INSERT INTO crawl_cursors (origin, epoch) SELECT %(origin)s, %(epoch)s"
                    " WHERE EXISTS (SELECT 1 FROM sites WHERE origin = %(origin)s AND epoch = %(epoch)s)"
                    " ON CONFLICT (origin) DO UPDATE SET epoch = EXCLUDED.epoch"
                    " WHERE crawl_cursors.epoch <= EXCLUDED.epoch"
                    " RETURNING cursor, pages, bytes, restarted, budget_day, budget_pages",
                    {"origin": origin, "epoch": epoch}).fetchone()
                if row is None:
                    return None, []
                return row, db.execute("SELECT seq, depth, url FROM crawl_entries WHERE origin = %s"
                                       " ORDER BY seq", (origin,)).fetchall()

        with self.connection() as db:
            row, entries = db.run(read)
            if row is None:
                now = db.read("SELECT state, holder, epoch FROM sites WHERE origin = %s", (origin,))
                self.leases.lose(origin, during="open", cause=lost_to(now[0] if now else None))
                raise CrawlQueueBusy(f"the lease of {origin} went to another process")
        queue = PgCrawlQueue(self, origin, epoch,
                             GrowingBloom(initial_bits=self.bloom_bits, max_fp=self.max_fp))
        queue.cursor, queue.pages, queue.bytes, queue._restarted = row[:4]
        queue._budget = queue._budget_written = (row[4], row[5])
        queue._written = (queue.cursor, queue.pages, queue.bytes)
        queue._first = queue.cursor
        for seq, depth, url in entries:
            queue._bloom.add(url)
            if seq > queue.cursor:
                queue._ahead.append(Entry(url, depth, seq))
        queue._count = len(entries)
        queue._next_seq = entries[-1][0] + 1 if entries else 1
        # As the embedded queue does: a site woken for URLs sent to its inbox (a lost bundle's
        # refetches, links) has them queued before the visit asks what is left.
        inbox = queue.take_inbox()
        if inbox is not None:
            queue.finish_inbox(inbox, queue.merge(inbox))
        queue._inbox_checked = False  # and looked at again when the queue runs dry
        return queue

    def append(self, origin: str, entries: Iterable[tuple[str, int]], *, sync: bool = True) -> None:
        """Queue (url, depth) pairs for ``origin`` in its inbox: at once (one statement), or with
        ``sync`` False at the next ``sync`` (every site's rows in one COPY)."""
        for url, depth in entries:
            _check(url, depth)
            self._unsent.append((origin, url, depth))
        if sync:
            self.sync()

    def append_lines(self, lines: Mapping[str, bytes | memoryview], *, sync: bool = True) -> None:
        rows = []
        for origin, site_lines in lines.items():
            # Line by line, as the embedded inboxes read them.
            for line in bytes(site_lines).splitlines(keepends=True):
                entry = parse_entry(line) if line.endswith(b"\n") else None
                if entry is None:
                    raise ValueError(f"not a depth<TAB>url line for {origin}: {line[:100]!r}")
                rows.append((origin, *entry))
        self._unsent += rows
        if sync:
            self.sync()

    def sync(self) -> None:
        rows, self._unsent = self._unsent, []
        if not rows:
            return

        def append() -> None:  # twice is harmless: a site's bitmap drops the URLs it has
            with db.transaction(), db.cursor().copy(
                    "COPY crawl_inbox (origin, url, depth) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

        with self.connection() as db:
            db.run(append)

    def settle(self) -> None:
        """Nothing to do: PostgreSQL checkpoints by itself."""

    def unfit(self, origin: str) -> str | None:
        return None

    def position(self, origin: str, url: str) -> QueuePosition | None:
        """Where ``url`` stands in ``origin``'s queue (the cursor as last written); None if it was
        never queued there."""
        with self.connection() as db:
            return db.run(lambda: self._position(db, origin, url))

    @staticmethod
    def _position(db: PgConnection, origin: str, url: str) -> QueuePosition | None:
        with db.transaction():
            row = db.execute("SELECT cursor FROM crawl_cursors WHERE origin = %s", (origin,)).fetchone()
            cursor = row[0] if row else 0
            found = db.execute(
                "SELECT seq, depth FROM crawl_entries WHERE origin = %(origin)s AND url = %(url)s"
                " ORDER BY seq > %(cursor)s DESC, CASE WHEN seq > %(cursor)s THEN seq ELSE -seq END"
                " LIMIT 1", {"origin": origin, "url": url, "cursor": cursor}).fetchone()
            if found is None:
                return None
            seq, depth = found
            ahead, pending = db.execute(
                "SELECT count(*) FILTER (WHERE seq < %(seq)s), count(*) FROM crawl_entries"
                " WHERE origin = %(origin)s AND seq > %(cursor)s",
                {"origin": origin, "seq": seq, "cursor": cursor}).fetchone() or (0, 0)
        done = seq <= cursor
        return QueuePosition(depth, done, 0 if done else ahead, pending)

    def decisions(self, origin: str, url: str) -> list[Decision]:
        """The logged decisions about ``url`` in ``origin``'s decision log, oldest first."""
        with self.connection() as db:
            rows = db.read("SELECT at, kind, url, detail FROM crawl_decisions"
                           " WHERE origin = %s AND url = %s ORDER BY id", (origin, url))
        return [Decision(*row) for row in rows]

    def exists(self, origin: str) -> bool:
        with self.connection() as db:
            return db.read("SELECT EXISTS (SELECT 1 FROM crawl_entries WHERE origin = %s)",
                           (origin,)) == [(True,)]


class _Held:
    """``with`` the lock, the connection."""

    def __init__(self, lock: threading.Lock, db: PgConnection) -> None:
        self._lock, self._db = lock, db

    def __enter__(self) -> PgConnection:
        self._lock.acquire()
        return self._db

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()
