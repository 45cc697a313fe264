"""The external-link batch's state on several machines: PostgreSQL and the object store.

The behaviour of :class:`archiver.queues.embedded.linksstate.EmbeddedLinksState`, one table per SQLite table
(schema versions 3 and 4 in :mod:`archiver.store.postgres.schema`): ``links_ledger`` (spool files done),
``links_sites`` (in-link counts and what is still to be pushed), ``links_meta`` (the checkpoint
generation), ``links_slices`` (each slice's generation). The slices themselves are objects under
``links/`` (archiver.links.slices), uploaded and verified before a commit names them. A state from
before slices has one bitmap, the object ``links/bitmap-<generation>.bloom``, read as one slice
and removed at the first checkpoint that records slices.

One links batch per cluster: opening the state takes a session-level advisory lock on the state's
own connection, so the lock lasts exactly as long as the connection the batch writes through. A
batch whose connection drops loses the lock and can write nothing more; a second batch, on any
machine, is refused (:class:`LinksBatchBusy`) with the holder's host and process in the message.
``commit`` also moves the generation only from the one it read, so a state that moved underneath
the batch is refused rather than overwritten.

When the server goes away (a restart, a failover) the lock goes with the connection: the batch
waits for the store (``store.postgres.connection``), takes the lock again on the new connection before
anything else (LinksBatchBusy if another batch took it meanwhile: this one stops, and a rerun
redoes its files), and runs the call again. A commit whose answer was lost is settled by reading
the generation: moved to the commit's, it committed; else it is made again.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from archiver.queues.bloom import BloomBitmap
from archiver.queues.models import LinkedSite
from archiver.queues.postgres.sitequeue import merge_staged_links, stage_linked_sites
from archiver.queues.sitechanges import SiteChanges
from archiver.store.objectstore import NoSuchObject, ObjectStore, open_object
from archiver.store.postgres.connection import NOT_DONE, NotDone, PgConnection, StoreWatch, retried
from archiver.store.postgres.schema import Connection, StoreError

if TYPE_CHECKING:
    from archiver.queues.interfaces import SiteQueueStore

BITMAP_PREFIX = "links/bitmap-"
# pg_try_advisory_lock(classid, objid) of the links batch: "arch", "link" in ASCII.
_LOCK = (0x61726368, 0x6C696E6B)
# PostgreSQL keeps the first 63 bytes of an application_name.
_APPLICATION_NAME_BYTES = 63


class LinksBatchBusy(Exception):
    """Another links batch holds the cluster's links state."""


def bitmap_key(generation: int) -> str:
    return f"{BITMAP_PREFIX}{generation}.bloom"


