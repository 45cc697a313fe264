"""What replay reads of one URL's captures, by index seeks, in memory bounded by what it answers.

A URL may have a million captures: a memento, a TimeGate, a TimeMap page and a calendar each
read what they show and no more, whatever the count. Each function here runs as a listing
(archiver.replay.scan: a worker thread, the catalog through ``scan.catalog``, every row read
through ``scan.rows`` or ``scan.counted``) and reads the catalog by its walks, bounded counts and
span counts (``CatalogStore.walk``, ``count_captures``, ``span_counts``):

- :func:`served`: the capture replay serves for a URL at a date: the closest one, skipping
  redirects to the URL itself (``http://x/`` -> ``https://x/`` or ``/dir`` -> ``/dir/`` under one
  SURT key, which replayed for that URL would loop, as pywb skips them): a walk each way from the
  date, to the first capture that is not one (a row or two, as such redirects alternate with
  their targets).
- :func:`fuzzy`: the capture a fuzzy rule (archiver.web.fuzzy) maps a URL with no capture of
  its own to: a prefix listing of the URL's stem, at most ``FUZZY_ROWS`` rows.
- :func:`around`: what a memento's Link header and banner name: the seconds before and after its
  own (one seek each), the first and last captures (one seek each, or none at either end), and
  for the banner a count of the content among the first ``COUNTED`` + 1 captures ("10000+"
  past it).
- :func:`timemap_page`: ``size`` distinct capture seconds from a date on, and where the pages
  before and after it start: at most twice the page's rows.
- :func:`calendar`: a URL's calendar (archiver.replay.calendar) from counts per year and per day
  of one year (counted by the database, a chunk at a time) and a page of captures.
- :func:`screenshots`: which of a page of captures have a screenshot of their own second (the
  crawler's ``urn:screenshot:<url>`` record of a rendered page): one query of the screenshots'
  key over the page's span of time, at most ``SCREENSHOT_ROWS`` per capture.

Only content is shown (``Capture.is_content``, docs/gatekeepers.md): a capture labelled as a
gatekeeper's answer, a login's exchange or made after a session was lost is never served as a page
or an embed, named as a neighbour, listed in a TimeMap or a calendar, nor taken by a fuzzy rule;
the nearest content capture stands in. A lookup's walk passes over at most ``NOT_CONTENT_ROWS``
of them each way (past them that side has no capture), so a URL with thousands of challenge
captures costs a bounded read per request; a listing (TimeMap, calendar) passes over any number,
within its row cap. ``/cdx`` lists every capture, with its labels. The banner's count and the
calendar's counts per year and day count content only (the catalog's counts do).

Rows of one second beyond the first (the same capture read from two WARCs, say) are walked
through, so a URL with very many captures in one second costs rows, never memory, and stops at
the listing's row cap.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

from archiver.replay.calendar import CaptureTally, day_of, tally_captures
from archiver.replay.scan import Scan
from archiver.store.catalogkeys import SCREENSHOT, rendering_of
from archiver.store.models import Capture, content_only
from archiver.web.fuzzy import FuzzyRule, match_key, stem
from archiver.web.timestamps import stamp_after, stamp_before, to_datetime

# A banner's count of captures stops here: past it, the banner says "10000+".
COUNTED = 10_000
# Rows a fuzzy lookup examines at most: the captures listed under the asked URL's stem (the same
# path with other queries), in key order; past them it picks among those it has read.
FUZZY_ROWS = 1000
# Screenshot rows read per capture listed at most (one each, and room for a second's repeats).
SCREENSHOT_ROWS = 2
# Captures that are not content a lookup's walk passes over at most, each way.
NOT_CONTENT_ROWS = 100
_EARLIEST = "0" * 14
_LATEST = "9" * 14


def self_redirect(capture: Capture, url: str) -> bool:
    """A redirect to ``url`` itself, as ``http://x/`` -> ``https://x/`` or ``/dir`` -> ``/dir/``
    under one SURT key: replaying it for ``url`` would loop (pywb skips these too)."""
    return capture.redirect is not None and capture.redirect == url


def _walk(scan: Scan, url: str, at: str, *, forward: bool) -> Iterator[Capture]:
    """The content captures of ``url`` from ``at`` on, nearest first (a lookup's: at most
    NOT_CONTENT_ROWS others passed over)."""
    return content_only(scan.rows(scan.catalog.walk(url, at, forward=forward)), NOT_CONTENT_ROWS)


def _listed(scan: Scan, url: str, at: str, *, forward: bool) -> Iterator[Capture]:
    """The content captures of ``url`` from ``at`` on, nearest first (a listing's: any number of
    others passed over, within the listing's row cap)."""
    return content_only(scan.rows(scan.catalog.walk(url, at, forward=forward)))


def _one(scan: Scan, url: str, at: str | None, *, forward: bool) -> Capture | None:
    """The first content capture of a walk from ``at`` (None: nothing that side)."""
    return None if at is None else next(_walk(scan, url, at, forward=forward), None)


def served(scan: Scan, url: str, at: str) -> Capture | None:
    """The capture of ``url`` nearest to the 14-digit ``at`` that is not a redirect to ``url``
    itself; of two as near, the earlier, and of one second's captures the last (in file and
    offset order), as ``CatalogStore.closest`` picks. None if there is none. ValueError if ``at``
    is no date or ``url`` has no host."""
    target = to_datetime(at)
    before = next((c for c in _walk(scan, url, at, forward=False) if not self_redirect(c, url)), None)
    if before is not None and before.timestamp == at:
        return before
    after = next((c for c in _walk(scan, url, at, forward=True) if not self_redirect(c, url)), None)
    if before is None or after is None:
        return before or after
    earlier_gap = target - to_datetime(before.timestamp)
    return before if earlier_gap <= to_datetime(after.timestamp) - target else after


def latest(scan: Scan, url: str) -> Capture | None:
    """The latest content capture of ``url`` (a walk back from the end), None if none."""
    return _one(scan, url, _LATEST, forward=False)


def _closer(at: str, one: Capture | None, other: Capture) -> Capture:
    """Of ``one`` and ``other``, the capture nearer to ``at``; of two as near, the earlier."""
    if one is None:
        return other
    target = to_datetime(at)
    gaps = [abs(to_datetime(c.timestamp) - target) for c in (one, other)]
    if gaps[0] != gaps[1]:
        return one if gaps[0] < gaps[1] else other
    return one if one.timestamp <= other.timestamp else other


def fuzzy(scan: Scan, url: str, at: str, rules: tuple[FuzzyRule, ...]) -> tuple[Capture, str] | None:
    """The capture a fuzzy rule maps ``url`` to, nearest to the 14-digit ``at``, and the rule's
    name: of the rules that apply to ``url``, the first under which some capture listed under its
    stem matches it (at most FUZZY_ROWS rows read, redirects to ``url`` itself skipped). None if
    no rule matches. ValueError if ``url`` has no host."""
    keys = [(rule, key) for rule in rules if (key := match_key(rule, url)) is not None]
    if not keys:
        return None
    best: list[Capture | None] = [None] * len(keys)
    for capture in scan.rows(scan.catalog.list(stem(url), "prefix", limit=FUZZY_ROWS)):
        if self_redirect(capture, url) or not capture.is_content:
            continue
        for index, (rule, key) in enumerate(keys):
            if match_key(rule, capture.url) == key:
                best[index] = _closer(at, best[index], capture)
                break
    return next(((c, keys[i][0].name) for i, c in enumerate(best) if c is not None), None)


@dataclass(frozen=True)
class Around:
    """What a memento's Link header and banner name besides the capture itself: the seconds
    before and after its own (None at either end), those of the first and last captures, and how
    many captures there are, counted up to COUNTED (None when not asked for; ``more`` when there
    are more)."""

    prev: str | None
    next: str | None
    first: str
    last: str
    count: int | None = None
    more: bool = False


def around(scan: Scan, url: str, capture: Capture, *, count: bool) -> Around:
    """The neighbours of ``capture`` among the content captures of ``url``, by at most four
    walks (a seek each, past at most NOT_CONTENT_ROWS others); with ``count``, the number of
    content among the first COUNTED + 1 captures (a read of at most that many rows)."""
    second = capture.timestamp
    prev = _one(scan, url, stamp_before(second), forward=False)
    after = _one(scan, url, stamp_after(second), forward=True)
    first = _one(scan, url, _EARLIEST, forward=True) if prev is not None else capture
    last = _one(scan, url, _LATEST, forward=False) if after is not None else capture
    counted = None
    if count:
        counted = scan.catalog.count_captures(url, at_most=COUNTED + 1)
        scan.examine(counted)
    return Around(
        prev=None if prev is None else prev.timestamp,
        next=None if after is None else after.timestamp,
        first=(first or capture).timestamp,
        last=(last or capture).timestamp,
        count=None if counted is None else min(counted, COUNTED),
        more=counted is not None and counted > COUNTED,
    )


@dataclass(frozen=True)
class TimeMapPage:
    """A page of a URL's TimeMap: its distinct capture seconds in time order; where the page
    before starts and ends (None when this is the first); where the page after starts (None
    when this is the last)."""

    seconds: list[str]
    previous: tuple[str, str] | None
    following: str | None


def timemap_page(scan: Scan, url: str, start: str, size: int) -> TimeMapPage:
    """The ``size`` distinct capture seconds of ``url`` from the 14-digit ``start`` on, and the
    pages around them: a forward walk of ``size`` seconds and one more, and a backward walk of
    ``size`` seconds for where the page before starts (pages from the first capture on line up)."""
    seconds: list[str] = []
    following = None
    for capture in _listed(scan, url, start, forward=True):
        if seconds and capture.timestamp == seconds[-1]:
            continue
        if len(seconds) == size:
            following = capture.timestamp
            break
        seconds.append(capture.timestamp)
    previous = None
    before = stamp_before(seconds[0]) if seconds else None
    if before is not None:
        earlier: list[str] = []
        for capture in _listed(scan, url, before, forward=False):
            if not earlier or capture.timestamp != earlier[-1]:
                earlier.append(capture.timestamp)
                if len(earlier) == size:
                    break
        if earlier:
            previous = (earlier[-1], earlier[0])
    return TimeMapPage(seconds, previous, following)


class _CatalogCaptures:
    """The captures of one URL as its calendar reads them (calendar.CaptureSource)."""

    def __init__(self, scan: Scan, url: str) -> None:
        self.scan = scan
        self.url = url

    def _spans(self, digits: int, first: str, last: str) -> Counter[str]:
        found: Counter[str] = Counter()
        pieces = self.scan.catalog.span_counts(self.url, digits, from_=first, to=last)
        for span, count in self.scan.counted(pieces):
            found[span] += count
        return found

    def years(self) -> Counter[int]:
        return Counter({int(year): n for year, n in self._spans(4, _EARLIEST, _LATEST).items()})

    def days(self, year: int) -> Counter[date]:
        spans = self._spans(8, f"{year:04d}".ljust(14, "0"), f"{year:04d}".ljust(14, "9"))
        return Counter({day_of(day): n for day, n in spans.items()})

    def count(self, prefix: str) -> int:
        return sum(self._spans(len(prefix), prefix.ljust(14, "0"), prefix.ljust(14, "9")).values())

    def ends(self) -> tuple[str, str] | None:
        first = next(_listed(self.scan, self.url, _EARLIEST, forward=True), None)
        last = next(_listed(self.scan, self.url, _LATEST, forward=False), None)
        return None if first is None or last is None else (first.timestamp, last.timestamp)

    def walk(self, start: str) -> Iterator[Capture]:
        return _listed(self.scan, self.url, start, forward=True)


def calendar(scan: Scan, url: str, within: str, start: str | None, size: int) -> CaptureTally:
    """The calendar of ``url`` (calendar.tally_captures) from the catalog: counts per year and per
    day of the year shown, and a page of at most ``size`` captures from ``start`` on."""
    return tally_captures(_CatalogCaptures(scan, url), within, start, size)



def screenshots(scan: Scan, url: str, captures: list[Capture]) -> set[str]:
    """The seconds of ``captures`` (of ``url``, in time order) that have a screenshot of the same
    second: the screenshots of ``url`` (``urn:screenshot:<url>``) within the captures' first and
    last seconds, one query of at most SCREENSHOT_ROWS rows per capture (none for a URL that is
    itself a rendering)."""
    if not captures or rendering_of(url) is not None:
        return set()
    seconds = {c.timestamp for c in captures}
    found = scan.catalog.captures(SCREENSHOT + url, from_=captures[0].timestamp,
                                  to=captures[-1].timestamp, limit=SCREENSHOT_ROWS * len(captures))
    return {shot.timestamp for shot in scan.rows(found)} & seconds


def has_screenshot(scan: Scan, url: str, at: str) -> bool:
    """Whether ``url`` has a screenshot of the 14-digit second ``at`` (one query of one row)."""
    if rendering_of(url) is not None:
        return False
    return any(scan.rows(scan.catalog.captures(SCREENSHOT + url, from_=at, to=at, limit=1)))
