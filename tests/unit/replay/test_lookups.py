"""What replay reads of one URL's captures (archiver.replay.lookups), on a real SQLite catalog read
as a listing: the capture served, its neighbours, TimeMap pages and the calendar agree with
answers worked out over every capture in memory, and pages cover every capture exactly once."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TypeVar

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.replay import lookups
from archiver.replay.calendar import CapturesInMemory, tally_captures
from archiver.replay.scan import Scan, Scanner
from archiver.store.catalogkeys import surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from archiver.web.timestamps import to_datetime

URL = "http://example.org/page"
OTHER = "https://example.org/page"  # the same SURT key: http -> https redirects go there
START = datetime(2019, 12, 30, tzinfo=UTC)
R = TypeVar("R")

# Captures as (seconds after START, a redirect to URL itself); several may share a second.
rows = st.lists(st.tuples(st.integers(0, 400_000), st.booleans()), max_size=40)
dates = st.integers(-1000, 401_000).map(lambda s: f"{START + timedelta(seconds=s):%Y%m%d%H%M%S}")


def made(spec: list[tuple[int, bool]]) -> list[Capture]:
    """The captures of ``spec``, in catalog order (time, then offset)."""
    captures = [Capture(surt_key(URL), f"{START + timedelta(seconds=s):%Y%m%d%H%M%S}", URL,
                        301 if loop else 200, "text/html", "sha1:X", OTHER if loop else None, "A.warc.gz", n,
                        10)
                for n, (s, loop) in enumerate(spec)]
    return sorted(captures, key=lambda c: (c.timestamp, c.offset))


@contextmanager
def catalog_of(captures: list[Capture]) -> Iterator[Catalog]:
    with tempfile.TemporaryDirectory() as folder, Catalog(Path(folder), 1) as catalog:
        catalog.add(captures)
        yield catalog


def listing(catalog: Catalog, read: Callable[[Scan], R], max_rows: int = 10**6) -> R:
    """``read`` run as replay runs it: a listing of the catalog, in a worker thread."""
    scanner = Scanner(catalog, slice_rows=7, max_rows=max_rows, deadline=60, listings=1)
    return trio.run(scanner.collect, read)


def nearest(captures: list[Capture], at: str, url: str) -> Capture | None:
    """The capture served at ``at``, worked out over all of them: the nearest that is not a
    redirect to ``url``, of two as near the earlier; the last capture of its second before
    ``at``, the first after it (as ``CatalogStore.closest``)."""
    fit = [c for c in captures if not lookups.self_redirect(c, url)]
    before = [c for c in fit if c.timestamp <= at]
    after = [c for c in fit if c.timestamp > at]
    if not before or not after:
        return before[-1] if before else after[0] if after else None
    target = to_datetime(at)
    earlier, later = before[-1], after[0]
    nearer_before = target - to_datetime(earlier.timestamp) <= to_datetime(later.timestamp) - target
    return earlier if nearer_before else later


@given(rows, dates)
@settings(deadline=None)
def test_the_capture_served_is_the_nearest_not_a_redirect_to_itself(spec, at):
    captures = made(spec)
    with catalog_of(captures) as catalog:
        found = listing(catalog, partial(lookups.served, url=OTHER, at=at))
        assert found == nearest(captures, at, OTHER)
        assert listing(catalog, partial(lookups.served, url="http://example.org/never", at=at)) is None


@given(rows, st.data())
@settings(deadline=None)
def test_around_names_the_neighbouring_seconds_and_the_ends(spec, data):
    captures = made(spec)
    if not captures:
        return
    one = data.draw(st.sampled_from(captures))
    seconds = sorted({c.timestamp for c in captures})
    at = seconds.index(one.timestamp)
    with catalog_of(captures) as catalog:
        near = listing(catalog, partial(lookups.around, url=URL, capture=one, count=True))
    assert near.prev == (seconds[at - 1] if at else None)
    assert near.next == (seconds[at + 1] if at + 1 < len(seconds) else None)
    assert (near.first, near.last) == (seconds[0], seconds[-1])
    assert (near.count, near.more) == (len(captures), False)


def test_a_count_stops_at_its_bound_and_says_there_are_more(monkeypatch):
    monkeypatch.setattr(lookups, "COUNTED", 5)
    captures = made([(n, False) for n in range(12)])
    with catalog_of(captures) as catalog:
        near = listing(catalog, partial(lookups.around, url=URL, capture=captures[3], count=True))
        assert (near.count, near.more) == (5, True)
        near = listing(catalog, partial(lookups.around, url=URL, capture=captures[3], count=False))
        assert (near.count, near.more) == (None, False)


def test_lookups_read_the_captures_they_name_not_every_capture():
    """Under a row cap of 20, a URL of 5,000 captures: its memento's neighbours, its nearest
    capture past a run of redirects to itself, and a TimeMap page of 8 are read."""
    spec = [(n, 100 <= n < 110) for n in range(5000)]
    captures = made(spec)
    with catalog_of(captures) as catalog:
        served = listing(catalog, partial(lookups.served, url=OTHER, at=captures[104].timestamp), 20)
        assert served == captures[99]
        near = listing(catalog, partial(lookups.around, url=URL, capture=captures[2500], count=False), 20)
        assert (near.prev, near.next) == (captures[2499].timestamp, captures[2501].timestamp)
        page_of_8 = partial(lookups.timemap_page, url=URL, start=captures[3000].timestamp, size=8)
        page = listing(catalog, page_of_8, 20)
        assert page.seconds == [c.timestamp for c in captures[3000:3008]]


@given(rows, st.integers(1, 6), dates)
@settings(deadline=None)
def test_timemap_pages_hold_every_second_once_and_link_each_other(spec, size, start):
    captures = made(spec)
    seconds = sorted({c.timestamp for c in captures})
    with catalog_of(captures) as catalog:
        first = listing(catalog, partial(lookups.timemap_page, url=URL, start="0" * 14, size=size))
        assert first.previous is None
        pages, page = [first], first
        while page.following is not None:
            page = listing(catalog, partial(lookups.timemap_page, url=URL, start=page.following, size=size))
            pages.append(page)
        assert [s for p in pages for s in p.seconds] == seconds
        assert all(1 <= len(p.seconds) <= size for p in pages) or seconds == []
        for before, after in itertools.pairwise(pages):
            assert after.previous == (before.seconds[0], before.seconds[-1])
            assert before.following == after.seconds[0]
        anywhere = listing(catalog, partial(lookups.timemap_page, url=URL, start=start, size=size))
    later = [s for s in seconds if s >= start]
    assert anywhere.seconds == later[:size]
    assert anywhere.following == (later[size] if len(later) > size else None)
    earlier = [s for s in seconds if s < start]
    assert anywhere.previous == ((earlier[-size:][0], earlier[-1]) if earlier and later else None)


days = st.integers(0, 800).map(lambda d: START + timedelta(days=d))
moments = st.tuples(days, st.integers(0, 3)).map(lambda p: p[0] + timedelta(seconds=p[1]))
withins = st.sampled_from(["", "2", "20", "2019", "2020", "2021", "202006", "20200229", "2020022900", "1999"])


@given(st.lists(moments, max_size=50), withins, st.integers(1, 5))
@settings(deadline=None)
def test_the_catalogs_calendar_is_the_one_of_all_captures_and_its_pages_list_each_once(when, within, size):
    captures = made([(int((w - START).total_seconds()), False) for w in when])
    listed: list[Capture] = []
    start = None
    with catalog_of(captures) as catalog:
        while True:
            calendar = partial(lookups.calendar, url=URL, within=within, start=start, size=size)
            tally = listing(catalog, calendar)
            assert tally == tally_captures(CapturesInMemory(captures), within, start, size)
            listed += tally.listed
            if tally.following is None:
                break
            start = tally.following
    if tally.year is None:
        assert listed == []
        return
    prefix = within if len(within) >= 4 else f"{tally.year:04d}"
    matching = [c for c in captures if c.timestamp.startswith(prefix)]
    # Every capture once, in order; a second with more than a page of captures keeps a page of them.
    kept = [c for c in matching if sum(d.timestamp == c.timestamp and d.offset < c.offset
                                       for d in matching) < size]
    assert listed == kept
