"""Building the full-text index from the catalog, incrementally (``archiver search index``).

Every run reads the whole catalog (``CatalogStore.iter_all``) and takes the entries the index
has not taken yet (``FullTextStore.seen``, by WARC file and offset), a batch at a time, each
batch one transaction of the index. What it takes:

- an HTML response (``text/html`` or ``application/xhtml+xml``) with status 200: its text is
  extracted from its WARC record (``web.pagetext.response_text``), unless the index already
  holds the text of that payload (same URL and digest: the capture joins that document; another
  URL: the text is copied, as the same bytes give the same text);
- a revisit record (status 200, or a 304 answering a conditional request): it stands for an
  earlier response with its payload digest, so it joins that document without any extraction.
  A revisit of another URL's payload (``crawl.dedupe = "digest"``) waits for the end of the run,
  when every response of the catalog has been taken; a revisit of a page with no text (an image)
  is then taken without one.

A capture that is not content (``Capture.is_content``: a gatekeeper's answer, a login's
exchange, one made after a session was lost) is never taken: search finds no challenge page's
text. A page with no text is taken without one, and not looked at again. A record that cannot be
read (``WarcError``: a damaged or missing bundle) costs that record: counted, reported through
``broken`` and left for the next run; any other failure (a store unreachable) ends the run, and
what the earlier batches took stays taken. A second run with nothing new reads the catalog and
extracts nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from archiver.store.interfaces import CatalogStore, FullTextStore, WarcReader
from archiver.store.models import Capture, DocumentKey, IndexedCapture
from archiver.store.warcindex import WarcError
from archiver.web.pagelinks import HTML_TYPES
from archiver.web.pagetext import MAX_DECODED, PageText, response_text

# Captures per transaction of the index.
BATCH = 200


@dataclass
class IndexTotals:
    """What one run did: catalog entries read, captures taken (with text, without), pages
    whose text was extracted or copied from the same payload, records that could not be read."""

    examined: int = 0
    taken: int = 0
    without_text: int = 0
    extracted: int = 0
    copied: int = 0
    broken: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def line(self) -> str:
        """The summary as one line."""
        rate = self.extracted / max(self.seconds, 1e-6)
        return (f"{self.examined} catalog entries read; {self.taken} captures taken with their text, "
                f"{self.without_text} without (no text, or not HTML); {self.extracted} pages extracted "
                f"({rate:.0f} pages/s), {self.copied} texts copied from the same payload; "
                f"{self.broken} unreadable records (tried again next run); {self.seconds:.1f} s")


def indexable(capture: Capture) -> bool:
    """Whether the index takes this catalog entry: an HTML 200 response, or a revisit (200, or
    a 304) of a payload that may be one; never a capture that is not content (a challenge page's
    text is no page's)."""
    if not capture.is_content:
        return False
    if capture.rectype == "revisit":
        return capture.status in (200, 304)
    return capture.status == 200 and capture.mime.lower() in HTML_TYPES


def build_index(catalog: CatalogStore, warcs: WarcReader, fulltext: FullTextStore, *,
                progress: Callable[[IndexTotals], None] | None = None,
                broken: Callable[[Capture, WarcError], None] | None = None,
                batch: int = BATCH) -> IndexTotals:
    """Take every catalog entry the index lacks (see the module docstring); the totals.
    ``progress`` is called after each batch, ``broken`` for each record that cannot be read."""
    totals = IndexTotals()
    run = _Run(warcs, fulltext, totals, broken)
    waiting: list[Capture] = []
    pending: list[Capture] = []
    for capture in catalog.iter_all():
        totals.examined += 1
        if indexable(capture):
            pending.append(capture)
        if len(pending) >= batch:
            waiting += run.take(pending, last=False)
            pending = []
            if progress:
                progress(totals)
    waiting += run.take(pending, last=False)
    for start in range(0, len(waiting), batch):
        run.take(waiting[start : start + batch], last=True)
    return totals


class _Run:
    """One run's handles and totals."""

    def __init__(self, warcs: WarcReader, fulltext: FullTextStore, totals: IndexTotals,
                 broken: Callable[[Capture, WarcError], None] | None) -> None:
        self.warcs = warcs
        self.fulltext = fulltext
        self.totals = totals
        self.broken = broken

    def take(self, captures: Iterable[Capture], *, last: bool) -> list[Capture]:
        """Take the captures the index lacks, in one transaction; the revisits whose page is not
        indexed yet, if not ``last`` (then they are taken without text)."""
        listed = list(captures)
        seen = self.fulltext.seen((c.filename, c.offset) for c in listed)
        new = [c for c in listed if (c.filename, c.offset) not in seen]
        known = self.fulltext.documents({(c.url, c.digest) for c in new})
        documents: dict[DocumentKey, PageText] = {}
        texts: dict[str, PageText] = {}  # the new documents' texts, by payload digest
        textless: set[DocumentKey] = set()
        taken: list[IndexedCapture] = []
        waiting: list[Capture] = []
        for capture in new:
            key = (capture.url, capture.digest)
            if key not in known and key not in documents:
                try:
                    text = None if key in textless else self._text(capture, texts)
                except WarcError as e:
                    self.totals.broken += 1
                    if self.broken:
                        self.broken(capture, e)
                    continue
                if text is None and capture.rectype == "revisit" and not last:
                    waiting.append(capture)
                    continue
                if text is None:
                    textless.add(key)
                    taken.append(IndexedCapture(capture.filename, capture.offset, capture.timestamp, None))
                    self.totals.without_text += 1
                    continue
                documents[key] = texts[capture.digest] = text
            taken.append(IndexedCapture(capture.filename, capture.offset, capture.timestamp, key))
            self.totals.taken += 1
        self.fulltext.add(documents, taken)
        return waiting

    def _text(self, capture: Capture, texts: dict[str, PageText]) -> PageText | None:
        """The text of a capture's payload: copied from another URL's document with that payload
        (new in this batch, ``texts``, or in the index), else extracted from its record if it is a
        response; None if it has none. WarcError if the record cannot be read."""
        text = texts.get(capture.digest) or self.fulltext.text_of(capture.digest)
        if text is not None:
            self.totals.copied += 1
            return text
        if capture.rectype != "response":
            return None
        # The text is taken from the first MAX_DECODED bytes decoded: as many stored bytes hold
        # them (a content coding shrinks), never a huge payload whole.
        with self.warcs.open(capture.filename, capture.offset, capture.length) as record:
            self.totals.extracted += 1
            return response_text(record.http_head, record.read(MAX_DECODED))
