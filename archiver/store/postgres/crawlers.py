"""The crawler processes of a cluster and the WARC bundles they have not shipped yet (PostgreSQL).

``CrawlerRoster`` keeps each crawler process's row in ``crawlers``: a process registers at start
(a new ``epoch``), beats its heart at each lease renewal and writes its status there; a second
process with the same number while the first still beats is refused.

``BundleLedger`` keeps the catalog honest across machines. The group commit records the catalog
entries of the records it made durable in ``pending_captures``, under their bundle (``record``).
Once the crawler has shipped a closed bundle to the object store and verified it, ``shipped``
moves its entries into the catalog: the catalog never names bytes the store cannot serve. A
bundle whose crawler stopped beating (its machine died) or registered again without shipping it
has *vanished* with it. If the object store has it (the crawler died between the upload and the
catalog), another crawler catalogues it (``shipped``); otherwise it is *lost* (``lose``): its
entries' URLs go back to their sites' inboxes as refetches (but for those still ahead of their
site's cursor, which the crawl fetches anyway, and those captured again since), and the sites
that had finished are due again at once. A bundle shipped after it was declared lost (its process
was only paused, or too slow to ship at exit) is catalogued from its own records: it is in the
store, so the catalog names it too (each record once: the catalog's key holds its file and
offset); a URL it holds that was sent back meanwhile is captured twice, no more.

A call is run again on a new connection if the server went away (``store.postgres.connection``):
registering and beating set what they set; ``record`` whose answer was lost is settled by reading
whether its last entry is pending, ``shipped`` by reading whether the bundle is marked shipped;
``lose`` finds a bundle it declared lost already lost (and says None).

``UnshippedCaptures`` answers replay: whether a URL has entries waiting in ``pending_captures``
(captured, but its bundle is not in the object store yet).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from archiver.store.interfaces import CatalogStore
from archiver.store.models import Capture
from archiver.store.postgres.connection import NOT_DONE, NotDone, PgConnection, StoreWatch, retried
from archiver.web import urls

_EXPIRED = "c.heartbeat < now() - make_interval(secs => %(ttl)s)"


@dataclasses.dataclass(frozen=True)
class Lost:
    """What declaring a bundle lost did: the URLs sent back as refetches, the sites they went
    to, and how many of those had finished (done, or waiting for a revisit) and are due again."""

    requeued: int
    sites: int
    woken: int


class CrawlerBusy(Exception):
    """Another crawler process with the same number is alive in the cluster."""


class CrawlerRoster:
    """The ``crawlers`` rows: one process's registration and heartbeat, everyone's status."""

    def __init__(self, url: str, ttl: float, *, watch: StoreWatch | None = None) -> None:
        self._db = PgConnection(url, watch=watch)
        self.ttl = ttl
        self.process: int | None = None
        self.epoch = 0

    def close(self) -> None:
        self._db.close()

    @retried  # a second run finds our own row (this host and pid) and moves the epoch again
    def register(self, process: int, host: str, pid: int) -> int:
        """Register crawler ``process`` on this host; its new epoch. CrawlerBusy if a process with
        that number still beats (elsewhere, or here under another pid)."""
        with self._db.transaction():
            row = self._db.execute(
                "SELECT host, pid, extract(epoch FROM now() - heartbeat)::float8, epoch"
                " FROM crawlers WHERE process = %s FOR UPDATE", (process,)).fetchone()
            if row is not None and row[2] < self.ttl and (row[0], row[1]) != (host, pid):
                raise CrawlerBusy(f"crawler process {process} is running on {row[0]} (pid {row[1]},"
                                  f" heartbeat {row[2]:.0f} s ago); give this one another --process")
            epoch = (row[3] if row else 0) + 1
            self._db.execute(
                "INSERT INTO crawlers (process, epoch, host, pid, started, heartbeat)"
                " VALUES (%s, %s, %s, %s, %s, now()) ON CONFLICT (process) DO UPDATE SET"
                " epoch = EXCLUDED.epoch, host = EXCLUDED.host, pid = EXCLUDED.pid,"
                " started = EXCLUDED.started, heartbeat = now()",
                (process, epoch, host, pid, time.time()))
        self.process, self.epoch = process, epoch
        return epoch

    @retried
    def beat(self, status: dict[str, Any] | None = None) -> bool:
        """Record that this process lives (and its status); False if another registration of
        its number superseded it."""
        return self._db.execute(
            "UPDATE crawlers SET heartbeat = now(), status = coalesce(%s::jsonb, status)"
            " WHERE process = %s AND epoch = %s",
            (None if status is None else json.dumps(status), self.process, self.epoch)).rowcount == 1


class BundleLedger:
    """Bundles not shipped yet and their catalog entries (see the module docstring)."""

    def __init__(self, url: str, *, process: int, epoch: int, ttl: float,
                 watch: StoreWatch | None = None) -> None:
        self._db = PgConnection(url, watch=watch)
        self.process, self.epoch, self.ttl = process, epoch, ttl

    def close(self) -> None:
        self._db.close()

    def record(self, captures: list[Capture]) -> list[str]:
        """The catalog entries of records now durable in open or closed local bundles; the
        bundles this reopened (declared lost while this process was paused)."""
        if not captures:
            return []
        return self._db.run(lambda: self._record(captures), resolve=lambda: self._recorded(captures[-1]))

    def _record(self, captures: list[Capture]) -> list[str]:
        names = sorted({c.filename for c in captures})
        with self._db.transaction():
            # A bundle declared lost while this process was paused is ours again: it will ship,
            # and be catalogued from its own records (the entries pending before are gone).
            states = self._db.execute(
                "INSERT INTO bundles (name, process, process_epoch, state, opened)"
                " SELECT n, %s, %s, 'open', %s FROM unnest(%s::text[]) AS n"
                " ON CONFLICT (name) DO UPDATE SET state = 'reopened' WHERE bundles.state = 'lost'"
                " RETURNING name, state",
                (self.process, self.epoch, time.time(), names)).fetchall()
            with self._db.cursor().copy(
                    "COPY pending_captures (bundle, origin, url, capture) FROM STDIN") as copy:
                for capture in captures:
                    copy.write_row((capture.filename, urls.origin(capture.url), capture.url,
                                    json.dumps(dataclasses.asdict(capture))))
        return [name for name, state in states if state == "reopened"]

    def _recorded(self, last: Capture) -> NotDone | list[str]:
        """After a ``record`` whose answer was lost: no bundle reopened (none can be told apart
        now: a reopened one ships and is catalogued whole all the same) if its last entry is
        pending (it committed), else NOT_DONE."""
        found = self._db.execute(
            "SELECT EXISTS (SELECT 1 FROM pending_captures WHERE bundle = %s"
            " AND (capture->>'offset')::bigint = %s)", (last.filename, last.offset)).fetchone()
        return [] if found == (True,) else NOT_DONE

    def shipped(self, name: str, catalog: CatalogStore, index: Callable[[], Iterable[Capture]], *,
                from_records: bool = False) -> int:
        """Bundle ``name`` is in the object store, verified: its entries go to the catalog (from
        ``pending_captures``, or from ``index()``, its own records, when none are pending or
        ``from_records``). The entries added."""
        return self._db.run(lambda: self._ship(name, catalog, index, from_records),
                            resolve=lambda: self._was_shipped(name))

    def _was_shipped(self, name: str) -> int | NotDone:
        """After ``shipped`` lost its answer: 0 if the bundle is marked shipped, else NOT_DONE (its
        entries are added again: the catalog skips those it has)."""
        state = self._db.execute("SELECT state FROM bundles WHERE name = %s", (name,)).fetchone()
        return 0 if state == ("shipped",) else NOT_DONE

    def _ship(self, name: str, catalog: CatalogStore, index: Callable[[], Iterable[Capture]],
              from_records: bool) -> int:
        state = self._db.execute("SELECT state FROM bundles WHERE name = %s", (name,)).fetchone()
        rows = self._db.execute("SELECT capture FROM pending_captures WHERE bundle = %s", (name,)).fetchall()
        # (A lost bundle's pending entries went back as refetches: its records say what it holds.)
        whole = bool(rows) and state is not None and state[0] == "open" and not from_records
        captures = [Capture(**row[0]) for row in rows] if whole else list(index())
        added = catalog.add(captures)
        with self._db.transaction():
            self._db.execute("DELETE FROM pending_captures WHERE bundle = %s", (name,))
            self._db.execute(
                "INSERT INTO bundles (name, process, process_epoch, state, opened, shipped)"
                " VALUES (%(name)s, %(process)s, %(epoch)s, 'shipped', %(now)s, %(now)s)"
                " ON CONFLICT (name) DO UPDATE SET state = 'shipped', shipped = %(now)s",
                {"name": name, "process": self.process, "epoch": self.epoch, "now": time.time()})
        return added

    @retried
    def vanished(self) -> list[tuple[str, str]]:
        """Open bundles of crawlers that stopped beating or registered again since, each with
        why it is taken for gone."""
        return [(name, f"crawler process {process} registered again (epoch {epoch})" if again
                 else f"crawler process {process} stopped beating {age:.0f} s ago")
                for name, process, epoch, again, age in self._db.execute(
                    "SELECT b.name, b.process, c.epoch, c.epoch > b.process_epoch,"
                    " extract(epoch FROM now() - c.heartbeat)::float8"
                    " FROM bundles AS b JOIN crawlers AS c ON b.process = c.process"
                    f" WHERE b.state IN ('open', 'reopened') AND (c.epoch > b.process_epoch OR {_EXPIRED})"
                    " ORDER BY b.name", {"ttl": self.ttl})]

    @retried
    def held_elsewhere(self) -> list[str]:
        """The bundles other crawler processes (or this one's earlier lives) have open: each is
        shipped in time, or found lost with its process."""
        return [row[0] for row in self._db.execute(
            "SELECT name FROM bundles WHERE state IN ('open', 'reopened')"
            " AND NOT (process = %s AND process_epoch = %s) ORDER BY name",
            (self.process, self.epoch))]

    @retried
    def states(self, names: list[str]) -> dict[str, str]:
        """The state of each of these bundles."""
        return dict(self._db.execute("SELECT name, state FROM bundles WHERE name = ANY(%s)",
                                     (names,)).fetchall())

    @retried
    def lose(self, name: str, captured: Callable[[str, str], bool] = lambda url, at: False
             ) -> Lost | None:
        """Declare bundle ``name`` lost (it is not in the object store): its URLs go back to
        their sites' inboxes as refetches, and the sites that were finished are due again at
        once. A URL is not sent back if it is robots.txt, still ahead of its site's cursor (the
        visit that continues the site fetches it), already sent back, or captured again since
        (a newer entry pending in another bundle, or one the catalog has: ``captured(url,
        timestamp)``). None if another process declared it first (or it was shipped meanwhile)."""
        with self._db.transaction():
            if self._db.execute("UPDATE bundles SET state = 'lost' WHERE name = %s"
                                " AND state IN ('open', 'reopened')", (name,)).rowcount != 1:
                return None
            first: dict[tuple[str, str], str] = {}  # (origin, url): its earliest lost capture
            for origin, url, at in self._db.execute(
                    "DELETE FROM pending_captures WHERE bundle = %s"
                    " RETURNING origin, url, capture->>'timestamp'", (name,)):
                if url != origin + "/robots.txt":
                    first[origin, url] = min(first.get((origin, url), at), at)
            origins = sorted({origin for origin, _ in first})
            # Locked in origin order before the inbox is written: a visit finishing one of these
            # sites (PgSiteQueue.finish) either sees the refetches or is done before, and woken.
            self._db.execute("SELECT 1 FROM sites WHERE origin = ANY(%s) ORDER BY origin FOR UPDATE",
                             (origins,))
            found = self._db.execute(
                "SELECT g.origin, g.url, g.at, coalesce((SELECT min(e.depth) FROM crawl_entries AS e"
                "  WHERE e.origin = g.origin AND e.url = g.url), 0)"
                " FROM unnest(%(origins)s::text[], %(urls)s::text[], %(ats)s::text[]) AS g(origin, url, at)"
                " WHERE NOT EXISTS (SELECT 1 FROM crawl_entries AS e JOIN crawl_cursors AS c"
                "  ON c.origin = e.origin WHERE e.origin = g.origin AND e.url = g.url AND e.seq > c.cursor)"
                " AND NOT EXISTS (SELECT 1 FROM crawl_inbox AS i"
                "  WHERE i.origin = g.origin AND i.url = g.url AND i.refetch)"
                " AND NOT EXISTS (SELECT 1 FROM pending_captures AS p"
                "  WHERE p.url = g.url AND p.capture->>'timestamp' >= g.at)",
                {"origins": [o for o, _ in first], "urls": [u for _, u in first],
                 "ats": list(first.values())}).fetchall()
            refetch = [(origin, depth, url) for origin, url, at, depth in found
                       if not captured(url, at)]
            with self._db.cursor().copy(
                    "COPY crawl_inbox (origin, depth, url, refetch) FROM STDIN") as copy:
                for origin, depth, url in refetch:
                    copy.write_row((origin, depth, url, True))
            sites = sorted({origin for origin, _, _ in refetch})
            woken = self._db.execute(
                "UPDATE sites SET state = 'waiting', due = 0 WHERE origin = ANY(%s)"
                " AND state IN ('done', 'revisit')", (sites,)).rowcount
        return Lost(len(refetch), len(sites), woken)


class UnshippedCaptures:
    """Read-only: the catalog entries of bundles not shipped yet, by URL key (see the module
    docstring). One connection, which reconnects (``PgConnection``); calls from several threads
    take turns."""

    def __init__(self, url: str, *, watch: StoreWatch | None = None) -> None:
        self._db = PgConnection(url, readonly=True, watch=watch)
        self._turn = threading.Lock()

    def close(self) -> None:
        self._db.close()

    def has(self, urlkey: str) -> bool:
        """Whether a capture with this URL key waits for its bundle to be shipped."""
        with self._turn:
            return self._has(urlkey)

    @retried
    def _has(self, urlkey: str) -> bool:
        row = self._db.execute("SELECT EXISTS (SELECT 1 FROM pending_captures"
                               " WHERE capture ->> 'urlkey' = %s)", (urlkey,)).fetchone()
        return bool(row and row[0])
