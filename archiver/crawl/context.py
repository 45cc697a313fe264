"""What every site visit of one crawler process shares: the writers, the resolver, the counters,
the events that drain or pause the crawl, and the one way to make writes durable (``make_durable``)."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from archiver.config import Config
from archiver.crawl.addressslots import AddressSlots
from archiver.crawl.bodies import BodyWork
from archiver.crawl.stats import Stats
from archiver.dns.lookup import Resolver
from archiver.logs import event
from archiver.queues.interfaces import CrawlQueues, CrawlQueueStore, SpoolWriterStore
from archiver.queues.leases import Leases
from archiver.queues.revisits import look_back
from archiver.store.bundles import BundleWriter
from archiver.store.durable import SyncJob, is_disk_error
from archiver.store.interfaces import CatalogStore, WarcReader
from archiver.store.models import Capture, CatalogError
from archiver.store.objectstore import ObjectStoreError
from archiver.store.offloop import OffLoop
from archiver.store.originals import payload_holder
from archiver.store.warcindex import WarcError
from archiver.web.http import conditions as conditions_of
from archiver.web.http import content_length

log = logging.getLogger("archiver.crawl.crawler")


@dataclass
class CrawlContext:
    """What every site visit of one process shares."""

    config: Config
    bundle: BundleWriter
    spool: SpoolWriterStore
    resolver: Resolver
    stats: Stats
    slots: AddressSlots
    lookup: CatalogStore  # read-only: the earlier captures a recrawl compares with (earlier_captures)
    crawl_queues: CrawlQueues  # every site's crawl queue (archiver.stores)
    open_queues: set[CrawlQueueStore] = field(default_factory=set)  # those visits hold now
    captures: list[Capture] = field(default_factory=list)  # written, not yet in the catalog
    draining: trio.Event = field(default_factory=trio.Event)  # set by SIGTERM: finish, take no more
    wake: trio.Event = field(default_factory=trio.Event)  # set (and replaced) on drain and reload
    # Clear while fetching pauses for this machine's disk: writes fail (``disk_full``), or the
    # bundles not shipped yet reach warc.local_limit (``local_full``, set by the crawler).
    disk_ok: trio.Event = field(default_factory=trio.Event)
    disk_full: bool = False
    local_full: bool = False
    store_ok: trio.Event = field(default_factory=trio.Event)  # clear while the database is away
    database_away: bool = False
    leases: Leases | None = None  # the site leases held (shared site queue); None: embedded
    published: list[Path] | None = None  # bundles finished, to ship (shared stores); None: embedded
    # In the job's worker thread, once their records are durable: the catalog (or, in a cluster,
    # the pending) entries. Set by the crawler.
    commit_captures: Callable[[list[Capture]], None] | None = None
    # The archived records: a revisit reads the validators of the capture it asks about.
    warcs: WarcReader | None = None
    lookup_calls: OffLoop = field(default_factory=OffLoop)
    bodies: BodyWork = field(default_factory=BodyWork)  # large bodies' work (archiver.crawl.bodies)
    sync_lock: trio.Lock = field(default_factory=trio.Lock)  # one SyncJob at a time
    # The wall clock the sheets' windows and budgets and the site queue's due times are read on
    # (seconds since the epoch); tests pass another.
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self.disk_ok.set()
        self.store_ok.set()

    async def earlier_captures(self, url: str) -> list[Capture]:
        """The captures of ``url`` a revisit needs, oldest first, read in a worker thread (see
        archiver.store.offloop): the last ones up to its run of gone answers
        (queues.revisits.look_back), after the response the last one's payload stands for."""

        def needed() -> list[Capture]:
            kept = look_back(self.lookup.walk(url, "9" * 14, forward=False))  # latest first
            if not kept or payload_holder(kept, kept[-1].digest) is not None:
                return kept
            last = kept[-1]
            holder = self.lookup.payload_holder(url, last.digest, last.timestamp)
            return kept if holder is None else [holder, *kept]

        return await self.lookup_calls.call(needed)

    async def conditions(self, capture: Capture) -> tuple[list[tuple[str, str]], int]:
        """The conditional request headers for the payload of ``capture`` (a response), from its
        record's HTTP head (web.http.conditions; only the head is read, in a worker thread), and
        the payload's size as far as the head says (else the record's); none if the record cannot
        be read (the fetch is then unconditional)."""
        if self.warcs is None:
            return [], 0
        try:
            head = await self.lookup_calls.call(self.warcs.read_head, capture.filename,
                                                capture.offset, capture.length)
        except (WarcError, OSError, ObjectStoreError) as e:  # (the object store away, say)
            event(log, logging.WARNING, "capture-unreadable", url=capture.url,
                  record=f"{capture.filename}:{capture.offset}", error=str(e))
            return [], 0
        return conditions_of(head), content_length(head) or capture.length

    async def first_with_digest(self, digest: str) -> Capture | None:
        """The earliest response with payload ``digest`` in the catalog's digest index, looked up
        in a worker thread; None if there is none (or the catalog cannot say)."""
        try:
            return await self.lookup_calls.call(self.lookup.first_with_digest, digest)
        except (CatalogError, ValueError, sqlite3.Error) as e:
            event(log, logging.WARNING, "digest-lookup-failed", digest=digest, error=str(e))
            return None

    def may_fetch(self, origin: str) -> bool:
        """False once this process's lease of ``origin`` is lost or past its safe deadline."""
        return self.leases is None or self.leases.holds(origin, time.monotonic())

    def disk_trouble(self, error: BaseException, where: str) -> None:
        """A write failed for lack of disk: stop fetching until a retry succeeds (see _sync)."""
        if not self.disk_full:
            self.stats.errors["disk"] += 1
            self.stats.fault(log, logging.ERROR, "disk-full", where=where, error=str(error),
                             action=self.config.crawl.on_disk_full)
            self.disk_full = True
            self._hold()

    def disk_back(self) -> None:
        """Writes succeed again: fetching resumes unless the local limit holds it."""
        self.disk_full = False
        self._hold()

    def local_limit(self, reached: bool) -> None:
        """The bundles not shipped yet reach warc.local_limit (or no longer do): fetching
        pauses (or resumes, unless the disk is full)."""
        self.local_full = reached
        self._hold()

    def database(self, away: bool) -> None:
        """The database went away (or came back): fetching waits for it (``store_ok``)."""
        self.database_away = away
        if away and self.store_ok.is_set():
            self.store_ok = trio.Event()
        elif not away:
            self.store_ok.set()
            self.nudge()
        self._hold()

    def _hold(self) -> None:
        """Pause or resume fetching as ``disk_full`` and ``local_full`` say, and tell the status
        what fetching waits for (the database first: nothing is fetched while it is away)."""
        held = "disk" if self.disk_full else "objects" if self.local_full else None
        self.stats.waiting_for = "database" if self.database_away else held
        if held is not None and self.disk_ok.is_set():
            self.disk_ok = trio.Event()
            self.nudge()
        elif held is None:
            self.disk_ok.set()

    @property
    def held_by(self) -> str:
        """Why fetching pauses, for a visit's outcome."""
        return "disk full" if self.disk_full else "bundles waiting for the object store"

    def nudge(self) -> None:
        """Wake every resting visit (to notice a drain or a new config)."""
        wake, self.wake = self.wake, trio.Event()
        wake.set()

    async def make_durable(self, queues: Callable[[], Iterable[CrawlQueueStore]]) -> None:
        """Make every record, spool line and crawl-queue line written so far durable, then commit
        the catalog entries of those records (``commit_captures``), all in a worker thread: the
        fsyncs, the full WARC bundles and spool files to finish, the new directory entries (a
        ``SyncJob``). One job at a time, so a visit that ends never saves its cursor while a
        bundle holding its records is still being finished by another. ``queues`` is called once
        the job's turn has come (the crawl queues still open then); the catalog entries are taken
        at that same moment, before the bundle hands over a full one, so a bundle the job finishes
        (and a cluster then ships) has every entry of its records committed by this job. Raises
        the disk's error; what was not finished (entries included) is finished by the next job."""
        async with self.sync_lock:
            job = SyncJob()
            captures: list[Capture] = []
            try:
                for crawl_queue in queues():
                    crawl_queue.add_to(job)
                captures, self.captures = self.captures, []
                bundles = self.bundle.add_to(job)
                spooled = self.spool.add_to(job)
            except BaseException:
                job.drop()  # the duplicates would hold the crawl queues' locks
                self.captures[:0] = captures
                raise

            def work() -> None:
                job.run()
                if self.commit_captures is not None:
                    self.commit_captures(captures)

            try:
                with trio.CancelScope(shield=True):  # the handed-over files must not be lost
                    await trio.to_thread.run_sync(work)
            except BaseException:
                self.captures[:0] = captures  # committed by a later job (adding twice is harmless)
                raise
            self.bundle.finished(bundles)
            self.spool.finished(spooled)
            if self.published is not None:
                self.published += [item.final for item in bundles]

    async def settle(self, crawl_queue: CrawlQueueStore) -> None:
        """End of a visit: make what it wrote durable (in a worker thread), then save its cursor."""
        try:
            mark = crawl_queue.mark()
            await self.make_durable(lambda: [crawl_queue])
        except OSError as e:  # the cursor stays where the disk has the records: refetch later
            if not is_disk_error(e):
                raise
            self.disk_trouble(e, "end of visit")
            return
        crawl_queue.save(mark)
