"""The capture calendars' grouping (archiver.replay.calendar): counts add up to the captures, every
day shown is a real day in its place, leap years have their 29 February, a host counts each page
once a day."""

from __future__ import annotations

import calendar as stdlib_calendar
from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.replay.calendar import (
    BAR_HEIGHT,
    LEVELS,
    MAX_YEAR_SPAN,
    CapturesInMemory,
    CaptureTally,
    day_of,
    level,
    month_grid,
    page_of,
    tally_captures,
    tally_pages,
    year_bars,
    year_calendar,
)
from archiver.store.catalogkeys import surt_key
from archiver.store.models import Capture

instants = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2040, 12, 31, 23, 59, 59))
stamps = st.lists(instants.map(lambda d: f"{d:%Y%m%d%H%M%S}"), max_size=60)


def capture(timestamp: str, url: str = "http://example.org/a") -> Capture:
    return Capture(surt_key(url), timestamp, url, 200, "text/html", "sha1:X", None, "f.warc.gz", 0, 1)


def cells(year: int, counts: dict[date, int]) -> list[tuple[int, int, int, object]]:
    """(month, week row, column, cell) of every slot of a year's months."""
    return [(grid.month, row, column, cell)
            for grid in year_calendar(year, counts)
            for row, week in enumerate(grid.weeks)
            for column, cell in enumerate(week)]  # fmt: skip


def tally_of(timestamps: list[str], within: str = "", start: str | None = None, size: int = 1000
             ) -> CaptureTally:
    return tally_captures(CapturesInMemory(capture(ts) for ts in timestamps), within, start, size)


@given(stamps)
def test_counts_add_up_to_the_captures(timestamps):
    tally = tally_of(timestamps)
    assert tally.total == len(timestamps) == sum(tally.per_year.values())
    assert sum(bar.count for bar in year_bars(tally.per_day, years_counted=tally.per_year)) == len(timestamps)
    source = CapturesInMemory(capture(ts) for ts in timestamps)
    for year in {int(ts[:4]) for ts in timestamps}:
        in_year = sum(ts.startswith(f"{year}") for ts in timestamps)
        days = source.days(year)
        assert sum(days.values()) == tally.per_year[year] == in_year
        months = year_calendar(year, days)
        assert sum(m.count for m in months) == in_year
        shown = sum(cell.count for _, _, _, cell in cells(year, days) if cell is not None)
        assert shown == in_year
    if tally.year is not None:  # the days counted are the shown year's only
        assert {day.year for day in tally.per_day} == {tally.year}


@given(stamps)
def test_the_year_shown_is_the_latest_and_lists_its_captures(timestamps):
    tally = tally_of(timestamps)
    if not timestamps:
        assert tally.year is None and tally.listed == [] and tally.first is None
        return
    latest = max(timestamps)
    assert tally.year == int(latest[:4])
    assert [c.timestamp for c in tally.listed] == sorted(ts for ts in timestamps if ts[:4] == latest[:4])
    assert tally.matching == len(tally.listed) and tally.following is None
    assert (tally.first, tally.last) == (min(timestamps), latest)


@given(stamps, st.integers(1990, 2040))
def test_a_year_asked_for_is_shown_even_without_captures(timestamps, year):
    within = f"{year}"
    tally = tally_of(timestamps, within)
    assert tally.year == year
    listed = [c.timestamp for c in tally.listed]
    assert listed == sorted(t for t in timestamps if t.startswith(within))


@given(st.integers(1, 9999))
def test_every_day_of_the_year_is_shown_once_in_its_place(year):
    slots = cells(year, {})
    days = [(month, row, column, cell) for month, row, column, cell in slots if cell is not None]
    first = date(year, 1, 1)
    length = 366 if stdlib_calendar.isleap(year) else 365
    assert [cell.day for *_, cell in days] == [first + timedelta(n) for n in range(length)]
    for month, row, column, cell in days:
        assert cell.day.month == month and cell.day.weekday() == column
        assert row == (cell.day.day - 1 + date(year, month, 1).weekday()) // 7
    for grid in year_calendar(year, {}):
        assert all(len(week) == 7 for week in grid.weeks) and 4 <= len(grid.weeks) <= 6
        assert any(c is not None for c in grid.weeks[0]) and any(c is not None for c in grid.weeks[-1])


@given(st.integers(1, 9999))
def test_february_has_29_days_in_leap_years(year):
    grid = month_grid(year, 2, {})
    days = [c.day.day for week in grid.weeks for c in week if c is not None]
    assert max(days) == (29 if stdlib_calendar.isleap(year) else 28)


@pytest.mark.parametrize(("year", "leap"), [(2024, True), (2100, False), (2000, True), (2026, False)])
def test_a_capture_on_29_february_is_counted_in_a_leap_year(year, leap):
    if not leap:
        with pytest.raises(ValueError):
            day_of(f"{year}0229000000")
        return
    tally = tally_of([f"{year}0229120000"])
    grid = month_grid(year, 2, tally.per_day)
    assert [c.count for week in grid.weeks for c in week if c is not None and c.day.day == 29] == [1]
    assert grid.count == 1


