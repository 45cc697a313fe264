"""The external-link batch's state (``<root>/links/``): the ledger of spool files done, each site's
in-link count with what is still to be pushed to the site queues, and the generation of each slice
of the global bitmap.

``state.sqlite``
    The ledger of spool files done, the sites with their in-link counts, hops and priorities, the
    checkpoint generation, and the slice count and each slice's generation (table ``slices``: the
    slices' files are archiver.links.slices').
``bitmap-<generation>.bloom``
    The one bitmap of a state from before slices (no ``slices`` rows): read as one slice
    (``legacy_bitmap``), removed at the first checkpoint that records slices.

A checkpoint commits in one transaction (``commit``) what the slices saved at their next
generations already hold; the previous generations go only after the commit. So the state on disk
is always one checkpoint's ledger with that checkpoint's slices (see archiver.links.batch).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from archiver.queues.bloom import BloomBitmap
from archiver.queues.embedded.sitequeue import SiteQueue
from archiver.queues.models import LinkedSite
from archiver.queues.sitechanges import MARKED, SiteChanges
from archiver.queues.sites import owner_hash
from archiver.store.embedded import sqlite

if TYPE_CHECKING:
    from archiver.queues.interfaces import SiteQueueStore

STATE = "state.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (
    name TEXT PRIMARY KEY, generation INTEGER NOT NULL, lines INTEGER NOT NULL,
    new_urls INTEGER NOT NULL, bad INTEGER NOT NULL, done REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sites (
    origin TEXT PRIMARY KEY, inlinks INTEGER NOT NULL DEFAULT 0,
    dirty INTEGER NOT NULL DEFAULT 0,  -- 1: count to push, 2: also new URLs (wake the site)
    hops INTEGER NOT NULL DEFAULT 0,   -- the lowest hop count a link gave the site
    priority REAL NOT NULL DEFAULT 0,  -- the highest priority a link gave it
    site_hash INTEGER                  -- sites.owner_hash(origin): over the process count,
);                                     -- the owner's number
CREATE INDEX IF NOT EXISTS sites_dirty ON sites (dirty) WHERE dirty > 0;
CREATE TABLE IF NOT EXISTS slices (slice INTEGER PRIMARY KEY, generation INTEGER NOT NULL);
"""
# Columns added since the first states (to an older one on open: its sites read as hops 0 and
# priority 0, as a site queue from before them does, and get their site_hash at once).
_ADDED = {"hops": "INTEGER NOT NULL DEFAULT 0", "priority": "REAL NOT NULL DEFAULT 0",
          "site_hash": "INTEGER"}


def bitmap_path(directory: Path, generation: int) -> Path:
    return directory / f"bitmap-{generation}.bloom"


