"""What every site visit of one crawler process shares: the capture sink and the writers, what
earlier captures say, the resolver, the counters, the events that drain or pause the crawl, and
the one way to make writes durable (``make_durable``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from archiver.config import Config
from archiver.crawl.addressslots import AddressSlots
from archiver.crawl.bodies import BodyWork
from archiver.crawl.capture import CaptureSink
from archiver.crawl.dedupe import Dedupe
from archiver.crawl.rendering import Browsers
from archiver.crawl.stats import Stats
from archiver.dns.lookup import Lookup
from archiver.queues.interfaces import CrawlQueues, CrawlQueueStore, SpoolWriterStore
from archiver.queues.leases import Leases
from archiver.store.bundles import BundleWriter
from archiver.store.durable import SyncJob, is_disk_error
from archiver.store.models import Capture

log = logging.getLogger("archiver.crawl.crawler")


@dataclass
class CrawlContext:
    """What every site visit of one process shares."""

    config: Config
    bundle: BundleWriter
    spool: SpoolWriterStore
    lookup: Lookup
    stats: Stats
    slots: AddressSlots
    sink: CaptureSink  # where every fetched exchange goes (archiver.crawl.capture)
    dedupe: Dedupe  # what earlier captures say about a fetch (archiver.crawl.dedupe)
    crawl_queues: CrawlQueues  # every site's crawl queue (archiver.stores)
    bodies: BodyWork  # large bodies' work (archiver.crawl.bodies)
    open_queues: set[CrawlQueueStore] = field(default_factory=set)  # those visits hold now
    draining: trio.Event = field(default_factory=trio.Event)  # set by SIGTERM: finish, take no more
    wake: trio.Event = field(default_factory=trio.Event)  # set (and replaced) on drain and reload
    # Clear while fetching pauses for this machine's disk: writes fail (``disk_full``), or the
    # bundles not shipped yet reach warc.local_limit (``local_full``, set by the crawler).
    disk_ok: trio.Event = field(default_factory=trio.Event)
    disk_full: bool = False
    local_full: bool = False
    store_ok: trio.Event = field(default_factory=trio.Event)  # clear while the database is away
    database_away: bool = False
    # The process's browser (archiver.crawl.rendering); None: pages are never rendered.
    browsers: Browsers | None = None
    leases: Leases | None = None  # the site leases held (shared site queue); None: embedded
    published: list[Path] | None = None  # bundles finished, to ship (shared stores); None: embedded
    sync_lock: trio.Lock = field(default_factory=trio.Lock)  # one SyncJob at a time
    # The wall clock the sheets' windows and budgets and the site queue's due times are read on
    # (seconds since the epoch); tests pass another.
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self.disk_ok.set()
        self.store_ok.set()

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
        the catalog entries of those records (``CaptureSink.commit``), all in a worker thread: the
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
                captures = self.sink.take()
                bundles = self.bundle.add_to(job)
                spooled = self.spool.add_to(job)
            except BaseException:
                job.drop()  # the duplicates would hold the crawl queues' locks
                self.sink.put_back(captures)
                raise

            def work() -> None:
                job.run()
                self.sink.commit(captures)

            try:
                with trio.CancelScope(shield=True):  # the handed-over files must not be lost
                    await trio.to_thread.run_sync(work)
            except BaseException:
                self.sink.put_back(captures)  # committed by a later job
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
