"""What the archive already holds of a URL decides how it is asked for and how its answer is
recorded (``crawl.dedupe``; README "Revisits").

Before a fetch, ``Dedupe.ask`` finds the response the URL's last capture stands for and the
conditional request headers of its payload (``If-None-Match``, ``If-Modified-Since``); after it,
``Dedupe.record`` makes the answer one ``Record`` (archiver.crawl.capture): a response, or a revisit
of that response when the server said not modified or sent the same payload again, or (with
"digest") of the first response holding the same payload under any URL. Every catalog or WARC read
is made in a worker thread (archiver.store.offloop).

A capture that is not the site's content (``Capture.is_content``: a gatekeeper's answer, a
login's exchange, one made after a session was lost) is not the URL's capture: a revisit neither
compares with it nor counts it in the URL's gone history. A walk passes over at most
``NOT_CONTENT_ROWS`` such captures; past them the URL is asked as if it had no capture yet.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field

from archiver.crawl import bodies
from archiver.crawl.bodies import BodyWork
from archiver.crawl.capture import Record
from archiver.crawl.http import FetchResult
from archiver.logs import event
from archiver.queues.revisits import look_back
from archiver.store.bundles import payload_digest
from archiver.store.interfaces import CatalogStore, WarcReader
from archiver.store.models import Capture, CatalogError, content_only
from archiver.store.objectstore import ObjectStoreError
from archiver.store.offloop import OffLoop
from archiver.store.originals import payload_holder
from archiver.store.warcindex import WarcError
from archiver.web.http import conditions as conditions_of
from archiver.web.http import content_length

log = logging.getLogger("archiver.crawl.dedupe")
# Captures that are not content a revisit's walk passes over at most (a site that answered a
# challenge at every visit costs that many rows per fetch, no more).
NOT_CONTENT_ROWS = 100


@dataclass(frozen=True)
class Asking:
    """What a fetch asks, given the URL's earlier captures."""

    base: Capture | None = None  # the response the last capture stands for (itself, or a
    # revisit's original)
    conditions: list[tuple[str, str]] = field(default_factory=list)
    base_size: int = 0  # its payload's size


@dataclass
class Dedupe:
    """The earlier captures a recrawl compares with, read from the catalog (``lookup``, read-only)
    and the archived records (``warcs``)."""

    lookup: CatalogStore
    warcs: WarcReader | None
    bodies: BodyWork
    calls: OffLoop = field(default_factory=OffLoop)

    async def earlier(self, url: str) -> list[Capture]:
        """The captures of ``url`` a revisit needs, oldest first (none if the catalog cannot
        say): the last ones up to its run of gone answers (queues.revisits.look_back), after the
        response the last one's payload stands for; content only (module docstring)."""

        def needed() -> list[Capture]:
            kept = look_back(content_only(self.lookup.walk(url, "9" * 14, forward=False),
                                         NOT_CONTENT_ROWS))  # latest first
            if not kept or payload_holder(kept, kept[-1].digest) is not None:
                return kept
            last = kept[-1]
            holder = self.lookup.payload_holder(url, last.digest, last.timestamp)
            return kept if holder is None or not holder.is_content else [holder, *kept]

        try:
            return await self.calls.call(needed)
        except (CatalogError, ValueError, sqlite3.Error):
            return []

    async def ask(self, earlier: list[Capture], *, dedupe: str, conditional: bool) -> Asking:
        """The response the last of ``earlier`` stands for and, if ``conditional``, the headers
        asking whether its payload changed since."""
        base = payload_holder(earlier, earlier[-1].digest) if earlier else None
        if base is None or not conditional or dedupe == "off":
            return Asking(base)
        conditions, size = await self._conditions(base)
        return Asking(base, conditions, size)

    async def record(self, result: FetchResult, asking: Asking, *, dedupe: str
                     ) -> tuple[Record, str]:
        """The answer ``result`` as a record, and its payload digest ("" when not needed)."""
        digest = ""
        base = asking.base
        if base is not None or dedupe == "digest":
            digest = (await self.bodies.run(payload_digest, result.body)
                      if len(result.body) > bodies.LARGE else payload_digest(result.body))
        # 304 to our conditions: the payload of ``base`` is current (a server-not-modified revisit).
        if result.status == 304 and base is not None and asking.conditions:
            return Record(result, base, not_modified=True, saved=asking.base_size), digest
        original = None if dedupe == "off" else _same_payload(base, digest, result)
        if original is None and dedupe == "digest" and result.status == 200 and result.body \
                and not result.truncated:
            original = await self._first_with_digest(digest)
        return Record(result, original, saved=len(result.body) if original else 0), digest

    async def _conditions(self, capture: Capture) -> tuple[list[tuple[str, str]], int]:
        """The conditional request headers for the payload of ``capture`` (a response), from its
        record's HTTP head (only the head is read), and the payload's size as far as the head
        says (else the record's); none if the record cannot be read (the fetch is then
        unconditional)."""
        if self.warcs is None:
            return [], 0
        try:
            head = await self.calls.call(self.warcs.read_head, capture.filename, capture.offset,
                                         capture.length)
        except (WarcError, OSError, ObjectStoreError) as e:  # (the object store away, say)
            event(log, logging.WARNING, "capture-unreadable", url=capture.url,
                  record=f"{capture.filename}:{capture.offset}", error=str(e))
            return [], 0
        return conditions_of(head), content_length(head) or capture.length

    async def _first_with_digest(self, digest: str) -> Capture | None:
        """The earliest response with payload ``digest`` in the catalog's digest index; None if
        there is none (or the catalog cannot say)."""
        try:
            return await self.calls.call(self.lookup.first_with_digest, digest)
        except (CatalogError, ValueError, sqlite3.Error) as e:
            event(log, logging.WARNING, "digest-lookup-failed", digest=digest, error=str(e))
            return None


def _same_payload(base: Capture | None, digest: str, result: FetchResult) -> Capture | None:
    """``base`` if this whole response (its payload ``digest``) repeats its payload (Heritrix's
    and wget's deduplication by digest)."""
    if base is None or not result.body or result.truncated or base.digest != digest:
        return None
    return base