class PgLinksState:
    """The batch's state in the PostgreSQL database at ``url``; ``objects`` holds the bitmap of a
    state from before slices."""

    def __init__(self, url: str, objects: ObjectStore, *, watch: StoreWatch | None = None) -> None:
        self.objects = objects
        self._db = PgConnection(url, watch=watch, on_connect=self._lock_again)
        try:
            self._take_lock(self._db.live())
            row = self._db.execute("SELECT generation FROM links_meta").fetchone()
            self.generation: int = int(row[0]) if row else 0
        except BaseException:
            self._db.close()
            raise

    def _lock_again(self, conn: Connection) -> None:
        """On a new connection: the lock again, before anything else (StoreError, and the batch
        stops, if another batch took it meanwhile)."""
        try:
            self._take_lock(conn)
        except LinksBatchBusy as e:
            raise StoreError(f"the links lock went with the connection to the PostgreSQL store: {e};"
                             " this batch stops (a rerun redoes the spool files it had not"
                             " committed)") from None

    @staticmethod
    def _take_lock(conn: Connection) -> None:
        me = f"archiver links run, {socket.gethostname()} pid {os.getpid()}"
        conn.execute("SELECT set_config('application_name', %s, false)",
                         (me.encode("ascii", "replace")[:_APPLICATION_NAME_BYTES].decode("ascii"),))
        got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", _LOCK).fetchone()
        if got and got[0]:
            return
        holder = conn.execute(
            "SELECT a.application_name, host(a.client_addr), a.backend_start FROM pg_locks l"
            " JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
            " AND l.classid = %s::oid AND l.objid = %s::oid AND l.objsubid = 2 AND l.granted",
            _LOCK).fetchone()
        who = ("another session" if holder is None else
               f"{holder[0] or 'a session'} (from {holder[1] or 'a local socket'}, "
               f"connected {holder[2]:%Y-%m-%d %H:%M:%S %Z})")
        raise LinksBatchBusy(f"a links batch is already running in this cluster: the lock of the "
                             f"links state in PostgreSQL is held by {who}")

    def close(self) -> None:
        """Close the connection, which releases the cluster's links lock."""
        self._db.close()

    # -- the slices

    def slice_generations(self) -> list[int]:
        return [int(g) for (g,) in self._db.read(
            "SELECT generation FROM links_slices ORDER BY slice")]

    def legacy_bitmap(self) -> BloomBitmap | None:
        legacy = self.generation > 0 and not self.slice_generations()
        key = bitmap_key(self.generation)
        for stale in self.objects.list(BITMAP_PREFIX):
            if not legacy or stale != key:
                self.objects.delete(stale)
        if not legacy:
            return None
        try:
            with open_object(self.objects, key) as f:
                return BloomBitmap.read(f)
        except NoSuchObject:
            raise RuntimeError(f"{self.objects.location(key)} is missing: the ledger says generation "
                               f"{self.generation}; restore it, or empty the links_ tables to start "
                               "anew") from None
        except ValueError as e:
            raise RuntimeError(f"{self.objects.location(key)}: not a bitmap this batch wrote: {e}"
                               ) from None

    def legacy_name(self) -> str:
        return self.objects.location(bitmap_key(self.generation))

    # -- the ledger and the sites

    def files_done(self) -> set[str]:
        return {row[0] for row in self._db.read("SELECT name FROM links_ledger")}

    def ledger_files(self) -> list[tuple[int, str]]:
        return [(int(g), name) for g, name in self._db.read(
            "SELECT generation, name FROM links_ledger")]

    def commit(self, generation: int, files: Iterable[tuple[str, int, int, int]],
               changes: SiteChanges, now: float, slices: list[int], *,
               first: Callable[[], object] | None = None) -> int:
        legacy = not self.slice_generations()
        done = list(files)
        added = self._db.run(lambda: self._commit(generation, done, changes, now, slices, first),
                             resolve=lambda: self._committed(generation))
        if legacy:
            self.objects.delete(bitmap_key(self.generation))
        self.generation = generation
        return added

    def _committed(self, generation: int) -> int | NotDone:
        """After a commit whose answer was lost: 0 (the sites added are not known) if the
        generation moved to ``generation``, else NOT_DONE."""
        row = self._db.execute("SELECT generation FROM links_meta").fetchone()
        return 0 if row == (generation,) else NOT_DONE

    def _commit(self, generation: int, done: list[tuple[str, int, int, int]], changes: SiteChanges,
                now: float, slices: list[int], first: Callable[[], object] | None) -> int:
        names, lines, new_urls, bad = ([row[n] for row in done] for n in range(4))
        with self._db.transaction(), self._db.cursor() as cur:
            self._move(generation)
            # The sites' changes go through a staging table (COPY: a fifth of the time of array
            # parameters); "dirty" MARKED (0) for the sites whose hops or priority alone may
            # change.
            cur.execute("CREATE TEMPORARY TABLE IF NOT EXISTS links_changes (origin text COLLATE \"C\","
                        " inlinks bigint, dirty smallint, hops integer, priority float8)"
                        " ON COMMIT DELETE ROWS")
            with cur.copy("COPY links_changes FROM STDIN") as copy:
                for site in changes.rows(changes.dirty()):
                    copy.write_row(site)
            # Both parts see the table as it was before the statement (PostgreSQL's rule for
            # data-modifying WITH): the insert adds the new sites, the update the known ones.
            cur.execute(
                "WITH added AS (INSERT INTO links_sites (origin, inlinks, dirty, hops, priority)"
                " SELECT * FROM links_changes WHERE dirty > 0 ORDER BY origin ON CONFLICT DO NOTHING"
                " RETURNING 1), known AS (UPDATE links_sites s SET inlinks = s.inlinks + c.inlinks,"
                " dirty = greatest(s.dirty, c.dirty), hops = least(s.hops, c.hops),"
                " priority = greatest(s.priority, c.priority)"
                " FROM links_changes c WHERE c.dirty > 0 AND s.origin = c.origin)"
                " SELECT count(*) FROM added")
            row = cur.fetchone()
            added = int(row[0]) if row else 0
            cur.execute(
                "UPDATE links_sites s SET hops = least(s.hops, c.hops),"
                " priority = greatest(s.priority, c.priority), dirty = greatest(s.dirty, 1)"
                " FROM links_changes c WHERE c.dirty = 0 AND s.origin = c.origin"
                " AND (s.hops > c.hops OR s.priority < c.priority)")
            if first is not None:
                first()
            self._db.execute(
                "INSERT INTO links_ledger (name, generation, lines, new_urls, bad, done)"
                " SELECT n, %s, l, u, b, %s"
                " FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::bigint[]) AS f(n, l, u, b)",
                (generation, now, names, lines, new_urls, bad))
            self._record_slices(slices)
        return added

    @retried  # the generation moved to itself, the slices set
    def reshard(self, slices: list[int]) -> None:
        with self._db.transaction():
            self._move(self.generation)
            self._record_slices(slices)

    def _move(self, generation: int) -> None:
        """Move the generation to ``generation`` (in the caller's transaction), only from the one
        this state read."""
        moved = self._db.execute("UPDATE links_meta SET generation = %s WHERE generation = %s",
                                 (generation, self.generation)).rowcount
        if moved != 1:
            raise RuntimeError(f"the links state is no longer at generation {self.generation}: "
                               "another batch wrote it; this write is dropped")

    def _record_slices(self, slices: list[int]) -> None:
        self._db.execute("DELETE FROM links_slices")
        self._db.execute("INSERT INTO links_slices (slice, generation)"
                         " SELECT * FROM unnest(%s::integer[], %s::bigint[])",
                         (list(range(len(slices))), slices))

    def dirty_sites(self) -> list[LinkedSite]:
        rows = self._db.read(
            "SELECT origin, inlinks, dirty, hops, priority FROM links_sites WHERE dirty > 0")
        return [LinkedSite(origin, inlinks, dirty == 2, hops, priority)
                for origin, inlinks, dirty, hops, priority in rows]

    def push(self, site_queue: Callable[[int], SiteQueueStore], processes: int) -> tuple[int, int]:
        """The one shared site queue is table ``sites`` of this database (``site_queue`` is not
        opened): the dirty sites are staged from ``links_sites``, merged there and marked pushed
        in one transaction, without leaving the server. Twice is harmless: the second finds no
        site dirty."""
        return self._db.run(self._push)

    def _push(self) -> tuple[int, int]:
        with self._db.transaction(), self._db.cursor() as cur:
            stage_linked_sites(cur)
            sites = cur.execute(
                "INSERT INTO linked_sites SELECT origin, inlinks, dirty = 2, hops, priority"
                " FROM links_sites WHERE dirty > 0").rowcount
            if sites:
                merge_staged_links(cur, time.time())
                cur.execute("UPDATE links_sites SET dirty = 0 WHERE dirty > 0")
        return sites, 1 if sites else 0
