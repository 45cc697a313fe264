"""robots.txt over time, from the archive's own records (``archiver robots HOST``).

Every robots.txt fetch is a capture (archiver.crawl.visit): its history is the catalog's captures
of ``<origin>/robots.txt`` (every scheme of the host, which the SURT key folds together), each
with the text it held: a response's payload, a revisit's original's. A redirect is followed
through the captures of its target (at most five hops, as RFC 9309 asks of a crawler). The
robots.txt that governed the host at a date is the last capture at or before it: the rules a
visit started then obeyed (RFC 9309: 4xx allows everything, 5xx or no answer disallows it).
"""

from __future__ import annotations

from dataclasses import dataclass

from archiver.store.catalog import Capture, payload_holder
from archiver.store.interfaces import CatalogStore, WarcReader
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


def history(catalog: CatalogStore, warcs: WarcReader, origin: str) -> list[RobotsCapture]:
    """Every capture of ``origin``'s robots.txt in time order, each marked changed or not."""
    out: list[RobotsCapture] = []
    for capture in catalog.captures(origin + "/robots.txt"):
        status, text, via = _final(catalog, warcs, capture)
        before = out[-1] if out else None
        changed = before is None or (before.status, before.text) != (status, text)
        out.append(RobotsCapture(capture, status, text, via, changed))
    return out


def governing(found: list[RobotsCapture], at: str) -> RobotsCapture | None:
    """The capture in force at the 14-digit timestamp ``at``: the last at or before it."""
    earlier = [r for r in found if r.capture.timestamp <= at]
    return earlier[-1] if earlier else None


def _final(catalog: CatalogStore, warcs: WarcReader, capture: Capture
           ) -> tuple[int | None, bytes, tuple[str, ...]]:
    """The status and payload a robots.txt capture ends in, redirects followed through their
    targets' captures nearest in time, and the URLs passed through."""
    via: list[str] = []
    for _ in range(MAX_REDIRECTS + 1):
        if capture.redirect is None or not 300 <= (capture.status or 0) < 400:
            return capture.status, _payload(catalog, warcs, capture), tuple(via)
        via.append(capture.redirect)
        target = catalog.closest(capture.redirect, capture.timestamp)
        if target is None:
            return None, b"", tuple(via)
        capture = target
    return capture.status, b"", tuple(via)


def _payload(catalog: CatalogStore, warcs: WarcReader, capture: Capture) -> bytes:
    """A capture's payload: a revisit's is its original's, the URL's response with its digest."""
    if capture.rectype == "revisit":
        original = payload_holder(catalog.captures(capture.url, to=capture.timestamp),
                                  capture.digest)
        if original is None:
            return b""
        capture = original
    try:  # as much as a crawler reads of a robots.txt (RFC 9309), never a huge payload whole
        with warcs.open(capture.filename, capture.offset, capture.length) as record:
            return record.read(MAX_ROBOTS_BYTES)
    except WarcError:
        return b""