@given(stamps)
def test_year_bars_run_from_the_first_year_to_the_last(timestamps):
    tally = tally_of(timestamps)
    bars = year_bars(tally.per_day, years_counted=tally.per_year)
    years = Counter(int(ts[:4]) for ts in timestamps)
    if not years:
        assert bars == []
        return
    assert [b.year for b in bars] == list(range(min(years), max(years) + 1))
    assert {b.year: b.count for b in bars if b.count} == dict(years)
    for bar in bars:
        assert (bar.height == 0) == (bar.count == 0) and 0 <= bar.height <= BAR_HEIGHT
    assert max(b.height for b in bars) == BAR_HEIGHT


def test_a_wide_span_shows_only_years_with_captures():
    counts = {date(1970, 1, 1): 1, date(1970 + MAX_YEAR_SPAN + 5, 6, 1): 3}
    assert [(b.year, b.count) for b in year_bars(counts)] == [(1970, 1), (1970 + MAX_YEAR_SPAN + 5, 3)]


def test_levels():
    assert level(0) == 0
    assert [level(n) for n in LEVELS] == list(range(1, len(LEVELS) + 1))
    assert all(level(n) <= level(n + 1) for n in range(100))


@given(st.lists(st.tuples(st.integers(0, 5), instants), max_size=60))
def test_a_host_counts_each_page_once_a_day_and_once_a_year(rows):
    captures = sorted((capture(f"{when:%Y%m%d%H%M%S}", f"http://example.org/p{n}") for n, when in rows),
                      key=lambda c: (c.urlkey, c.timestamp))
    tally = tally_pages(captures)
    assert tally.total == len(rows) == sum(tally.captures.values())
    assert tally.keys == len({n for n, _ in rows})
    assert tally.pages == Counter(day for _, day in {(n, when.date()) for n, when in rows})
    assert tally.pages_per_year == Counter(y for _, y in {(n, when.year) for n, when in rows})
    for day, pages in tally.pages.items():
        assert 1 <= pages <= tally.captures[day]
    bars = year_bars(tally.pages, years_counted=tally.pages_per_year)
    assert {b.year: b.count for b in bars if b.count} == dict(tally.pages_per_year)


def test_a_host_keeps_one_days_captures_up_to_a_cap():
    day = datetime(2026, 3, 10, tzinfo=UTC)
    captures = [capture(f"{day + timedelta(minutes=n):%Y%m%d%H%M%S}", f"http://example.org/p{n:02d}")
                for n in range(30)]
    captures.append(capture("20260311000000", "http://example.org/q"))
    tally = tally_pages(sorted(captures, key=lambda c: c.urlkey), date(2026, 3, 10), keep=20)
    assert len(tally.of_day) == 20 and tally.more == 10
    assert [c.timestamp for c in tally.of_day] == sorted(c.timestamp for c in tally.of_day)
    assert tally.pages[date(2026, 3, 10)] == 30 and tally.pages[date(2026, 3, 11)] == 1


@given(st.lists(st.integers(0, 5), max_size=40), st.integers(1, 6))
def test_pages_of_captures_list_each_once_cutting_only_a_second_longer_than_a_page(seconds, size):
    made = (Capture("a)/", f"2026010100000{s}", "http://a/", 200, "text/html", "d", None, "f", n, 1)
            for n, s in enumerate(seconds))
    captures = sorted(made, key=lambda c: (c.timestamp, c.offset))
    listed: list[Capture] = []
    start = "0" * 14
    while True:
        page, following = page_of((c for c in captures if c.timestamp >= start), size)
        assert len(page) <= size and (page or following is None)  # only past a second cut short
        listed += page
        if following is None:
            break
        assert following > page[-1].timestamp
        start = following
    # Each capture once, but of a second with more captures than a page, a page of them.
    kept = [c for c in captures
            if sum(d.timestamp == c.timestamp and d.offset < c.offset for d in captures) < size]
    assert listed == kept


@pytest.mark.parametrize("text", ["2026", "2026130100000", "20260230000000", "abcdefgh"])
def test_day_of_refuses_what_names_no_day(text):
    with pytest.raises(ValueError):
        day_of(text)


@given(stamps, st.sampled_from(["1", "19", "20", "203", "2"]))
def test_fewer_digits_than_a_year_show_the_latest_year_they_start(timestamps, within):
    tally = tally_of(timestamps, within)
    matching = [ts for ts in timestamps if ts.startswith(within)]
    assert tally.year == (int(max(matching)[:4]) if matching else None)
    assert {c.timestamp for c in tally.listed} <= set(matching)


def test_the_calendar_pages_escape_archived_values():
    from archiver.replay import pages

    hostile = 'http://a.org/"><script>x</script>'
    captures = [Capture("a)/", "20261122000000", hostile, 200, "text/<b>", "d", None, "f", 0, 1)]
    for text in (
        pages.capture_list(prefix="", content="", url=hostile, captures=captures),
        pages.host_calendar(prefix="", content="", host="a.org", year=None, day=date(2026, 11, 22), keep=10,
                            tally=tally_pages(captures, date(2026, 11, 22))),
    ):
        assert "<script>" not in text and "&lt;script&gt;" in text and "text/&lt;b&gt;" in text
