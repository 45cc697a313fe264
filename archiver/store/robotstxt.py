"""robots.txt over time, from the archive's own records (``archiver robots HOST``).

Every robots.txt fetch is a capture (archiver.crawl.visit): its history is the catalog's captures
of ``<origin>/robots.txt`` (every scheme of the host, which the SURT key folds together), each
with the text it held: a response's payload, a revisit's original's. A redirect is followed
through the captures of its target (at most five hops, as RFC 9309 asks of a crawler). The
robots.txt that governed the host at a date is the last capture at or before it: the rules a
visit started then obeyed (RFC 9309: 4xx allows everything, 5xx or no answer disallows it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice

from archiver.store.interfaces import CatalogStore, WarcReader
from archiver.store.models import Capture
from archiver.store.originals import original_of
from archiver.store.warcindex import WarcError
from archiver.web.robots import MAX_ROBOTS_BYTES

MAX_REDIRECTS = 5


@dataclass(frozen=True)
class RobotsCapture:
    """One capture of a host's robots.txt: where it came from and what it said."""

    capture: Capture  # the capture of /robots.txt (a redirect's first hop)
    status: int | None  # the final answer's status, after redirects
    text: bytes  # the final answer's payload ("" for none)
    via: tuple[str, ...]  # the URLs redirected through, if any
    changed: bool  # differs (status or text) from the capture before it

    def to_json(self, *, text: bool) -> dict[str, object]:
        """For ``archiver robots --json`` and replay's JSON: the capture, and with ``text`` what
        it said."""
        out: dict[str, object] = {
            "timestamp": self.capture.timestamp, "url": self.capture.url, "status": self.status,
            "via": list(self.via), "meaning": self.meaning(), "digest": self.capture.digest,
            "record": f"{self.capture.filename}:{self.capture.offset}"}
        if text:
            out["text"] = self.text.decode("utf-8", errors="replace")
        return out

    def meaning(self) -> str:
        """What the rules were, in RFC 9309's words."""
        if self.status is None:
            return "no answer: everything disallowed"
        if 200 <= self.status < 300:
            return "rules below"
        if 400 <= self.status < 500:
            return f"{self.status}: everything allowed"
        if self.status >= 500:
            return f"{self.status}: everything disallowed"
        return f"{self.status}: too many redirects, everything allowed"


def history(catalog: CatalogStore, warcs: WarcReader, origin: str,
            rows: Callable[[Iterable[Capture]], Iterable[Capture]] = iter) -> list[RobotsCapture]:
    """Every capture of ``origin``'s robots.txt in time order, each marked changed or not.
    ``rows`` sees every row read of its captures (replay's listing limits). Each payload is read
    once (a daily revisit of an unchanged robots.txt for years reads one record, not thousands)."""
    out: list[RobotsCapture] = []
    payloads = _Payloads(catalog, warcs, rows)
    for capture in rows(catalog.captures(origin + "/robots.txt")):
        status, text, via = _final(catalog, payloads, capture)
        before = out[-1] if out else None
        changed = before is None or (before.status, before.text) != (status, text)
        out.append(RobotsCapture(capture, status, text, via, changed))
    return out


def in_force(catalog: CatalogStore, warcs: WarcReader, origin: str, at: str) -> RobotsCapture | None:
    """What :func:`governing` finds in the :func:`history` of ``origin``, read alone: the last
    capture at or before the 14-digit ``at`` and the one before it (a walk's first two rows)."""
    payloads = _Payloads(catalog, warcs, iter)
    latest = list(islice(catalog.walk(origin + "/robots.txt", at, forward=False), 2))
    if not latest:
        return None
    status, text, via = _final(catalog, payloads, latest[0])
    before = _final(catalog, payloads, latest[1])[:2] if len(latest) == 2 else None
    return RobotsCapture(latest[0], status, text, via, changed=before != (status, text))


def governing(found: list[RobotsCapture], at: str) -> RobotsCapture | None:
    """The capture in force at the 14-digit timestamp ``at``: the last at or before it."""
    earlier = [r for r in found if r.capture.timestamp <= at]
    return earlier[-1] if earlier else None


def _final(catalog: CatalogStore, payloads: _Payloads, capture: Capture
           ) -> tuple[int | None, bytes, tuple[str, ...]]:
    """The status and payload a robots.txt capture ends in, redirects followed through their
    targets' captures nearest in time, and the URLs passed through."""
    via: list[str] = []
    for _ in range(MAX_REDIRECTS + 1):
        if capture.redirect is None or not 300 <= (capture.status or 0) < 400:
            return capture.status, payloads.of(capture), tuple(via)
        via.append(capture.redirect)
        target = catalog.closest(capture.redirect, capture.timestamp)
        if target is None:
            return None, b"", tuple(via)
        capture = target
    return capture.status, b"", tuple(via)


class _Payloads:
    """The payloads of robots.txt captures, each read once (by payload digest); a revisit's is
    its original's (``catalog.original_of``, from the dates its record refers to)."""

    def __init__(self, catalog: CatalogStore, warcs: WarcReader,
                 rows: Callable[[Iterable[Capture]], Iterable[Capture]]) -> None:
        self.catalog = catalog
        self.warcs = warcs
        self.rows = rows
        self.read: dict[str, bytes] = {}  # payload digest -> payload

    def of(self, capture: Capture) -> bytes:
        known = capture.digest not in ("", "-")  # "-": an entry that names no payload digest
        if known and capture.digest in self.read:
            return self.read[capture.digest]
        try:
            payload = self._read(capture)
        except WarcError:
            payload = b""
        if known:
            self.read[capture.digest] = payload
        return payload

    def _read(self, capture: Capture) -> bytes:
        with self.warcs.open(capture.filename, capture.offset, capture.length) as record:
            if capture.rectype != "revisit":  # as much as a crawler reads (RFC 9309), never more
                return record.read(MAX_ROBOTS_BYTES)
            headers = record.warc_headers
        original = original_of(self.catalog, capture, headers, self.rows)  # a row or two
        return b"" if original is None else self._read(original)
