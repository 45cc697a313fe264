"""The queue of sites one crawler process works through (``<root>/sites/<process>.sqlite``).

A site is an origin (``scheme://host[:port]``). Each crawler process reads only its own queue, and a
site belongs to exactly one queue, so no two processes ever crawl the same site. SQLite gives
transactions (a crash never leaves a half-updated queue) and lets the external-link batch add sites
while the crawler runs (WAL mode, busy timeout). A queue is used by one thread at a time, not always
the same one: the crawler calls it from worker threads (see :mod:`archiver.store.offloop`, which also says
why the busy timeout is 30 s).

States: ``waiting`` (ready once ``due``), ``active`` (in a slot now), ``retry`` (failed, back
after ``due``), ``deferred`` (failed too often; revisited by a daemon when due, not waited for by
``--until-idle``), ``paused`` (its visit found its session lost, the note says how; never
claimed, woken or waited for, until ``resume``: ``archiver site resume``), ``revisit`` (finished,
visited again from ``due``, its crawl queue started over, by a daemon only), ``done`` (finished,
no revisit). A site left ``active`` by a crash is ``waiting`` again on open.

Each site also keeps its cookies between visits (``keep_cookies``: the jar's JSON text, at most
``COOKIES_LIMIT`` bytes) and the gatekeeper answers its visits met, by kind (``count_gatekeepers``).

Revisits (archiver.queues.revisits): each site keeps its change history (``compared``,
``changed``, ``compared_seconds``) and its next visit (``next_visit``, 0 if none). A visit that
ends with no next visit set schedules one; a visit woken in between by new links (from ``revisit``
to ``waiting``) keeps it, and the site goes back to ``revisit`` at that time. Claiming a revisit
takes the schedule (``next_visit`` 0 again) and asks for its crawl queue to start over.

Order: ``claim`` takes the ready site of highest ``priority`` (from the links batch: the highest
a link to the site was given; 0 unless a plugin or focus mode gives links priorities), then of
most in-links, then due first. Each site also keeps its ``hops``, how many site-to-site links
from a seed site it is (seeds 0), the lowest any link gave it (``scope.max_hops``). A queue from
before hops and priorities reads as hops 0 and priority 0.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from archiver.queues.models import STATES, SiteRow
from archiver.queues.revisits import ChangeHistory, PageChanges, RevisitSchedule, visit_ended
from archiver.queues.sites import (
    SITE_COLUMNS,
    backoff,
    cookies_fit,
    gatekeepers_added,
    linked_site,
    ready_states,
    site_row,
)
from archiver.store.embedded import sqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sites (
    origin   TEXT PRIMARY KEY,
    state    TEXT NOT NULL DEFAULT 'waiting',
    due      REAL NOT NULL DEFAULT 0,
    inlinks  INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    added    REAL NOT NULL,
    visits   INTEGER NOT NULL DEFAULT 0,
    note     TEXT NOT NULL DEFAULT '',
    restart  INTEGER NOT NULL DEFAULT 0,
    next_visit REAL NOT NULL DEFAULT 0,
    compared REAL NOT NULL DEFAULT 0,
    changed REAL NOT NULL DEFAULT 0,
    compared_seconds REAL NOT NULL DEFAULT 0,
    hops INTEGER NOT NULL DEFAULT 0,
    priority REAL NOT NULL DEFAULT 0,
    cookies TEXT NOT NULL DEFAULT '',
    gatekeepers TEXT NOT NULL DEFAULT ''
);
"""
# The claim order's index (made once the columns it names are there); ``sites_ready`` was the
# index of queues from before priorities.
_ORDER_INDEX = """
DROP INDEX IF EXISTS sites_ready;
CREATE INDEX IF NOT EXISTS sites_order ON sites (state, priority DESC, inlinks DESC, due);
"""

