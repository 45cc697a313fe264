"""Captures grouped by year, month and day for the capture calendars (pure logic, no I/O).

A URL's calendar counts its captures per year and per day of the year it shows, and lists a page of
them (:func:`tally_captures`, over a :class:`CaptureSource`: the catalog's counts and walks, so its
memory is that of the page); a host's counts its pages, the distinct URL keys captured that day
(:func:`tally_pages`). Both show a bar per year
(:func:`year_bars`: every year from the first to the last with captures, empty ones included,
unless that span is wider than ``MAX_YEAR_SPAN``) and, for one year, twelve month grids
(:func:`year_calendar`) of weeks starting on Monday (ISO 8601), each day with its count and a
shade (:func:`level`). Days are UTC days, as archive timestamps are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from itertools import islice, takewhile
from typing import Protocol

from archiver.store.models import Capture
from archiver.web.timestamps import stamp_after

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# Wider spans (a stray WARC-Date in 1970, say) show only the years that have captures.
MAX_YEAR_SPAN = 100
# The tallest year bar, in CSS pixels.
BAR_HEIGHT = 80
# A day with at least LEVELS[i] captures (or pages) is shaded at level i + 1.
LEVELS = (1, 2, 5, 20)


def day_of(timestamp: str) -> date:
    """The UTC day of a 14-digit timestamp; ValueError if its digits name no day."""
    if len(timestamp) < 8 or not timestamp[:8].isdigit():
        raise ValueError(f"not a timestamp: {timestamp!r}")
    return date(int(timestamp[:4]), int(timestamp[4:6]), int(timestamp[6:8]))


def level(count: int) -> int:
    """The shade of a day with ``count`` captures: 0 (none) to len(LEVELS)."""
    return sum(count >= least for least in LEVELS)


@dataclass(frozen=True)
class YearBar:
    """One year of the bar chart; ``height`` is 0 for none, 1 to ``BAR_HEIGHT`` for any."""

    year: int
    count: int
    height: int


def per_year(counts: Mapping[date, int]) -> dict[int, int]:
    """Day counts summed by year."""
    years: dict[int, int] = {}
    for day, count in counts.items():
        years[day.year] = years.get(day.year, 0) + count
    return years


def year_bars(counts: Mapping[date, int], height: int = BAR_HEIGHT,
              years_counted: Mapping[int, int] | None = None) -> list[YearBar]:
    """A bar per year, oldest first, scaled to the busiest year; [] without counts. A year's count
    is the sum of its days' unless ``years_counted`` gives it (a host's pages, each once a year)."""
    counted = per_year(counts) if years_counted is None else years_counted
    years = {year: count for year, count in counted.items() if count}
    if not years:
        return []
    first, last = min(years), max(years)
    shown = range(first, last + 1) if last - first < MAX_YEAR_SPAN else sorted(years)
    most = max(years.values())
    return [YearBar(year, years.get(year, 0), _scaled(years.get(year, 0), most, height)) for year in shown]


def _scaled(count: int, most: int, height: int) -> int:
    return 0 if count <= 0 else max(1, round(height * count / most))


@dataclass(frozen=True)
class DayCell:
    """One day of a month grid and its count."""

    day: date
    count: int

    @property
    def level(self) -> int:
        return level(self.count)


@dataclass(frozen=True)
class MonthGrid:
    """One month as weeks of seven slots, Monday first; None pads the first and last week."""

    year: int
    month: int
    weeks: tuple[tuple[DayCell | None, ...], ...]

    @property
    def name(self) -> str:
        return MONTHS[self.month - 1]

    @property
    def count(self) -> int:
        return sum(cell.count for week in self.weeks for cell in week if cell is not None)


def month_grid(year: int, month: int, counts: Mapping[date, int]) -> MonthGrid:
    """The grid of one month with the counts of its days."""
    first = date(year, month, 1)
    length = 31 if month == 12 else (date(year, month + 1, 1) - first).days  # December of 9999 too
    cells: list[DayCell | None] = [None] * first.weekday()
    days = (first + timedelta(n) for n in range(length))
    cells += [DayCell(day, counts.get(day, 0)) for day in days]
    cells += [None] * (-len(cells) % 7)
    return MonthGrid(year, month, tuple(tuple(cells[i : i + 7]) for i in range(0, len(cells), 7)))


def year_calendar(year: int, counts: Mapping[date, int]) -> tuple[MonthGrid, ...]:
    """The twelve month grids of ``year``."""
    return tuple(month_grid(year, month, counts) for month in range(1, 13))


def latest_year(counts: Mapping[date, int]) -> int | None:
    """The latest year with a count, None without any."""
    return max((day.year for day, count in counts.items() if count), default=None)


# Captures a URL's calendar lists on one page (the Wayback Machine's day lists run to thousands).
LISTED = 1000


class CaptureSource(Protocol):
    """Where a URL's calendar reads its captures from: counts and a walk, each of a bounded cost
    (archiver.replay.lookups reads them from the catalog; :class:`CapturesInMemory` from a list)."""

    def years(self) -> Counter[int]:
        """Captures per year."""

    def days(self, year: int) -> Counter[date]:
        """Captures per day of ``year``."""

    def count(self, prefix: str) -> int:
        """Captures whose timestamps begin with ``prefix`` (4 to 14 digits)."""

    def ends(self) -> tuple[str, str] | None:
        """The first and last timestamps; None without captures."""

    def walk(self, start: str) -> Iterator[Capture]:
        """The captures from the 14-digit ``start`` on, in time order."""


@dataclass
class CaptureTally:
    """One URL's captures as its calendar shows them: per year, per day of the year shown, and in
    all; the first and last timestamps; the year shown; and one page of the captures listed (those
    whose timestamps begin with the digits asked, or those of the year shown): at most ``LISTED``
    of them in time order, how many match in all (``matching``), and where the next page starts
    (``following``; None on the last page)."""

    per_year: Counter[int] = field(default_factory=Counter)
    per_day: Counter[date] = field(default_factory=Counter)
    total: int = 0
    first: str | None = None
    last: str | None = None
    year: int | None = None
    listed: list[Capture] = field(default_factory=list)
    matching: int = 0
    following: str | None = None


def tally_captures(source: CaptureSource, within: str = "", start: str | None = None,
                   size: int = LISTED) -> CaptureTally:
    """The calendar of one URL's captures: the year ``within`` names (its first four digits), or
    with fewer digits the latest year of a capture whose timestamp starts with them (None if none
    does); the captures listed are those ``within`` starts (those of that year when it has fewer
    than four digits), from the 14-digit ``start`` on, at most ``size``. Memory: the counts per
    year and per day of one year, and one page of captures."""
    tally = CaptureTally(per_year=source.years())
    tally.total = sum(tally.per_year.values())
    ends = source.ends() if tally.total else None
    tally.first, tally.last = ends or (None, None)
    if len(within) >= 4:
        tally.year = int(within[:4])
    else:
        tally.year = max((y for y, n in tally.per_year.items() if n and f"{y:04d}".startswith(within)),
                         default=None)
    if tally.year is None or not tally.per_year[tally.year]:
        return tally
    tally.per_day = source.days(tally.year)
    prefix = within if len(within) >= 4 else f"{tally.year:04d}"
    if len(prefix) <= 8:
        tally.matching = sum(n for day, n in tally.per_day.items() if f"{day:%Y%m%d}".startswith(prefix))
    else:
        tally.matching = source.count(prefix)
    first, last = prefix.ljust(14, "0"), prefix.ljust(14, "9")
    begin = max(first, start) if start else first
    if tally.matching and begin <= last:
        tally.listed, tally.following = page_of(
            takewhile(lambda c: c.timestamp <= last, source.walk(begin)), size)
    return tally


def page_of(captures: Iterable[Capture], size: int) -> tuple[list[Capture], str | None]:
    """The first ``size`` of ``captures`` (in time order) and the timestamp where the rest start,
    None if none are left. A page ends with a whole second, so the next starts at a second's
    first capture; only a second holding more than ``size`` captures is cut, its others skipped."""
    found = list(islice(captures, size + 1))
    if len(found) <= size:
        return found, None
    following = found[size].timestamp
    page = [c for c in found[:size] if c.timestamp != following]
    if page:
        return page, following
    return found[:size], stamp_after(following)


class CapturesInMemory:
    """A :class:`CaptureSource` over a list of captures (for small pages and tests)."""

    def __init__(self, captures: Iterable[Capture]) -> None:
        self.captures = sorted(captures, key=lambda c: c.timestamp)

    def years(self) -> Counter[int]:
        return Counter(int(c.timestamp[:4]) for c in self.captures)

    def days(self, year: int) -> Counter[date]:
        return Counter(day_of(c.timestamp) for c in self.captures if c.timestamp[:4] == f"{year:04d}")

    def count(self, prefix: str) -> int:
        return sum(c.timestamp.startswith(prefix) for c in self.captures)

    def ends(self) -> tuple[str, str] | None:
        return (self.captures[0].timestamp, self.captures[-1].timestamp) if self.captures else None

    def walk(self, start: str) -> Iterator[Capture]:
        return (c for c in self.captures if c.timestamp >= start)


@dataclass
class PageTally:
    """A host's captures as its calendar shows them: pages (distinct URL keys) per day and per
    year, captures per day, the pages and captures in all, the first and last timestamps, and one
    day's captures (at most ``keep`` of them, in time order; ``more``: how many others)."""

    pages: Counter[date] = field(default_factory=Counter)
    pages_per_year: Counter[int] = field(default_factory=Counter)
    captures: Counter[date] = field(default_factory=Counter)
    keys: int = 0
    total: int = 0
    first: str | None = None
    last: str | None = None
    of_day: list[Capture] = field(default_factory=list)
    more: int = 0


def tally_pages(captures: Iterable[Capture], day: date | None = None, keep: int = 1000) -> PageTally:
    """Count ``captures`` per day, each URL key once a day, keeping up to ``keep`` of ``day``'s.

    The captures of one key must come together (a catalog lists a host's by key, then time);
    memory is the day counts, the days and years of one key and the captures kept.
    """
    tally = PageTally()
    key: str | None = None
    days: set[date] = set()
    years: set[int] = set()
    for capture in captures:
        if capture.urlkey != key:
            key = capture.urlkey
            days, years = set(), set()
            tally.keys += 1
        when = day_of(capture.timestamp)
        tally.captures[when] += 1
        tally.total += 1
        if when not in days:
            days.add(when)
            tally.pages[when] += 1
        if when.year not in years:
            years.add(when.year)
            tally.pages_per_year[when.year] += 1
        if tally.first is None or capture.timestamp < tally.first:
            tally.first = capture.timestamp
        if tally.last is None or capture.timestamp > tally.last:
            tally.last = capture.timestamp
        if when == day:
            if len(tally.of_day) < keep:
                tally.of_day.append(capture)
            else:
                tally.more += 1
    tally.of_day.sort(key=lambda c: (c.timestamp, c.url))
    return tally
