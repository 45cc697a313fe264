"""The response a revisit stands for, found through any catalog (``CatalogStore``): for replay,
export and the crawler's deduplication alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import takewhile
from typing import TYPE_CHECKING

from archiver.store.models import Capture
from archiver.web.timestamps import parse_date

if TYPE_CHECKING:
    from archiver.store.interfaces import CatalogStore


def payload_holder(captures: Iterable[Capture], digest: str) -> Capture | None:
    """The latest response with payload ``digest`` among a URL's ``captures`` (oldest first): the
    capture a revisit with that digest stands for; None if the payload is not among them."""
    found = None
    for capture in captures:
        if capture.rectype == "response" and capture.digest == digest:
            found = capture
    return found


def original_of(catalog: CatalogStore, revisit: Capture, warc_headers: list[tuple[str, str]],
                rows: Callable[[Iterable[Capture]], Iterable[Capture]] = iter) -> Capture | None:
    """The response a revisit record stands for: the capture of its WARC-Refers-To-Target-URI at
    its WARC-Refers-To-Date with the same payload digest (WARC 1.1 section 6.7.2); without those
    headers, or when that capture is not catalogued, the latest response of its own URL up to it
    with that digest. Read by walks back in time from those dates, to the first match, so no
    more than the captures in between are read. ``rows`` sees every row read (replay's listing
    limits); None if the payload is not in the catalog."""
    headers = {name.lower(): value for name, value in warc_headers}
    target, date = headers.get("warc-refers-to-target-uri"), headers.get("warc-refers-to-date")

    def holder(found: Iterable[Capture]) -> Capture | None:
        return next((c for c in found if c.rectype == "response" and c.digest == revisit.digest), None)

    if target and date:
        try:
            at = parse_date(date)
        except ValueError:
            at = ""
        if at and (found := holder(takewhile(lambda c: c.timestamp == at,
                                             rows(catalog.walk(target, at, forward=False))))):
            return found
    return holder(rows(catalog.walk(revisit.url, revisit.timestamp, forward=False)))