# Columns added since the first queues, with their definitions (added to an older queue on open).
_ADDED = {"restart": "INTEGER NOT NULL DEFAULT 0", "next_visit": "REAL NOT NULL DEFAULT 0",
          "compared": "REAL NOT NULL DEFAULT 0", "changed": "REAL NOT NULL DEFAULT 0",
          "compared_seconds": "REAL NOT NULL DEFAULT 0", "hops": "INTEGER NOT NULL DEFAULT 0",
          "priority": "REAL NOT NULL DEFAULT 0", "cookies": "TEXT NOT NULL DEFAULT ''",
          "gatekeepers": "TEXT NOT NULL DEFAULT ''"}


def _ready(include_deferred: bool, include_revisits: bool) -> tuple[tuple[str, ...], str]:
    """The states a slot may take a site from, and their SQL placeholders."""
    states = ready_states(include_deferred, include_revisits)
    return states, ",".join("?" * len(states))


def queue_path(root: Path, process: int) -> Path:
    return root / "sites" / f"{process}.sqlite"


def stage_linked_sites(db: sqlite3.Connection) -> None:
    """Make the connection's staging table ``temp.linked_sites`` (a ``LinkedSite`` per row) if it
    has none yet, and empty it: ``merge_staged_links`` merges what is put in."""
    db.execute("CREATE TEMP TABLE IF NOT EXISTS linked_sites (origin TEXT PRIMARY KEY,"
               " inlinks INTEGER, woken INTEGER, hops INTEGER, priority REAL)")
    db.execute("DELETE FROM temp.linked_sites")


def merge_staged_links(db: sqlite3.Connection, now: float) -> int:
    """Merge the staged sites into the connection's own queue (``main``; a file it attached may
    have a table of sites too) as ``SiteQueue.merge_links`` does, in the caller's transaction:
    new sites are added with their counts; a known site's row is rewritten only if its count,
    hops or priority changed; a finished one with new URLs waits again. Returns the sites added.

    One upsert finds each site once (an insert, then an update of the known ones, found each
    site twice: a third of the merge); the wake goes first, so the sites it finds are known."""
    # Sites are never deleted, so a site new to the table gets a rowid above all others.
    (last,) = db.execute("SELECT coalesce(max(rowid), 0) FROM main.sites").fetchone()
    db.execute(
        "UPDATE main.sites SET state = 'waiting', due = ? FROM temp.linked_sites AS c"
        " WHERE sites.origin = c.origin AND c.woken AND sites.state IN ('done', 'revisit')", (now,))
    # (The WHERE true keeps SQLite from reading ON CONFLICT as the SELECT's join constraint.)
    db.execute(
        "INSERT INTO main.sites (origin, added, inlinks, hops, priority)"
        " SELECT origin, ?, inlinks, hops, priority FROM temp.linked_sites WHERE true"
        " ORDER BY origin ON CONFLICT (origin) DO UPDATE SET inlinks = excluded.inlinks,"
        " hops = min(hops, excluded.hops), priority = max(priority, excluded.priority)"
        " WHERE inlinks != excluded.inlinks OR hops > excluded.hops"
        " OR priority < excluded.priority", (now,))
    (added,) = db.execute("SELECT count(*) FROM main.sites WHERE rowid > ?", (last,)).fetchone()
    return int(added)


