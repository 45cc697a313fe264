"""The one place that chooses where archiver's shared state lives.

Every process (crawler, DNS service, links batch, replay, the command line) asks ``open_stores``
for its stores and reaches them through the protocols of :mod:`archiver.store.interfaces` and
:mod:`archiver.queues.interfaces`; none opens a SQLite file or a path under the archive root itself.
Two implementations: the embedded default (SQLite files and plain files under ``archive.root``,
laid out as README "Files" says), and the shared stores of several machines (PostgreSQL and an
object store, README "Running on several machines").

Callers see either as a :class:`Stores`: the stores themselves, and answers to the few questions
whose answer depends on the backend (where the status lives, which site queue a site goes to,
whether the database can go away...), so that no caller tells the backends apart; code that needs
one kind by its nature (``archiver store migrate``, a cluster member) opens it with
``open_embedded`` or ``open_shared``, or asks ``Stores.cluster``.

Each store's module is imported where the store is opened, not at the top: every command imports
this module, and a command should pay only for the stores it opens (an embedded archive never loads
psycopg or boto3, a lookup never loads the crawler's; see ``archiver.cli``).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from archiver.config import Config, database_url
from archiver.store.layout import SPOOL, folder

if TYPE_CHECKING:
    from archiver.queues.embedded.crawlqueue import EmbeddedCrawlQueues, QueueNames
    from archiver.queues.interfaces import (
        CrawlQueues,
        LinksState,
        SiteQueueStore,
        SpoolFiles,
        SpoolWriterStore,
    )
    from archiver.queues.leases import Leases
    from archiver.queues.postgres.crawlqueue import PgCrawlQueues
    from archiver.queues.postgres.sitequeue import PgSiteQueue
    from archiver.queues.spool import SpoolWriter
    from archiver.store.bundles import BundleWriter
    from archiver.store.catalog_maintenance import Verification
    from archiver.store.interfaces import (
        CatalogStore,
        DnsHistoryStore,
        FullTextStore,
        StatusStore,
        WarcReader,
    )
    from archiver.store.objectstore import ObjectStore
    from archiver.store.postgres.connection import StoreWatch
    from archiver.store.postgres.crawlers import UnshippedCaptures


class ProcessBusy(Exception):
    """Another process runs with the same role and number on this archive."""


class Stores(Protocol):
    """What every process asks of its stores, whichever backend holds them (``open_stores``)."""

    config: Config
    root: Path

    # -- the stores

    def site_queue(self, process: int, *, recover: bool = False) -> SiteQueueStore: ...

    def crawl_queues(self, *, bulk: bool = False) -> CrawlQueues: ...

    def spool_writer(self, process: int) -> SpoolWriterStore: ...

    def spool_files(self) -> SpoolFiles: ...

    def links_state(self) -> LinksState: ...

    def catalog(self, *, readonly: bool = False, digests: bool = False,
                max_open: int | None = None) -> CatalogStore: ...

    def dns_history(self, *, readonly: bool = False) -> DnsHistoryStore: ...

    def fulltext(self, *, readonly: bool = False) -> FullTextStore: ...

    def bundle_writer(self, process: int) -> BundleWriter: ...

    def warcs(self) -> WarcReader: ...

    def reindex_catalog(self, warcs: WarcReader, names: list[str],
                        progress: Callable[[int, int], None]) -> int: ...

    def verify_catalog(self, catalog: CatalogStore, warcs: WarcReader,
                       names: list[str]) -> Verification: ...

    def status(self) -> StatusStore: ...

    def queued_origins(self, revisits_due_by: float = 0.0) -> list[str]: ...

    def warc_directory(self) -> Path: ...

    def state_directory(self) -> Path: ...

    def lock(self, role: str, number: int | None = None) -> ProcessLock: ...

    # -- what depends on the backend

    def site_queues(self) -> Iterator[tuple[int | None, SiteQueueStore]]:
        """Every site queue with its crawler process number (None: the one shared queue), each
        opened as it is reached; the caller closes it."""
        ...

    def site_queue_of(self, origin: str) -> int:
        """The number of the site queue ``origin`` goes to (``site_queue``'s ``process``)."""
        ...

    @property
    def site_queue_count(self) -> int:
        """How many site queues the sites are split over (``queues.sites.process_for``)."""
        ...

    def queue_name_rule(self) -> QueueNames | None:
        """The crawl queues' rule for sites as ``CrawlQueues.unfit`` applies it, picklable (the
        links engine's workers are given it); None when the queues take any site."""
        ...

    @property
    def status_location(self) -> str:
        """Where the crawlers' status lives, for a message."""
        ...

    def local_status(self) -> StatusStore | None:
        """A copy of each crawler's status on this machine's disk, for when the status store is
        away; None when the status store is already on this machine's disk."""
        ...

    def warc_store(self) -> ObjectStore:
        """Where closed bundles are kept, as an object store (``archiver import`` puts there)."""
        ...

    def shared_objects(self) -> ObjectStore | None:
        """The object store the machines share (closed bundles, spool files, the links batch's
        slices); None when everything is on this machine's disk."""
        ...

    def unshipped(self) -> UnshippedCaptures | None:
        """The captures of bundles still on a crawler machine (replay answers 503 for them); None
        when every catalogued bundle is where ``warcs`` reads."""
        ...

    @property
    def watch(self) -> StoreWatch | None:
        """The database's watch (whether it answers; faults to report); None when no store can go
        away (files on this machine)."""
        ...

    @property
    def leases(self) -> Leases | None:
        """This process's site leases (another machine may take a site whose lease runs out);
        None when sites are not leased."""
        ...

    @property
    def embedded(self) -> EmbeddedStores | None:
        """These stores when they are files on this machine (what crash recovery of the embedded
        crawl queues needs); None when machines share them."""
        ...

    @property
    def cluster(self) -> SharedStores | None:
        """These stores when several machines share them (what a cluster member needs of its
        database and object store); None for an embedded archive."""
        ...


class EmbeddedStores:
    """Every store as files under ``config.root``."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.root = config.root

    # -- queues

    def site_queue(self, process: int, *, recover: bool = False) -> SiteQueueStore:
        """The site queue of crawler ``process``; ``recover`` (only its owner) puts the sites a
        crash left active back to waiting."""
        from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
        return SiteQueue(queue_path(self.root, process), recover=recover)

    def site_queue_numbers(self) -> list[int]:
        """The process numbers that have a site queue."""
        folder = self.root / "sites"
        return sorted(int(p.stem) for p in folder.glob("*.sqlite") if p.stem.isdigit()) \
            if folder.is_dir() else []

    def crawl_queues(self, *, bulk: bool = False) -> EmbeddedCrawlQueues:
        """``bulk``: for the links batch, which calls ``settle`` after its syncs."""
        from archiver.queues.embedded.crawlqueue import EmbeddedCrawlQueues
        c = self.config.crawl
        return EmbeddedCrawlQueues(self.root, bulk=bulk, bloom_bits=c.site_bitmap_bits,
                                   max_fp=c.site_bitmap_max_fp, max_decisions=c.max_decisions)

    def spool_writer(self, process: int) -> SpoolWriterStore:
        return _spool_writer(self.config, process)

    def spool_files(self) -> SpoolFiles:
        from archiver.queues.spool import SpoolDirectory
        return SpoolDirectory(folder(self.root, SPOOL))

    def links_state(self) -> LinksState:
        from archiver.queues.embedded.linksstate import EmbeddedLinksState
        return EmbeddedLinksState(self.root / "links")

    # -- stores

    def catalog(self, *, readonly: bool = False, digests: bool = False,
                max_open: int | None = None) -> CatalogStore:
        """The card catalog (``digests``: responses added go to its digest index too;
        ``max_open``: shard connections kept open, by default from the soft RLIMIT_NOFILE)."""
        from archiver.store.embedded.catalog import Catalog
        return Catalog(self.root / "catalog", self.config.catalog.shards, readonly=readonly,
                       digests=digests, max_open=max_open)

    def dns_history(self, *, readonly: bool = False) -> DnsHistoryStore:
        """The DNS history (created by a writer; FileNotFoundError for a reader when absent)."""
        from archiver.store.embedded.dnshistory import DnsHistory
        return DnsHistory(self.root / "dns.sqlite", readonly=readonly)

    def fulltext(self, *, readonly: bool = False) -> FullTextStore:
        """The full-text index, ``search/fulltext.sqlite`` (created by a writer;
        ``store.embedded.fulltext.FullTextMissing`` for a reader when absent)."""
        from archiver.store.embedded.fulltext import FtsIndex
        return FtsIndex(self.root / "search" / "fulltext.sqlite", readonly=readonly)

    def bundle_writer(self, process: int) -> BundleWriter:
        """The WARC bundles crawler ``process`` writes."""
        return _bundle_writer(self.config, self.warc_directory(), process)

    def warcs(self) -> WarcReader:
        """The bundles in the WARC folder (``.open`` ones too, by their closed names)."""
        from archiver.store.catalog_maintenance import WarcFiles
        return WarcFiles(self.warc_directory())

    def reindex_catalog(self, warcs: WarcReader, names: list[str],
                        progress: Callable[[int, int], None]) -> int:
        """Rebuild the catalog from the bundles ``names`` beside the live one, then swap."""
        from archiver.store.catalog_maintenance import reindex
        return reindex(self.root, self.config.catalog.shards, warcs, names, progress)

    def verify_catalog(self, catalog: CatalogStore, warcs: WarcReader, names: list[str]) -> Verification:
        """Compare the catalog with the records of the bundles ``names``, both ways."""
        from archiver.store.catalog_maintenance import verify
        return verify(warcs, catalog, names)

    def queued_origins(self, revisits_due_by: float = 0.0) -> list[str]:
        """The origins of the sites not done in any crawler's site queue, and of those waiting for
        a revisit due by ``revisits_due_by`` (for the DNS service)."""
        origins: dict[str, None] = {}
        for number in self.site_queue_numbers():
            queue = self.site_queue(number)
            try:
                origins.update(dict.fromkeys(queue.origins()))
                origins.update(dict.fromkeys(queue.revisits_due(revisits_due_by)))
            finally:
                queue.close()
        return list(origins)

    def warc_directory(self) -> Path:
        """Where bundles are written (crash recovery repairs this process's ``.open`` ones there)."""
        return Path(self.config.warc.store) if self.config.warc.store else self.root / "warcs"

    def state_directory(self) -> Path:
        """Per-process files: status, commit points."""
        return self.root / "state"

    def status(self) -> StatusStore:
        from archiver.store.status import StatusFiles
        return StatusFiles(self.root)

    def lock(self, role: str, number: int | None = None) -> ProcessLock:
        """Hold the lock of one process role (``crawl`` with its number, ``links``) until released
        (or the process ends, however it ends); ProcessBusy if another holds it."""
        return _lock_file(self.root, role, number)

    # -- what depends on the backend (see Stores)

    watch: StoreWatch | None = None
    leases: Leases | None = None
    cluster: SharedStores | None = None

    @property
    def embedded(self) -> EmbeddedStores | None:
        return self

    def site_queues(self) -> Iterator[tuple[int | None, SiteQueueStore]]:
        for number in self.site_queue_numbers():
            yield number, self.site_queue(number)

    def site_queue_of(self, origin: str) -> int:
        """The queue of the crawler process that owns ``origin``."""
        from archiver.queues.sites import process_for
        return process_for(origin, self.config.crawl.processes)

    @property
    def site_queue_count(self) -> int:
        return self.config.crawl.processes

    def queue_name_rule(self) -> QueueNames | None:
        """A crawl queue is a folder named after its site (``QueueNames``)."""
        from archiver.queues.embedded.crawlqueue import QueueNames
        return QueueNames(self.root)

    @property
    def status_location(self) -> str:
        return str(self.state_directory())

    def local_status(self) -> StatusStore | None:
        return None

    def warc_store(self) -> ObjectStore:
        """The WARC folder."""
        from archiver.store.objectstore import FolderStore
        return FolderStore(self.warc_directory())

    def shared_objects(self) -> ObjectStore | None:
        return None

    def unshipped(self) -> UnshippedCaptures | None:
        return None


def _lock_path(root: Path, role: str, number: int | None) -> Path:
    from archiver.queues.embedded.sitequeue import queue_path
    if role == "crawl" and number is not None:
        return queue_path(root, number).with_suffix(".lock")
    return root / "state" / f"{role}.lock"


def lock_held(root: Path, role: str, number: int | None = None) -> bool | None:
    """Whether a process on this machine holds the lock of a role (see ``EmbeddedStores.lock``),
    read from the kernel's list of locks (``/proc/locks``) without taking it: a probe that took
    it, even for an instant, could make the process starting then refuse to run. None where that
    list cannot be read."""
    try:
        found = os.stat(_lock_path(root, role, number))
    except FileNotFoundError:
        return False
    try:
        locks = Path("/proc/locks").read_text(encoding="ascii")
    except OSError:
        return None
    # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:2146533 0 EOF"; a waiter's line has "->" before it
    device = f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}:{found.st_ino}"
    return any(fields[1:2] == ["FLOCK"] and device in fields for fields in map(str.split, locks.splitlines()))


def _lock_file(root: Path, role: str, number: int | None) -> ProcessLock:
    """``flock`` the lock file of a role on this machine (see ``EmbeddedStores.lock``)."""
    path = _lock_path(root, role, number)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        what = {"crawl": "crawler"}.get(role, role) + ("" if number is None else f" process {number}")
        raise ProcessBusy(f"{what} is already running on {root} (it holds {path})") from None
    return ProcessLock(fd)


def _spool_writer(config: Config, process: int) -> SpoolWriter:
    from archiver.queues.spool import SpoolWriter
    o = config.spool
    return SpoolWriter(folder(config.root, SPOOL), process, max_lines=o.max_lines,
                       max_age=o.max_age)


def _bundle_writer(config: Config, directory: Path, process: int) -> BundleWriter:
    from archiver.store.bundles import BundleWriter
    return BundleWriter(directory, config.warc, process=process, operator=config.archive.operator,
                        extra_info={"robots": "obey", "http-header-user-agent": config.crawl.user_agent})


class ProcessLock:
    """An ``flock`` held on a lock file: the kernel drops it when the process dies."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class SharedStores:
    """Shared state in PostgreSQL (``store.url``), closed WARC bundles and spool files in an object
    store (``warc.store``: ``s3://bucket/prefix`` or a shared folder). On each machine, under
    ``archive.root``: the open bundles (``bundles/``), the open spool files (``spool/``), the
    lock files (``state/``); each process's status is in PostgreSQL (table ``crawlers``).

    Every PostgreSQL store opened here shares ``watch`` (archiver.store.postgres.connection): whether the
    database answers, and whether calls wait for it when it does not (``wait``: a service that
    waits rather than fails while it restarts or fails over)."""

    def __init__(self, config: Config, url: str, *, wait: bool = False) -> None:
        self.config = config
        self.root = config.root
        self.url = url
        from archiver.queues.leases import Leases
        from archiver.store.postgres.connection import PgConnection, StoreWatch
        self.leases = Leases(config.crawl.lease_ttl)  # this process's site leases
        self.watch: StoreWatch = StoreWatch(wait=wait, retry_max=config.store.retry_max)
        PgConnection(url, readonly=True, watch=self.watch).close()  # the schema checked

    # -- queues

    def site_queue(self, process: int | None = None, *, recover: bool = False) -> PgSiteQueue:
        """The shared site queue; claims are made for crawler ``process``. (``recover`` is the
        embedded queue's: here expired leases are taken over at claim time.)"""
        from archiver.queues.postgres.sitequeue import PgSiteQueue
        return PgSiteQueue(self.url, process=process, leases=self.leases, watch=self.watch)

    def crawl_queues(self, *, bulk: bool = False) -> PgCrawlQueues:
        """(``bulk`` changes nothing here: PostgreSQL checkpoints by itself.)"""
        c = self.config.crawl
        from archiver.queues.postgres.crawlqueue import PgCrawlQueues
        return PgCrawlQueues(self.url, self.leases, bloom_bits=c.site_bitmap_bits,
                             max_fp=c.site_bitmap_max_fp, max_decisions=c.max_decisions,
                             watch=self.watch)

    def spool_writer(self, process: int) -> SpoolWriterStore:
        """This machine's open spool files (the crawler ships the closed ones)."""
        return _spool_writer(self.config, process)

    def bundle_writer(self, process: int) -> BundleWriter:
        """The bundles crawler ``process`` writes on this machine (shipped once closed)."""
        return _bundle_writer(self.config, self.warc_directory(), process)

    def objects(self) -> ObjectStore:
        """Where closed bundles and spool files go: the S3 bucket or the folder ``warc.store`` names."""
        from archiver.store.objectstore import FolderStore
        from archiver.store.s3.objectstore import S3Store
        target = self.config.warc.store
        if target.startswith("s3:"):
            return S3Store.from_config(target, self.config.s3)
        return FolderStore(Path(target) if target else self.root / "warcs")

    # -- stores

    def catalog(self, *, readonly: bool = False, digests: bool = False,
                max_open: int | None = None) -> CatalogStore:
        """``max_open`` is for the files of an embedded catalog: a PostgreSQL one opens none."""
        from archiver.store.postgres.catalog import PgCatalog
        return PgCatalog(self.url, self.config.catalog.shards, readonly=readonly, digests=digests,
                         watch=self.watch)

    def dns_history(self, *, readonly: bool = False) -> DnsHistoryStore:
        from archiver.store.postgres.dnshistory import PgDnsHistory
        return PgDnsHistory(self.url, readonly=readonly, watch=self.watch)

    def fulltext(self, *, readonly: bool = False) -> FullTextStore:
        """The full-text index, tables ``fulltext_documents`` and ``fulltext_captures``."""
        from archiver.store.postgres.fulltext import PgFullText
        return PgFullText(self.url, readonly=readonly, watch=self.watch)

    def warc_directory(self) -> Path:
        """Where this machine writes its open bundles (shipped, then removed, once closed)."""
        return self.root / "bundles"

    def state_directory(self) -> Path:
        return self.root / "state"

    def lock(self, role: str, number: int | None = None) -> ProcessLock:
        return _lock_file(self.root, role, number)

    # -- the external-link batch

    def spool_files(self) -> SpoolFiles:
        """The closed spool files every crawler machine shipped to the object store."""
        from archiver.queues.spool import ObjectSpool
        return ObjectSpool(self.objects())

    def links_state(self) -> LinksState:
        """The links batch's state, which holds the cluster's links lock while open (ProcessBusy
        if another batch, on any machine, holds it)."""
        from archiver.queues.postgres.linksstate import LinksBatchBusy, PgLinksState
        try:
            return PgLinksState(self.url, self.objects(), watch=self.watch)
        except LinksBatchBusy as e:
            raise ProcessBusy(str(e)) from None

    def warcs(self) -> WarcReader:
        """The shipped bundles in the object store (the catalog names no others)."""
        from archiver.store.catalog_maintenance import ObjectWarcs
        return ObjectWarcs(self.objects())

    def reindex_catalog(self, warcs: WarcReader, names: list[str],
                        progress: Callable[[int, int], None]) -> int:
        """Rebuild the catalog from the bundles ``names`` in one transaction (see
        ``catalog_maintenance.reindex_in_place``: safe while crawlers run)."""
        from archiver.store.catalog_maintenance import reindex_in_place
        from archiver.store.postgres.catalog import PgCatalog
        with PgCatalog(self.url, self.config.catalog.shards, watch=self.watch) as catalog:
            return reindex_in_place(catalog, warcs, names, progress)

    def verify_catalog(self, catalog: CatalogStore, warcs: WarcReader, names: list[str]) -> Verification:
        """Compare the catalog with the records of the bundles ``names`` in the object store."""
        from archiver.store.catalog_maintenance import verify
        return verify(warcs, catalog, names)

    def status(self) -> StatusStore:
        """Every crawler process of the cluster (table crawlers)."""
        from archiver.store.postgres.status import PgStatus
        return PgStatus(self.url, watch=self.watch)

    def queued_origins(self, revisits_due_by: float = 0.0) -> list[str]:
        """The origins of the sites not done in the shared site queue, and of those waiting for a
        revisit due by ``revisits_due_by`` (for the DNS service)."""
        queue = self.site_queue()
        try:
            return list(dict.fromkeys([*queue.origins(), *queue.revisits_due(revisits_due_by)]))
        finally:
            queue.close()

    # -- what depends on the backend (see Stores)

    embedded: EmbeddedStores | None = None

    @property
    def cluster(self) -> SharedStores | None:
        return self

    def site_queues(self) -> Iterator[tuple[int | None, SiteQueueStore]]:
        yield None, self.site_queue()

    def site_queue_of(self, origin: str) -> int:
        """The one shared queue (claims are made for a process, not by ownership)."""
        return 0

    @property
    def site_queue_count(self) -> int:
        return 1

    def queue_name_rule(self) -> QueueNames | None:
        """None: a crawl queue is rows in the database (``PgCrawlQueues.unfit``)."""
        return None

    @property
    def status_location(self) -> str:
        return "the shared store"

    def local_status(self) -> StatusStore | None:
        """``state/crawl-<p>.json`` on this machine (``archiver status`` reads it while the
        database is away)."""
        from archiver.store.status import StatusFiles
        return StatusFiles(self.root)

    def warc_store(self) -> ObjectStore:
        return self.objects()

    def shared_objects(self) -> ObjectStore | None:
        return self.objects()

    def unshipped(self) -> UnshippedCaptures | None:
        from archiver.store.postgres.crawlers import UnshippedCaptures
        return UnshippedCaptures(self.url, watch=self.watch)


class StoreUnavailable(Exception):
    """The config names stores this version cannot open."""


def check_stores(config: Config) -> None:
    """StoreUnavailable, saying what to change, if ``config`` names a combination of stores that
    cannot work."""
    if config.warc.store.startswith("s3:") and database_url(config.store.url) is None:
        raise StoreUnavailable(
            f"{config.path}: warc.store: object storage needs the shared state in PostgreSQL "
            "(store.url = \"postgresql://...\"): the catalog must learn when each bundle is shipped")


def open_stores(config: Config, *, wait: bool = False) -> Stores:
    """The stores ``config`` names: embedded (the default), or shared (PostgreSQL + object store;
    ``wait``: their calls wait for a database that went away, see ``SharedStores``)."""
    check_stores(config)
    url = database_url(config.store.url)
    if url is None:
        return EmbeddedStores(config)
    return SharedStores(config, url, wait=wait)


def open_embedded(config: Config) -> EmbeddedStores:
    """The embedded stores of ``config``; StoreUnavailable if it names shared ones."""
    if database_url(config.store.url) is not None:
        raise StoreUnavailable(f"{config.path}: store.url is not \"sqlite\": not an embedded archive")
    return EmbeddedStores(config)


def open_shared(config: Config, *, wait: bool = False) -> SharedStores:
    """The shared stores of ``config``; StoreUnavailable if it names embedded ones."""
    check_stores(config)
    url = database_url(config.store.url)
    if url is None:
        raise StoreUnavailable(f"{config.path}: store.url is \"sqlite\": no shared stores")
    return SharedStores(config, url, wait=wait)
