"""Replay's lookups show only content (archiver.replay.lookups, Capture.is_content), on a real
SQLite catalog: a gatekeeper's answer, a login's exchange or a capture after a session was lost is
never served, named as a neighbour, listed in a TimeMap or a calendar, nor taken by a fuzzy rule;
and a lookup passes over a bounded number of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from archiver.replay import lookups
from archiver.replay.scan import ScanLimit
from archiver.store.catalogkeys import surt_key
from archiver.store.models import Capture, labels_text
from archiver.web.fuzzy import DEFAULT_RULES
from tests.unit.replay.test_lookups import catalog_of, listing

URL = "http://example.org/page"
START = datetime(2026, 1, 1, tzinfo=UTC)
GATE = {"gatekeeper": "challenge"}


def at(second: int) -> str:
    return f"{START + timedelta(seconds=second):%Y%m%d%H%M%S}"


def capture(second: int, labels: dict[str, str] | None = None, url: str = URL) -> Capture:
    return Capture(surt_key(url), at(second), url, 403 if labels else 200, "text/html",
                   f"sha1:{second}", None, "A.warc.gz", second, 10, labels=labels_text(labels or {}))


def test_the_newest_capture_a_challenge_serves_the_older_page() -> None:
    page = capture(0)
    captures = [page, capture(10, GATE), capture(20, {"login": "s1"}), capture(30, {"session-lost": "s1"})]
    with catalog_of(captures) as catalog:
        for second in (0, 10, 25, 30, 99):
            assert listing(catalog, partial(lookups.served, url=URL, at=at(second))) == page


def test_the_nearest_page_either_side_of_a_challenge() -> None:
    before, after = capture(0), capture(100)
    with catalog_of([before, capture(40, GATE), capture(60, GATE), after]) as catalog:
        assert listing(catalog, partial(lookups.served, url=URL, at=at(40))) == before
        assert listing(catalog, partial(lookups.served, url=URL, at=at(60))) == after
        near = listing(catalog, partial(lookups.around, url=URL, capture=before, count=False))
        assert (near.prev, near.next, near.first, near.last) == (None, after.timestamp,
                                                                 before.timestamp, after.timestamp)


def test_a_url_with_only_challenges_has_nothing_to_serve() -> None:
    with catalog_of([capture(0, GATE), capture(1, GATE)]) as catalog:
        assert listing(catalog, partial(lookups.served, url=URL, at=at(0))) is None


def test_a_session_capture_is_content() -> None:
    inside = capture(5, {"session": "s1"})
    with catalog_of([capture(0), inside]) as catalog:
        assert listing(catalog, partial(lookups.served, url=URL, at=at(5))) == inside


def test_timemaps_and_calendars_list_only_content() -> None:
    pages = [capture(0), capture(50), capture(200)]
    captures = sorted([*pages, capture(10, GATE), capture(60, GATE), capture(300, GATE)],
                      key=lambda c: c.timestamp)
    with catalog_of(captures) as catalog:
        first = listing(catalog, partial(lookups.timemap_page, url=URL, start="0" * 14, size=2))
        assert (first.seconds, first.following) == ([pages[0].timestamp, pages[1].timestamp],
                                                    pages[2].timestamp)
        last = listing(catalog, partial(lookups.timemap_page, url=URL, start=pages[2].timestamp, size=2))
        assert (last.seconds, last.previous, last.following) == (
            [pages[2].timestamp], (pages[0].timestamp, pages[1].timestamp), None)
        tally = listing(catalog, partial(lookups.calendar, url=URL, within="2026", start=None, size=10))
        assert tally.listed == pages
        assert (tally.first, tally.last) == (pages[0].timestamp, pages[2].timestamp)
        assert (tally.total, tally.matching, dict(tally.per_year)) == (3, 3, {2026: 3})
        assert sum(tally.per_day.values()) == 3
        near = listing(catalog, partial(lookups.around, url=URL, capture=pages[1], count=True))
        assert (near.count, near.more) == (3, False)


def test_a_fuzzy_rule_never_takes_a_challenge() -> None:
    page = capture(0, url=URL + "?_=1")
    challenge = capture(5, GATE, url=URL + "?_=2")
    fuzzy = partial(lookups.fuzzy, url=URL + "?_=3", at=at(5), rules=DEFAULT_RULES)
    with catalog_of([page, challenge]) as catalog:
        assert listing(catalog, fuzzy) == (page, "epoch-ms")
    with catalog_of([challenge]) as catalog:
        assert listing(catalog, fuzzy) is None


def test_a_lookup_passes_over_a_bounded_number_of_challenges() -> None:
    """10,000 challenges after the page: a lookup reads at most NOT_CONTENT_ROWS + 1 of them
    each way, under a row cap that the walk over every challenge passes."""
    page = capture(0)
    challenges = [capture(1 + n, GATE) for n in range(10_000)]
    with catalog_of([page, *challenges]) as catalog:
        rows = 2 * (lookups.NOT_CONTENT_ROWS + 1)  # a walk each way, each bounded
        # Past NOT_CONTENT_ROWS challenges a side has no capture: the page is not reached from
        # the newest second, and the lookup has read fewer than `rows` rows to say so.
        assert listing(catalog, partial(lookups.served, url=URL, at=at(20_000)), rows) is None
        assert listing(catalog, partial(lookups.served, url=URL, at=at(50)), rows) == page
        with pytest.raises(ScanLimit):  # the old walk, every challenge, passes any such cap
            listing(catalog, lambda scan: list(scan.rows(scan.catalog.walk(URL, at(20_000), forward=False))),
                    rows)
