"""What a crawler process does in a cluster (shared stores) besides crawling.

- **Registration**: the process registers its number in ``crawlers`` (a new epoch); a second
  process with the same number elsewhere is refused while the first beats.
- **Leases and heartbeat** (``renew``, every third of ``crawl.lease_ttl``): the leases of the sites
  in its slots are renewed in one statement, the process's heartbeat recorded, and the bundles of
  crawlers that stopped beating declared lost (``reap``: their URLs go back to their sites'
  inboxes, finished sites are due again; event ``bundle-lost``, counted as a fault).
- **Paused past its TTL** (SIGSTOP, a frozen VM): its leases went to others, whose epochs fence
  every late write of its visits (``lease-lost``, ``fenced-write``); a bundle declared lost
  meanwhile is its own again at its next group commit (``bundle-reopened``), is shipped, and is
  catalogued whole from its own records.
- **Shipping** (``ship``): each bundle the group commit finished goes to the object store,
  verified, then its catalog entries into the catalog, then the local file is deleted; closed
  spool files go to ``outlinks/`` in the store. While the store is away (unreachable, failing,
  or holding other bytes than were sent) the bundles *wait* on this disk, oldest first, and the
  next call tries again (``away`` says why it stopped); the crawler bounds how many bytes wait
  (``local_bytes``, ``warc.local_limit``).
- **Start** (``recover``): the process's own ``.open`` bundles left by a crash are repaired and,
  with any closed ones, shipped; what its earlier life recorded and neither this disk nor the store
  has is lost.

Blocking methods run in worker threads (the crawler calls them through trio.to_thread).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from archiver.config import Config
from archiver.crawl.stats import Stats
from archiver.logs import event
from archiver.queues.postgres.sitequeue import PgSiteQueue
from archiver.store.bundles import OPEN, SUFFIX, repair_open_bundle
from archiver.store.interfaces import CatalogStore
from archiver.store.layout import SPOOL, folder
from archiver.store.models import Capture
from archiver.store.objectstore import (
    ObjectMismatch,
    ObjectStore,
    ObjectStoreError,
    ObjectStoreUnavailable,
    open_object,
)
from archiver.store.postgres.crawlers import BundleLedger, CrawlerBusy, CrawlerRoster
from archiver.store.shipping import Shipped, ship_closed, ship_file
from archiver.store.warcindex import index_stream
from archiver.stores import ProcessBusy, SharedStores

log = logging.getLogger("archiver.crawl.cluster")

SPOOL_KEYS = "outlinks/"
_TWINS = 100  # captures read to find a URL's own among its key-twins' (``http://h/a/``, ``http://h/a``)


class ClusterMember:
    """One crawler process's part in the cluster (see the module docstring)."""

    def __init__(self, config: Config, stores: SharedStores, process: int, catalog: CatalogStore,
                 site_queue: PgSiteQueue, *, stats: Stats) -> None:
        """``site_queue``: the crawler's, where it leases the sites it claims; ``stats``: the
        crawler's counters, where its faults are counted (``Stats.fault``)."""
        self.site_queue = site_queue
        ttl = config.crawl.lease_ttl
        self.stats = stats
        self.process = process
        self.prefix = config.warc.prefix
        self.roster = CrawlerRoster(stores.url, ttl, watch=stores.watch)
        try:
            epoch = self.roster.register(process, socket.gethostname(), os.getpid())
        except CrawlerBusy as e:
            self.roster.close()
            raise ProcessBusy(str(e)) from None
        self.ledger = BundleLedger(stores.url, process=process, epoch=epoch, ttl=ttl,
                                   watch=stores.watch)
        self._ledger_lock = threading.Lock()  # the ledger's connection, for one thread at a time
        self.objects: ObjectStore = stores.objects()
        self.bundles = stores.warc_directory()
        self.spool = folder(config.root, SPOOL)
        self.catalog = catalog
        self.fenced = False  # another registration of our number superseded us
        self.waiting: list[Path] = []  # closed bundles not shipped yet, oldest first
        self._announced: set[Path] = set()  # those whose wait was logged (bundle-waiting)
        self.away: ObjectStoreError | None = None  # why the last shipment stopped, if it did
        self._away_since = 0.0

    def close(self) -> None:
        self.ledger.close()
        self.roster.close()

    @contextlib.contextmanager
    def beating(self) -> Iterator[None]:
        """Beat the heart from a thread of its own while the block runs: shipping at start or
        at exit may outlast the TTL, and a crawler that stops beating is taken for gone."""
        done = threading.Event()

        def beat() -> None:
            while not done.wait(self.roster.ttl / 3):
                self.roster.beat()

        beater = threading.Thread(target=beat, name="heartbeat", daemon=True)
        beater.start()
        try:
            yield
        finally:
            done.set()
            beater.join()

    def _ours(self, name: str) -> bool:
        pattern = rf"{re.escape(self.prefix)}-\d{{14}}-{self.process}-\d+{re.escape(SUFFIX)}"
        return re.fullmatch(pattern + f"(?:{re.escape(OPEN)})?", name) is not None

    def recover(self) -> None:
        """At start: repair and ship this process's bundles left on this disk; declare lost the
        ones its earlier life recorded that are neither here nor in the store."""
        repaired = 0
        if self.bundles.is_dir():
            for path in sorted(self.bundles.glob("*" + SUFFIX + OPEN)):
                if self._ours(path.name):
                    repair_open_bundle(path)
                    repaired += 1
        local = sorted(p for p in self.bundles.glob("*" + SUFFIX) if self._ours(p.name)) \
            if self.bundles.is_dir() else []
        with self.beating():
            shipped = self.ship(local)
        lost, requeued = self.reap()  # our earlier life's bundles included (an older epoch)
        event(log, logging.INFO, "cluster-recovered", process=self.process, repaired=repaired,
              shipped=len(shipped), lost=len(lost), requeued=requeued)

    def record(self, captures: list[Capture]) -> None:
        """The group commit's catalog entries, pending until their bundle is shipped."""
        with self._ledger_lock:
            reopened = self.ledger.record(captures)
        for name in reopened:
            self.stats.fault(log, logging.WARNING, "bundle-reopened", bundle=name,
                             cause="declared lost while this process was paused",
                             note="it ships and is catalogued whole; URLs sent back meanwhile are"
                             " captured twice")

    def ship(self, paths: Iterable[Path]) -> list[Shipped]:
        """Ship the bundles waiting, then ``paths``, oldest first: each verified and catalogued
        before its local copy goes. The first one the store does not take (``away`` says why)
        ends the round: it and those after it wait for the next call. What was shipped."""
        self.waiting += [path for path in paths if path not in self.waiting]
        shipped: list[Shipped] = []
        while self.waiting:
            path = self.waiting[0]
            if not path.exists():  # shipped by an earlier call that stopped before forgetting it
                del self.waiting[0]
                continue
            try:
                done = ship_file(path, self.objects, path.name,
                                 then=lambda done: self._catalogue(done.key))
            except (ObjectStoreUnavailable, ObjectMismatch) as e:
                self._store_away(e)
                return shipped
            del self.waiting[0]
            self._announced.discard(path)
            shipped.append(done)
            event(log, logging.INFO, "bundle-shipped", bundle=path.name, bytes=done.size,
                  to=self.objects.location(path.name))
        if shipped:  # after the round, so that its ``waiting`` counts what is still left
            self._store_back()
        return shipped

    def _store_away(self, error: ObjectStoreError) -> None:
        """A shipment stopped: the first failure of an outage is logged, and each bundle that
        starts waiting."""
        if self.away is None:
            self._away_since = time.monotonic()
            self.stats.fault(log, logging.WARNING, "store-unavailable", store="objects", error=str(error),
                             note="closed bundles wait on this disk and are shipped when it is back")
        self.away = error
        cause = error.reason if isinstance(error, ObjectStoreUnavailable) else "the store holds other bytes"
        for path in self.waiting:
            if path not in self._announced:
                self._announced.add(path)
                self.stats.fault(log, logging.WARNING, "bundle-waiting", bundle=path.name,
                                 waiting=len(self.waiting), cause=cause)

    def _store_back(self) -> None:
        """A shipment went through: the end of an outage is logged."""
        if self.away is not None:
            self.stats.fault(log, logging.INFO, "store-recovered", store="objects",
                             away_s=round(time.monotonic() - self._away_since, 1),
                             waiting=len(self.waiting))
            self.away = None

    def local_bytes(self) -> int:
        """Bytes of this process's bundles on this disk: the open one and those not shipped."""
        total = 0
        with os.scandir(self.bundles) as entries:
            for entry in entries:
                if self._ours(entry.name):
                    with contextlib.suppress(FileNotFoundError):  # shipped meanwhile
                        total += entry.stat().st_size
        return total

    def _catalogue(self, name: str, *, from_records: bool = False) -> None:
        """Bundle ``name`` is in the store: its entries into the catalog (the pending ones, or
        with ``from_records`` its own records, read back from the store)."""
        def index() -> Iterable[Capture]:
            with open_object(self.objects, name) as f:
                yield from index_stream(f, name, self.objects.location(name))

        with self._ledger_lock:
            self.ledger.shipped(name, self.catalog, index, from_records=from_records)

    def ship_spool(self) -> int:
        """Ship the closed spool files; how many (none while the store is away: they wait)."""
        if not self.spool.is_dir():
            return 0
        try:
            shipped = ship_closed(self.spool, self.objects, pattern="*.tsv", under=SPOOL_KEYS)
        except (ObjectStoreUnavailable, ObjectMismatch) as e:
            self._store_away(e)
            return 0
        if shipped:
            self._store_back()
        return len(shipped)

    def renew(self) -> set[str]:
        """Renew the site leases and the heartbeat; the origins whose lease was lost."""
        lost = self.site_queue.renew()
        if not self.roster.beat() and not self.fenced:
            self.fenced = True
            event(log, logging.ERROR, "crawler-superseded", process=self.process,
                  note="another crawler registered this process number; this one stops")
        return lost

    def reap(self) -> tuple[list[str], int]:
        """Settle the bundles of crawlers that vanished: catalogued if the store has them, else
        lost and their URLs requeued. (bundles lost, URLs requeued)."""
        with self._ledger_lock:
            vanished = self.ledger.vanished()
        lost, requeued = [], 0
        waiting_here = {path.name for path in self.waiting}  # our earlier life's, shipped later
        for name, cause in vanished:
            if name in waiting_here:
                continue
            try:
                if self.objects.size(name) is not None:  # shipped, then killed before the catalog learnt
                    # From its records: its pending entries may lack some (a failover that lost
                    # the last commits), the bundle in the store lacks none.
                    self._catalogue(name, from_records=True)
                    self.stats.fault(log, logging.WARNING, "bundle-recovered", bundle=name, cause=cause,
                                     note="its crawler vanished after shipping it; catalogued now")
                    continue
            except ObjectStoreUnavailable:  # the store cannot say: settled once it answers
                break
            with self._ledger_lock:
                gone = self.ledger.lose(name, self._captured)
            if gone is not None:
                lost.append(name)
                requeued += gone.requeued
                self.stats.fault(log, logging.WARNING, "bundle-lost", bundle=name, cause=cause,
                                 requeued=gone.requeued, sites=gone.sites, woken=gone.woken,
                                 note="its crawler vanished before shipping it; its URLs are"
                                 " fetched again")
        return lost, requeued

    def _captured(self, url: str, at: str) -> bool:
        """True if the catalog has a capture of exactly ``url`` from timestamp ``at`` on (under
        the ledger's lock, which also guards the catalog's connection)."""
        return any(c.url == url for c in self.catalog.captures(url, from_=at, limit=_TWINS))

    def held_elsewhere(self) -> list[str]:
        """The bundles other crawlers have open now (see ``BundleLedger.held_elsewhere``)."""
        with self._ledger_lock:
            return self.ledger.held_elsewhere()

    def settled(self, names: list[str]) -> tuple[bool, bool]:
        """Of these bundles: (all shipped or lost, any lost)."""
        with self._ledger_lock:
            states = self.ledger.states(names)
        return (not {"open", "reopened"} & set(states.values()), "lost" in states.values())
