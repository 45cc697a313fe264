"""The capture road: what a fetch becomes in the archive, whichever fetcher made it.

    fetch (archiver.crawl.http) ─> Record: a response, or a revisit of an earlier capture
      ─> CaptureSink.write: its WARC records in the bundle (response or revisit, then its labels)
           and its catalog entry, pending
      ─> CaptureSink.commit, once the group commit has made the records durable
           (CrawlContext.make_durable): the catalog, or in a cluster the entries that wait for
           their bundle to be shipped (archiver.crawl.cluster)

A fetcher hands every exchange it archives to the one sink of its process, given to the
CrawlContext when it is built; the site visit then routes the response's links
(archiver.crawl.routing). The sink never decides what to fetch or whether an answer is new: the
visit and archiver.crawl.history do.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from archiver.browser.render import Rendering
from archiver.crawl import bodies
from archiver.crawl.bodies import BodyWork
from archiver.crawl.http import FetchResult
from archiver.crawl.stats import Stats
from archiver.logs import event
from archiver.store.bundles import BundleWriter, Written
from archiver.store.models import Capture
from archiver.store.warcindex import capture_fields
from archiver.web.timestamps import to_datetime

log = logging.getLogger("archiver.crawl.capture")

# The labels of a response record just written (the plugins' on_capture), given where it went.
Labeller = Callable[["Record", Written], Mapping[str, str]]


@dataclass(frozen=True)
class Record:
    """One answered fetch as it goes into the archive: a response record, or (``original`` set) a
    revisit record standing for the payload of that earlier response."""

    exchange: FetchResult  # status set: an answer was received
    original: Capture | None = None
    not_modified: bool = False  # a revisit because the server answered 304 to our conditions
    saved: int = 0  # payload bytes the revisit spares the WARC files

    @property
    def date(self) -> datetime:
        """The record's WARC-Date: when the fetch started."""
        return datetime.fromtimestamp(self.exchange.started, UTC)


class CaptureSink:
    """Writes each record to the process's WARC bundle and keeps its catalog entry until the
    records are durable; ``commit`` (the catalog's ``add``, or a cluster's ``record``) takes them
    then, in the group commit's worker thread."""

    def __init__(self, bundle: BundleWriter, commit: Callable[[list[Capture]], object], *,
                 bodies: BodyWork, stats: Stats) -> None:
        self.bundle = bundle
        self._commit = commit
        self._bodies = bodies
        self._stats = stats
        self._pending: list[Capture] = []  # written, not yet durable

    async def write(self, record: Record, *, origin: str, labeller: Labeller | None = None
                    ) -> Written:
        """Write ``record`` (a large body packed in a worker thread); a response's labels
        (``labeller``) go in a metadata record right after it and in its catalog entry."""
        result, date = record.exchange, record.date
        labels: Mapping[str, str] = {}
        if record.original is None:
            pack = functools.partial(
                self.bundle.pack_exchange, url=result.url, ip=result.ip, date=date,
                request=result.request, response_head=result.head, response_body=result.body,
                truncated=result.truncated)
            # Written in one step with its labels record, which must follow it in the bundle.
            large = len(result.body) > bodies.LARGE
            written = self.bundle.write_packed(await self._bodies.run(pack) if large else pack())
            if labeller is not None and (labels := labeller(record, written)):
                self.bundle.write_labels(url=result.url, date=date, refers_to=written.record_id,
                                         labels=labels)
        else:
            original = record.original
            self._stats.revisits += 1
            self._stats.not_modified += record.not_modified
            self._stats.bytes_saved += record.saved
            written = self.bundle.write_revisit(
                url=result.url, ip=result.ip, date=date, request=result.request,
                response_head=result.head, payload_digest=original.digest,
                refers_to_url=original.url, refers_to_date=to_datetime(original.timestamp),
                not_modified=record.not_modified)
        self._add_entry(record, written, labels, origin)
        return written

    def write_rendering(self, url: str, rendering: Rendering, *, refers_to: Written, date: datetime,
                        origin: str) -> None:
        """The records of a page's render (archiver.crawl.rendering), after its response
        ``refers_to`` and dated as it is (replay pairs them by date): its screenshot
        (``urn:screenshot:<url>``) and its rendered text (``urn:text:<url>``), each a resource
        record (the page's own entry has the label ``rendered``: ``reason``)."""
        for kind, content_type, payload in (
                ("screenshot", rendering.screenshot_type, rendering.screenshot),
                ("text", "text/plain; charset=utf-8", rendering.text.encode("utf-8", "replace"))):
            name = f"urn:{kind}:{url}"
            written = self.bundle.write_resource(url=name, date=date, refers_to=refers_to.record_id,
                                                 content_type=content_type, payload=payload)
            # As `catalog reindex` makes it: a resource record's status is 200.
            self._entry(name, date, 200, content_type, None, written, "resource", {}, origin)

    def _add_entry(self, record: Record, written: Written, labels: Mapping[str, str],
                   origin: str) -> None:
        result = record.exchange
        self._entry(result.url, record.date, result.status, result.header("content-type"),
                    result.header("location"), written,
                    "response" if record.original is None else "revisit", labels, origin)

    def _entry(self, url: str, date: datetime, status: int | None, content_type: str | None,
               location: str | None, written: Written, rectype: str, labels: Mapping[str, str],
               origin: str) -> None:
        """The catalog entry of a record just written, pending until it is durable."""
        try:
            self._pending.append(capture_fields(
                url=url, date=date, status=status, content_type=content_type, location=location,
                digest=written.payload_digest, filename=written.response.filename,
                offset=written.response.offset, length=written.response.length,
                rectype=rectype, labels=labels))
        except ValueError as e:  # the record is written; `catalog verify` will list it
            self._stats.errors["catalog"] += 1
            event(log, logging.WARNING, "catalog-entry-failed", site=origin, url=url,
                  error=str(e))

    def take(self) -> list[Capture]:
        """The entries written so far, for a group commit (``put_back`` if it fails)."""
        taken, self._pending = self._pending, []
        return taken

    def put_back(self, entries: list[Capture]) -> None:
        """Entries a group commit could not commit: the next one does (adding twice is harmless)."""
        self._pending[:0] = entries

    def commit(self, entries: list[Capture]) -> None:
        """In the group commit's worker thread, once the records of ``entries`` are durable."""
        started = time.monotonic()
        self._commit(entries)
        took_ms = (time.monotonic() - started) * 1000
        self._stats.catalog_batch_max_ms = max(self._stats.catalog_batch_max_ms, took_ms)
