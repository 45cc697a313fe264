"""What the replay service reads: the card catalog, the WARC bundles, the DNS history, the status files.

One :class:`ReplayArchive` is shared by every request (``request.app.state.archive``). Everything
comes from ``open_stores`` and is opened read-only: in the embedded mode the WARC folder and the
SQLite files, in the shared mode the object store (records by byte range) and PostgreSQL. Nothing
a request names can reach a file outside the WARC folder or an object outside the bundles (both
readers refuse names with a path in them). Records are opened in a worker thread, as a read from
an object store is a network round trip, and their payloads read a piece at a time, never whole
(a payload may be gigabytes). The catalog is reached through
:attr:`ReplayArchive.scanner` (archiver.replay.scan), which keeps listings off the event loop and
within the service's limits. With the shared stores, a URL captured in a bundle its crawler has
not shipped yet is ``unshipped``: in the archive, but not servable until the object store has it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import trio

from archiver.config import Config
from archiver.logs import event
from archiver.replay.scan import Scan, Scanner
from archiver.replay.why import Answer, explain, gather
from archiver.replay.workers import Workers
from archiver.store.catalogkeys import rendering_of, surt_key
from archiver.store.interfaces import DnsHistoryStore
from archiver.store.models import Capture
from archiver.store.originals import original_of
from archiver.store.warcindex import OpenRecord
from archiver.stores import open_stores
from archiver.web.timestamps import from_datetime

if TYPE_CHECKING:  # psycopg: only the shared stores load it
    from archiver.store.postgres.crawlers import UnshippedCaptures

log = logging.getLogger("archiver.replay.archive")


class ReplayArchive:
    """Read-only handles on one archive root."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.stores = open_stores(config)
        self.warcs = self.stores.warcs()
        self.status = self.stores.status()
        self.catalog = self.stores.catalog(readonly=True)
        limits = config.replay
        self.scanner = Scanner(
            self.catalog,
            slice_rows=limits.scan_slice_rows,
            max_rows=limits.scan_max_rows,
            deadline=limits.scan_deadline,
            listings=limits.scan_listings,
        )
        self._dns: DnsHistoryStore | None = None
        self._unshipped: UnshippedCaptures | None = self.stores.unshipped()
        # CPU-heavy work, bounded (archiver.replay.workers): rewriting in worker processes,
        # full-text searches in worker threads (SQLite leaves the GIL while it searches).
        self.rewriting = Workers("rewrites", workers=limits.rewrite_workers, waiting=limits.max_waiting,
                                 processes=True)
        self.searching = Workers("searches", workers=limits.search_workers, waiting=limits.max_waiting)

    async def record(self, capture: Capture) -> OpenRecord:
        """The WARC record a catalog entry points at, opened: its heads read, its payload read
        as it is asked for (WarcError if it is not there). Close it."""
        return await trio.to_thread.run_sync(self.warcs.open, capture.filename, capture.offset,
                                             capture.length)

    async def original(self, revisit: Capture, stored: OpenRecord) -> tuple[Capture, OpenRecord] | None:
        """The response a revisit record stands for, with its record; None if it is not archived.

        See :func:`archiver.store.originals.original_of`; the catalog is read as a lookup.
        """
        def referred(scan: Scan) -> Capture | None:
            return original_of(scan.catalog, revisit, stored.warc_headers, scan.rows)

        try:
            found = await self.scanner.look_up(referred)
        except ValueError:
            return None
        return None if found is None else (found, await self.record(found))

    async def why(self, url: str) -> Answer | None:
        """Why ``url`` has no capture (archiver.replay.why), as of now; None if the records
        cannot say (a store unreachable, a listing past its limits) or ``url`` is a page's
        rendering (``urn:screenshot:<url>``: the crawler decides and logs of pages alone)."""
        if rendering_of(url) is not None:
            return None
        at = from_datetime(datetime.now(UTC))

        def answer(scan: Scan) -> Answer:
            return explain(gather(self.stores, scan.catalog, self.warcs, self.config, url, at))

        try:
            return await self.scanner.collect(answer)
        except Exception as e:  # the page still says "not in the archive"
            event(log, logging.WARNING, "why-failed", url=url, error=repr(e))
            return None

    async def unshipped(self, url: str) -> bool:
        """Whether ``url`` has a capture in a bundle not in the object store yet (its crawler has
        not shipped it: the bundle is open, or the store away), looked up in a worker thread."""
        if self._unshipped is None:
            return False
        try:
            key = surt_key(url)
        except ValueError:  # a URL the catalog cannot key: no capture of it waits either
            return False
        return await trio.to_thread.run_sync(self._unshipped.has, key)

    def dns(self) -> DnsHistoryStore | None:
        """The DNS history, or None while no crawl or DNS service has made one."""
        if self._dns is None:
            try:
                self._dns = self.stores.dns_history(readonly=True)
            except FileNotFoundError:
                return None
        return self._dns

    async def statuses(self) -> list[dict[str, Any]]:
        """The last status each crawler process wrote (``<root>/state/crawl-N.json``, or table
        crawlers with the shared stores), read in a worker thread."""
        return await trio.to_thread.run_sync(self.status.read_all)

    def close(self) -> None:
        self.rewriting.close()
        self.catalog.close()
        self.status.close()
        if self._unshipped is not None:
            self._unshipped.close()
        if self._dns is not None:
            self._dns.close()
            self._dns = None