class EmbeddedLinksState:
    """The batch's state as files in ``directory``."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._db = sqlite.open_writer(directory / STATE, sqlite.LINKS_STATE_TIMEOUT,
                                      cache_mib=sqlite.SITES_CACHE_MIB)
        self._closed = False
        self._db.create_function("owner_hash", 1, owner_hash, deterministic=True)
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(sites)")}
        if missing := [name for name in _ADDED if name not in columns]:
            with sqlite.transaction(self._db):
                for name in missing:
                    self._db.execute(f"ALTER TABLE sites ADD COLUMN {name} {_ADDED[name]}")
                if "site_hash" in missing:
                    self._db.execute("UPDATE sites SET site_hash = owner_hash(origin)")
        row = self._db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
        self.generation: int = row[0] if row else 0

    def close(self) -> None:
        """Close the database (again: nothing happens)."""
        if not self._closed:
            self._closed = True
            sqlite.close(self._db, writer=True)

    def slice_generations(self) -> list[int]:
        """Each slice's generation, slice 0 first ([] before the first checkpoint that recorded
        slices); their number is the state's slice count."""
        return [g for (g,) in self._db.execute("SELECT generation FROM slices ORDER BY slice")]

    def legacy_bitmap(self) -> BloomBitmap | None:
        """The one bitmap of a state from before slices (None for any other state); bitmaps of
        other generations, or of a state that now has slices, are removed. RuntimeError if the
        ledger names a bitmap that is missing or damaged."""
        legacy = self.generation > 0 and not self.slice_generations()
        path = bitmap_path(self.directory, self.generation)
        for stale in self.directory.glob("bitmap-*"):
            if not legacy or stale != path:
                stale.unlink()
        if not legacy:
            return None
        if not path.exists():
            raise RuntimeError(f"{path} is missing: the ledger says generation {self.generation}; "
                               f"restore it or start {self.directory} anew")
        with path.open("rb") as f:
            try:
                return BloomBitmap.read(f)
            except ValueError as e:
                raise RuntimeError(f"{path}: not a bitmap this batch wrote: {e}") from None

    def legacy_name(self) -> str:
        return str(bitmap_path(self.directory, self.generation))

    def files_done(self) -> set[str]:
        return {row[0] for row in self._db.execute("SELECT name FROM ledger")}

    def ledger_files(self) -> list[tuple[int, str]]:
        """(generation, name) of every spool file done."""
        return list(self._db.execute("SELECT generation, name FROM ledger"))

    def commit(self, generation: int, files: Iterable[tuple[str, int, int, int]],
               changes: SiteChanges, now: float, slices: list[int], *,
               first: Callable[[], object] | None = None) -> int:
        """One checkpoint in one transaction: the spool files done (name, lines, new URLs, bad
        lines), the sites' ``changes``, ``generation`` and each slice's generation (``slices``,
        slice 0 first), once ``first`` returns (see ``LinksState.commit``). A bitmap from before
        slices is then removed. Returns the sites new to the state."""
        legacy = not self.slice_generations()
        dirty = changes.dirty()
        touched, others = np.flatnonzero(dirty != MARKED), np.flatnonzero(dirty == MARKED)
        with sqlite.transaction(self._db, durable=True):
            # Sites are never deleted, so a site new to the table gets a rowid above all others.
            (last,) = self._db.execute("SELECT coalesce(max(rowid), 0) FROM sites").fetchone()
            # Each with its hash, which only a new site's row takes (the update leaves it): a
            # Python call per site, where SQLite called back into Python for each new site and
            # then wrote its row a second time.
            sqlite.insert_rows(
                self._db, "INSERT INTO sites (origin, inlinks, dirty, hops, priority, site_hash)",
                changes.rows(dirty, touched, hashed=True),
                "ON CONFLICT (origin) DO UPDATE SET inlinks = inlinks + excluded.inlinks,"
                " dirty = max(dirty, excluded.dirty), hops = min(hops, excluded.hops),"
                " priority = max(priority, excluded.priority)")
            (added,) = self._db.execute("SELECT count(*) FROM sites WHERE rowid > ?", (last,)).fetchone()
            self._db.executemany(
                "UPDATE sites SET hops = min(hops, ?1), priority = max(priority, ?2),"
                " dirty = max(dirty, 1) WHERE origin = ?3 AND (hops > ?1 OR priority < ?2)",
                zip(changes.hops[others].tolist(), changes.priority[others].tolist(),
                    changes.origins[others].tolist(), strict=True))
            if first is not None:
                first()
            self._db.executemany(
                "INSERT INTO ledger (name, generation, lines, new_urls, bad, done) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(name, generation, lines, new, bad, now) for name, lines, new, bad in files])
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('generation', ?)",
                             (generation,))
            self._record_slices(slices)
        if legacy:
            bitmap_path(self.directory, self.generation).unlink(missing_ok=True)
        self.generation = generation
        return added

    def reshard(self, slices: list[int]) -> None:
        """Make ``len(slices)`` slices, at these generations, the slices in force (one
        transaction)."""
        with sqlite.transaction(self._db, durable=True):
            self._record_slices(slices)

    def _record_slices(self, slices: list[int]) -> None:
        self._db.execute("DELETE FROM slices")
        self._db.executemany("INSERT INTO slices (slice, generation) VALUES (?, ?)",
                             list(enumerate(slices)))

    def dirty_sites(self) -> list[LinkedSite]:
        """The sites not pushed to the site queues yet."""
        rows = self._db.execute(
            "SELECT origin, inlinks, dirty, hops, priority FROM sites WHERE dirty > 0")
        return [LinkedSite(origin, inlinks, dirty == 2, hops, priority)
                for origin, inlinks, dirty, hops, priority in rows]

    def ledger(self) -> Iterator[tuple[str, int, int, int, int, float]]:
        """Every spool file done: (name, generation, lines, new URLs, bad lines, time done)."""
        return iter(self._db.execute("SELECT name, generation, lines, new_urls, bad, done FROM ledger"))

    def sites(self) -> Iterator[tuple[str, int, int, int, float]]:
        """Every site: (origin, in-links, dirty: 0 pushed, 1 count to push, 2 new URLs too, hops,
        priority)."""
        return iter(self._db.execute("SELECT origin, inlinks, dirty, hops, priority FROM sites"))

    def push(self, site_queue: Callable[[int], SiteQueueStore], processes: int) -> tuple[int, int]:
        """The dirty sites merged into each owner's site queue file, straight from this file:
        each owner's queue attaches it read-only and merges its share of the dirty sites, found
        by their ``site_hash`` (``SiteQueue.merge_attached``; no row comes into Python), durably,
        the owners side by side in threads (SQLite works outside the GIL). Meanwhile this
        connection marks the sites pushed in a transaction it commits only once every merge is
        in (the merges read the file as last committed, marks and all); a merge that fails
        undoes it. A kill before that commit pushes them again at the next start (the merge is
        idempotent)."""
        owners = "SELECT site_hash % ?, count(*) FROM sites WHERE dirty > 0 GROUP BY 1 ORDER BY 1"
        owned = dict(self._db.execute(owners, (processes,)))
        if None in owned:  # (a row written by hand: each commit hashes the sites it adds)
            with sqlite.transaction(self._db):
                self._db.execute("UPDATE sites SET site_hash = owner_hash(origin)"
                                 " WHERE site_hash IS NULL")
            owned = dict(self._db.execute(owners, (processes,)))
        if not owned:
            return 0, 0
        queues = [site_queue(owner) for owner in owned]  # opened here, in this thread
        select = ("SELECT origin, inlinks, dirty = 2, hops, priority FROM links.sites"
                  " WHERE dirty > 0 AND site_hash % ? = ?")
        now = time.time()

        def merge(owner: int, queue: SiteQueueStore) -> None:
            assert isinstance(queue, SiteQueue), "the embedded links state pushes to embedded queues"
            queue.merge_attached(self.directory / STATE, select, (processes, owner), now=now)

        with ThreadPoolExecutor(min(len(owned), os.cpu_count() or 1),
                                thread_name_prefix="links-push") as pool, \
                sqlite.transaction(self._db):
            merges = [pool.submit(merge, owner, queue)
                      for owner, queue in zip(owned, queues, strict=True)]
            self._db.execute("UPDATE sites SET dirty = 0 WHERE dirty > 0")
            for merged in merges:
                merged.result()  # (raises what a merge raised: the marks stay)
        return sum(owned.values()), len(owned)