class SiteQueue:
    """One process's site queue."""

    def __init__(self, path: Path, *, recover: bool = True) -> None:
        """Open (creating) a queue; ``recover`` (the owning crawler) makes crash-left active sites
        waiting again, which other readers must not do."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite.open_writer(path, sqlite.SITE_QUEUE_TIMEOUT,
                                      cache_mib=sqlite.SITES_CACHE_MIB, attach_uris=True)
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(sites)")}
        for name, definition in _ADDED.items():  # a queue made before recrawls, revisits...
            if name not in columns:
                self._db.execute(f"ALTER TABLE sites ADD COLUMN {name} {definition}")
        self._db.executescript(_ORDER_INDEX)
        if recover:
            self._db.execute("UPDATE sites SET state='waiting' WHERE state='active'")

    def close(self) -> None:
        sqlite.close(self._db, writer=True)

    def __enter__(self) -> SiteQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, origin: str, *, inlinks: int = 0, hops: int = 0, now: float | None = None
            ) -> bool:
        """Queue ``origin`` if it is not known yet (a known one takes ``hops`` if lower: a seed
        site is at 0); True if it was added."""
        with sqlite.transaction(self._db):
            cur = self._db.execute(
                "INSERT OR IGNORE INTO sites (origin, added, inlinks, hops) VALUES (?, ?, ?, ?)",
                (origin, time.time() if now is None else now, inlinks, hops))
            if cur.rowcount == 1:
                return True
            self._db.execute("UPDATE sites SET hops = ? WHERE origin = ? AND hops > ?",
                             (hops, origin, hops))
        return False

    def merge_links(self, sites: Iterable[tuple[Any, ...]], *, now: float | None = None) -> int:
        """From the external-link batch: a ``LinkedSite`` (or its first fields) per site. Unknown
        sites are added; known ones get the count, the lower hop count and the higher priority;
        a finished site with new URLs waits again (its visit resumes at its cursor, where the new
        URLs are). Returns the sites added."""
        now = time.time() if now is None else now
        # Durable: the batch then marks these sites pushed, in another file.
        with sqlite.transaction(self._db, durable=True):
            stage_linked_sites(self._db)
            self._db.executemany("INSERT INTO temp.linked_sites VALUES (?, ?, ?, ?, ?)",
                                 map(linked_site, sites))
            return merge_staged_links(self._db, now)

    def merge_attached(self, path: Path, select: str, parameters: tuple[object, ...], *,
                       now: float) -> int:
        """``merge_links`` of the rows ``select`` (with ``parameters``) reads from the SQLite file
        at ``path``, attached to this queue's connection as ``links``: no row comes into Python.
        The file is attached read-only: the merge's transaction never locks it, so the queues of
        several owners merge from one file side by side (attached for writing, each one's
        ``BEGIN IMMEDIATE`` took its lock, and they took turns). Returns the sites added."""
        self._db.execute("ATTACH DATABASE ? AS links", (sqlite.read_only(path),))
        try:
            with sqlite.transaction(self._db, durable=True):
                stage_linked_sites(self._db)
                self._db.execute(f"INSERT INTO temp.linked_sites {select}", parameters)
                return merge_staged_links(self._db, now)
        finally:
            self._db.execute("DETACH DATABASE links")

    def claim(self, *, include_deferred: bool, include_revisits: bool = False,
              now: float | None = None) -> str | None:
        """Take the due site of highest priority, then most linked-to, mark it active, and return
        it (a revisit takes its schedule, and its crawl queue is to start over)."""
        now = time.time() if now is None else now
        states, marks = _ready(include_deferred, include_revisits)
        with sqlite.transaction(self._db):
            row = self._db.execute(
                f"SELECT origin FROM sites WHERE state IN ({marks}) AND due <= ? "
                "ORDER BY priority DESC, inlinks DESC, due LIMIT 1", (*states, now)).fetchone()
            if row is None:
                return None
            self._db.execute(
                "UPDATE sites SET state='active', visits=visits+1,"
                " restart = CASE WHEN state='revisit' THEN 1 ELSE restart END,"
                " next_visit = CASE WHEN state='revisit' THEN 0 ELSE next_visit END"
                " WHERE origin=?", row)
        return row[0]

    def claim_or_due(self, *, include_deferred: bool, include_revisits: bool = False,
                     now: float | None = None) -> tuple[str | None, float | None]:
        """:meth:`claim` a site, else say when the next one is due: (origin, None) or (None, due);
        (None, None) when no site waits at all. One call for a slot's one trip to a worker thread."""
        origin = self.claim(include_deferred=include_deferred, include_revisits=include_revisits,
                            now=now)
        if origin is not None:
            return origin, None
        return None, self.next_due(include_deferred=include_deferred,
                                   include_revisits=include_revisits)

    def finish(self, origin: str, note: str = "", *, changes: PageChanges | None = None,
               schedule: RevisitSchedule | None = None, now: float | None = None) -> None:
        """The visit ended normally (queue exhausted or a site limit reached): its ``changes``
        join the site's history, and with ``schedule`` the site is due for a revisit (at the time
        already set, else at one the history gives), else it is done."""
        now = time.time() if now is None else now
        with sqlite.transaction(self._db):
            row = self._db.execute("SELECT compared, changed, compared_seconds, next_visit"
                                   " FROM sites WHERE origin=?", (origin,)).fetchone()
            if row is None:
                return
            history, next_visit = visit_ended(ChangeHistory(*row[:3]), row[3], changes, schedule,
                                              now)
            self._db.execute(
                "UPDATE sites SET state=?, due=?, next_visit=?, attempts=0, note=?, compared=?,"
                " changed=?, compared_seconds=? WHERE origin=?",
                ("revisit" if next_visit else "done", next_visit, next_visit, note,
                 history.compared, history.changed, history.seconds, origin))

    def recrawl(self, origin: str | None = None, *, now: float | None = None) -> int:
        """Queue a new visit of ``origin`` (of every site when None) if it is finished (``done``
        or waiting for a ``revisit``); the visit starts its crawl queue over (see
        :meth:`restart_pending`) and schedules the next. Returns the sites requeued."""
        sql = ("UPDATE sites SET state='waiting', due=?, attempts=0, note='', restart=1,"
               " next_visit=0 WHERE state IN ('done', 'revisit')")
        params: tuple[object, ...] = (time.time() if now is None else now,)
        if origin is not None:
            sql, params = sql + " AND origin=?", (*params, origin)
        return self._db.execute(sql, params).rowcount

    def restart_pending(self, origin: str) -> bool:
        """Whether the next visit of ``origin`` must start its crawl queue over."""
        row = self._db.execute("SELECT restart FROM sites WHERE origin=?", (origin,)).fetchone()
        return bool(row and row[0])

    def restarted(self, origin: str) -> None:
        """The crawl queue of ``origin`` was started over (durably): clear the request."""
        self._db.execute("UPDATE sites SET restart=0 WHERE origin=?", (origin,))

    def visits(self, origin: str) -> int:
        """How many times ``origin`` was claimed (the current visit included)."""
        row = self._db.execute("SELECT visits FROM sites WHERE origin=?", (origin,)).fetchone()
        return row[0] if row else 0

    def release(self, origin: str) -> None:
        """The visit was interrupted (shutdown): the site is ready again at once."""
        self._db.execute("UPDATE sites SET state='waiting', due=0 WHERE origin=? AND state='active'",
                         (origin,))

    def postpone(self, origin: str, due: float, note: str) -> None:
        """The visit stopped for its sheet (window or daily budget): waiting again, due at
        ``due``, with ``note`` saying why; its attempts are untouched."""
        self._db.execute("UPDATE sites SET state='waiting', due=?, note=? WHERE origin=? AND"
                         " state='active'", (due, note, origin))

    def pause(self, origin: str, note: str) -> None:
        """The visit found its session lost: the site is ``paused`` with ``note`` saying why,
        until ``resume``; its crawl queue and cursor are untouched."""
        self._db.execute("UPDATE sites SET state='paused', note=? WHERE origin=? AND state='active'",
                         (note, origin))

    def resume(self, origin: str, *, now: float | None = None) -> bool:
        """A paused site waits again, due ``now``, its note cleared (its next visit continues
        from its cursor); False if ``origin`` is not paused."""
        return self._db.execute(
            "UPDATE sites SET state='waiting', due=?, note='' WHERE origin=? AND state='paused'",
            (time.time() if now is None else now, origin)).rowcount == 1

    def cookies(self, origin: str) -> str:
        """The cookies kept for ``origin`` (``keep_cookies``), '' if none."""
        row = self._db.execute("SELECT cookies FROM sites WHERE origin=?", (origin,)).fetchone()
        return row[0] if row else ""

    def keep_cookies(self, origin: str, text: str) -> bool:
        """Keep ``text`` (the site's cookie jar as JSON) as its cookies for its next visits;
        False, with a warning, if it is longer than COOKIES_LIMIT bytes (the cookies kept
        before stay) or the site is not in this queue."""
        if not cookies_fit(origin, text):
            return False
        return self._db.execute("UPDATE sites SET cookies=? WHERE origin=?",
                                (text, origin)).rowcount == 1

    def count_gatekeepers(self, origin: str, counts: Mapping[str, int]) -> None:
        """Add a visit's gatekeeper answers, by kind (``challenge``, ``rate-limit``, ``block``)."""
        with sqlite.transaction(self._db):
            row = self._db.execute("SELECT gatekeepers FROM sites WHERE origin=?",
                                   (origin,)).fetchone()
            if row is not None:
                self._db.execute("UPDATE sites SET gatekeepers=? WHERE origin=?",
                                 (gatekeepers_added(row[0], counts), origin))

    def retry(self, origin: str, *, delay: float, max_attempts: int, defer_delay: float,
              note: str, now: float | None = None) -> str:
        """The visit failed: back after ``delay`` doubled per attempt, or deferred; returns the state."""
        now = time.time() if now is None else now
        (attempts,) = self._db.execute("SELECT attempts FROM sites WHERE origin=?",
                                       (origin,)).fetchone()
        state, due, attempts = backoff(attempts, delay=delay, max_attempts=max_attempts,
                                       defer_delay=defer_delay, now=now)
        self._db.execute("UPDATE sites SET state=?, due=?, attempts=?, note=? WHERE origin=?",
                         (state, due, attempts, note, origin))
        return state

    def next_due(self, *, include_deferred: bool, include_revisits: bool = False) -> float | None:
        """When the next waiting (or retrying, deferred, revisited) site becomes due; None if
        there is none."""
        states, marks = _ready(include_deferred, include_revisits)
        (due,) = self._db.execute(f"SELECT min(due) FROM sites WHERE state IN ({marks})",
                                  states).fetchone()
        return due

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATES, 0)
        out.update(self._db.execute("SELECT state, count(*) FROM sites GROUP BY state").fetchall())
        return out

    def origins(self, states: tuple[str, ...] = ("waiting", "active", "retry", "deferred")
                ) -> list[str]:
        """The origins in the given states (by default every site not done)."""
        marks = ",".join("?" * len(states))
        return [row[0] for row in self._db.execute(
            f"SELECT origin FROM sites WHERE state IN ({marks})", states)]

    def revisits_due(self, by: float) -> list[str]:
        return [row[0] for row in self._db.execute(
            "SELECT origin FROM sites WHERE state = 'revisit' AND due <= ?", (by,))]

    def state(self, origin: str) -> str | None:
        row = self._db.execute("SELECT state FROM sites WHERE origin=?", (origin,)).fetchone()
        return row[0] if row else None

    def site(self, origin: str) -> SiteRow | None:
        row = self._db.execute(f"SELECT {SITE_COLUMNS} FROM sites WHERE origin=?", (origin,)).fetchone()
        return site_row(row) if row else None

    def rows(self) -> Iterator[SiteRow]:
        """Every site with all it records, by origin (``archiver store migrate``, ``status --sites``)."""
        for row in self._db.execute(f"SELECT {SITE_COLUMNS} FROM sites ORDER BY origin"):
            yield site_row(row)


