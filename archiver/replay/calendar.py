"""Captures grouped by year, month and day for the capture calendars (pure logic, no I/O).

A URL's calendar counts its captures per day (:func:`tally_captures`); a host's counts its pages,
the distinct URL keys captured that day (:func:`tally_pages`). Both show a bar per year
(:func:`year_bars`: every year from the first to the last with captures, empty ones included,
unless that span is wider than ``MAX_YEAR_SPAN``) and, for one year, twelve month grids
(:func:`year_calendar`) of weeks starting on Monday (ISO 8601), each day with its count and a
shade (:func:`level`). Days are UTC days, as archive timestamps are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta

from archiver.store.catalog import Capture

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


@dataclass
class CaptureTally:
    """One URL's captures as its calendar shows them: per day and in all, the first and last
    timestamps, the year shown and that year's captures in time order."""

    per_day: Counter[date] = field(default_factory=Counter)
    total: int = 0
    first: str | None = None
    last: str | None = None
    year: int | None = None
    of_year: list[Capture] = field(default_factory=list)

    def listed(self, within: str) -> list[Capture]:
        """The shown year's captures whose timestamp starts with ``within``."""
        return [c for c in self.of_year if c.timestamp.startswith(within)]


def tally_captures(captures: Iterable[Capture], within: str = "") -> CaptureTally:
    """Count ``captures`` per day, keeping those of one year: the year ``within`` names (its
    first four digits), or with fewer digits the latest year of a capture whose timestamp starts
    with them (None if none does). Memory: the day counts and one year's captures."""
    tally = CaptureTally()
    fixed = int(within[:4]) if len(within) >= 4 else None
    tally.year = fixed
    for capture in captures:
        day = day_of(capture.timestamp)
        tally.per_day[day] += 1
        tally.total += 1
        if tally.first is None or capture.timestamp < tally.first:
            tally.first = capture.timestamp
        if tally.last is None or capture.timestamp > tally.last:
            tally.last = capture.timestamp
        if fixed is None and f"{day.year:04d}".startswith(within) and day.year > (tally.year or 0):
            tally.year = day.year
            tally.of_year = []
        if day.year == tally.year:
            tally.of_year.append(capture)
    tally.of_year.sort(key=lambda c: c.timestamp)
    return tally


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
