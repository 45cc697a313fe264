"""The replay service's own pages: banner, capture list, URL list, home page, error pages.

Rendered from Jinja2 templates in ``templates/`` with autoescaping on, so every archived value
(URLs, statuses, mime types) is escaped. Pure: captures in, HTML text out. ``prefix`` is where the
replay's own pages are (its base URL), ``content`` the origin of archived content (see
archiver.replay.app): links to captures go there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from datetime import date
from itertools import groupby
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined

from archiver.replay.calendar import (
    LEVELS,
    WEEKDAYS,
    CapturesInMemory,
    CaptureTally,
    PageTally,
    day_of,
    latest_year,
    tally_captures,
    year_bars,
    year_calendar,
)
from archiver.replay.coherence import PARAMETER, Coherence
from archiver.replay.rewrite import IDENTITY, archive_url
from archiver.replay.why import Answer
from archiver.store.catalogkeys import SCREENSHOT
from archiver.store.models import Capture, HostTally
from archiver.web.timestamps import to_iso

_ENV = Environment(
    loader=PackageLoader("archiver.replay", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def list_url(prefix: str, url: str) -> str:
    """The address of the capture list of ``url``."""
    return f"{prefix}/web/*/{url}"


def _when(timestamp: str) -> str:
    return to_iso(timestamp).replace("T", " ").removesuffix("Z")


def duration(seconds: int) -> str:
    """A length of time as people say it, rounded down: "40 s", "5 min", "3 h", "2 days"."""
    seconds = abs(seconds)
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if unit == 'day' and count != 1 else ''}"
    return f"{seconds} s"


def _coherence_view(coherence: Coherence, prefix: str, url: str) -> dict[str, Any]:
    """What the banner shows of a page's coherence: the spread, the embeds flagged."""
    flagged = [e for e in coherence.embeds if e.exceeds or e.timestamp is None]
    query = "&" if "?" in url else "?"
    return {
        "embeds": coherence.checked, "found": coherence.found, "complete": coherence.complete,
        "earliest": _when(coherence.earliest), "latest": _when(coherence.latest),
        "spread": duration(coherence.spread), "skewed": len(coherence.skewed),
        "missing": len(coherence.missing), "max_skew": duration(coherence.max_skew),
        "open": len(flagged) <= 3,
        "json_href": f"{archive_url(prefix, coherence.timestamp, '', url)}{query}{PARAMETER}=json",
        "flagged": [
            {"url": e.url, "kind": e.kind, "served": e.served_url,
             "href": archive_url(prefix, e.timestamp, "", e.served_url or e.url) if e.timestamp else None,
             "when": _when(e.timestamp) if e.timestamp else None,
             "skew": None if e.skew is None else
                f"{duration(e.skew)} {'later' if e.skew > 0 else 'earlier'}"}
            for e in flagged
        ],
    }  # fmt: skip


def banner(
    *, prefix: str, content: str, url: str, timestamp: str, prev: str | None, next: str | None,
    count: int | None, more: bool = False, coherence: Coherence | None = None, screenshot: bool = False,
) -> str:
    """The strip shown atop a replayed page: capture date, previous and next captures, the list
    (with the count of captures, ``more`` if that is where counting stopped), and with
    ``coherence`` the spread of the dates the page is assembled from and the embeds captured more
    than ``replay.max_skew`` away (or not archived), collapsed past three; with ``screenshot``, a
    link to the capture's screenshot (a rendered page's).

    Inline styles only (reset with ``all: initial``, or ``all: revert`` where the browser's own
    focus ring and disclosure marker should stay), so page stylesheets hardly reach it and it
    needs nothing from the page's origin. One line, with no nested ``div``.
    """
    shown = None if coherence is None or not coherence.found else _coherence_view(coherence, content, url)
    return _ENV.get_template("banner.html").render(
        coherence=shown,
        prefix=prefix,
        url=url,
        iso=to_iso(timestamp),
        when=_when(timestamp),
        prev_href=archive_url(content, prev, "", url) if prev else None,
        prev_when=_when(prev) if prev else None,
        next_href=archive_url(content, next, "", url) if next else None,
        next_when=_when(next) if next else None,
        list_href=list_url(prefix, url),
        count=count,
        more=more,
        robots_href=f"{prefix}/robots/{urlsplit(url).netloc}?at={timestamp}",
        screenshot_href=archive_url(content, timestamp, IDENTITY, SCREENSHOT + url) if screenshot else None,
    )


@dataclass(frozen=True)
class SiteRow:
    """One site of the home page: its host's tally (``CatalogStore.hosts``, counted up to
    ``counted``) and the latest capture of its front page, if it has one."""

    tally: HostTally
    root: Capture | None


def home(*, prefix: str, content: str, sites: list[SiteRow], counted: int, next_href: str | None) -> str:
    """The home page: the search forms, a page of the archive's sites (each with its number of
    captures, its latest capture and a link to its front page's latest capture), sorted by name
    within the page, and the replay's addresses."""
    shown: list[dict[str, Any]] = []
    for site in sites:
        tally, root = site.tally, site.root
        netloc = urlsplit(root.url if root else tally.url).netloc
        latest = max(tally.latest, root.timestamp) if root else tally.latest
        complete = tally.captures < counted
        shown.append({
            "name": netloc,
            "calendar": f"{prefix}/calendar/{netloc}",
            "captures": f"{tally.captures:,}" if complete else f"{counted:,}+",
            "latest": _when(latest) if complete else f"{_when(latest)} or later",
            "root_href": archive_url(content, root.timestamp, "", root.url) if root else None,
            "list_href": list_url(prefix, root.url) if root else None,
        })
    shown.sort(key=lambda row: row["name"])
    return _ENV.get_template("home.html").render(prefix=prefix, sites=shown, next_href=next_href,
                                                 counted=f"{counted:,}")


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}{'' if count == 1 else 's'}"


def _year_bars(counts: Mapping[date, int], shown: int | None, href: Callable[[int], str],
               unit: str, years_counted: Mapping[int, int] | None) -> list[dict[str, Any]]:
    """The bar chart's years: each with a link (None for a year without any) and a label."""
    return [
        {"year": bar.year, "count": bar.count, "height": bar.height, "current": bar.year == shown,
         "href": href(bar.year) if bar.count else None, "label": f"{bar.year}: {_plural(bar.count, unit)}"}
        for bar in year_bars(counts, years_counted=years_counted)
    ]  # fmt: skip


def _month_grids(year: int, counts: Mapping[date, int], link: Callable[[date], tuple[str, str]],
                 unit: str, chosen: date | None) -> list[dict[str, Any]]:
    """The twelve months of ``year``; each day with a count gets a link and a hover title
    (``link(day)``), and a label saying its date and count; ``chosen`` is marked current."""
    months = []
    for grid in year_calendar(year, counts):
        weeks = []
        for week in grid.weeks:
            cells: list[dict[str, Any] | None] = []
            for cell in week:
                if cell is None:
                    cells.append(None)
                    continue
                href, title = link(cell.day) if cell.count else (None, None)
                label = f"{cell.day.day} {grid.name} {year}: {_plural(cell.count, unit)}"
                cells.append({"day": cell.day.day, "level": cell.level, "href": href, "title": title,
                              "label": label, "current": cell.day == chosen})
            weeks.append(cells)
        months.append({"id": f"m{year}{grid.month:02d}", "name": grid.name, "count": grid.count,
                       "weeks": weeks})
    return months


def _calendar_parts(counts: Mapping[date, int], year: int | None, *, bar_href: Callable[[int], str],
                    day_link: Callable[[date], tuple[str, str]], unit: str,
                    years_counted: Mapping[int, int] | None = None,
                    chosen: date | None = None) -> dict[str, Any]:
    """What the calendar macros (templates/calendar_parts.html) take."""
    return {
        "bars": _year_bars(counts, year, bar_href, unit, years_counted),
        "year": year,
        "months": _month_grids(year, counts, day_link, unit, chosen) if year is not None else [],
        "weekdays": WEEKDAYS,
        "levels": [f"{least}+" if i == len(LEVELS) - 1 else
                   (str(least) if LEVELS[i + 1] == least + 1 else f"{least}-{LEVELS[i + 1] - 1}")
                   for i, least in enumerate(LEVELS)],
        "unit": unit,
    }  # fmt: skip


def _day_id(day: date) -> str:
    return f"d{day:%Y%m%d}"


# Capture times listed in a day's hover title on a URL's calendar.
_TITLE_TIMES = 12


def _times_title(count: int, stamps: list[str]) -> str:
    times = ", ".join(f"{ts[8:10]}:{ts[10:12]}:{ts[12:14]}" for ts in stamps[:_TITLE_TIMES])
    more = f" and {count - _TITLE_TIMES} more" if count > _TITLE_TIMES else ""
    return f"{_plural(count, 'capture')} (UTC): {times}{more}"


def capture_list(*, prefix: str, content: str, url: str, captures: list[Capture] | None = None,
                 within: str = "", tally: CaptureTally | None = None, start: str | None = None,
                 screenshots: Set[str] = frozenset()) -> str:
    """The capture calendar of ``url``: a bar per year, the twelve months of the year shown
    with each day's captures (archiver.replay.calendar), and a page of that year's captures (those
    whose timestamp starts with ``within``, from ``start`` on) by day with their times, with a
    link to the next page; a capture whose second is in ``screenshots`` shows its screenshot as a
    thumbnail. From ``tally``, or else from ``captures``."""
    if tally is None:
        tally = tally_captures(CapturesInMemory(captures or []), within, start)
    listed = tally.listed
    by_day: dict[str, list[str]] = {}
    for c in listed:
        by_day.setdefault(c.timestamp[:8], []).append(c.timestamp)

    def day_link(day: date) -> tuple[str, str]:
        digits = f"{day:%Y%m%d}"
        anchor = f"#{_day_id(day)}"
        # A day whose captures are all on this page links to them here, any other to its own list.
        whole = digits in by_day and len(by_day[digits]) == tally.per_day[day]
        href = anchor if whole else f"{prefix}/web/{digits}*/{url}{anchor}"
        return href, _times_title(tally.per_day[day], by_day.get(digits, []))

    chosen = day_of(within) if len(within) >= 8 else None
    parts = _calendar_parts(tally.per_day, tally.year, bar_href=lambda y: f"{prefix}/web/{y}*/{url}",
                            day_link=day_link, unit="capture", years_counted=tally.per_year,
                            chosen=chosen)
    host = urlsplit(url).netloc
    years = []
    for year, in_year in groupby(listed, key=lambda c: c.timestamp[:4]):
        days = []
        for day, in_day in groupby(in_year, key=lambda c: c.timestamp[:8]):
            items = [
                {
                    "href": archive_url(content, c.timestamp, "", url),
                    "time": f"{c.timestamp[8:10]}:{c.timestamp[10:12]}:{c.timestamp[12:14]}",
                    "title": f"{c.status if c.status is not None else '-'} {c.mime}"
                    + (" (unchanged: revisit)" if c.rectype == "revisit" else "")
                    + (f" {c.url}" if c.url != url else ""),
                    "revisit": c.rectype == "revisit",
                    "thumbnail": archive_url(content, c.timestamp, IDENTITY, SCREENSHOT + url)
                    if c.timestamp in screenshots else None,
                }
                for c in in_day
            ]
            days.append({"day": f"{day[:4]}-{day[4:6]}-{day[6:8]}", "id": f"d{day}", "captures": items})
        years.append({"year": year, "count": tally.matching, "days": days})
    following = tally.following
    next_when = None
    # After a second cut short, the next page starts at a bound past its captures, not a date.
    with contextlib.suppress(ValueError):
        next_when = _when(following) if following else None
    return _ENV.get_template("captures.html").render(
        prefix=prefix,
        query_url=url,
        url=url,
        within=within,
        all_link=list_url(prefix, url),
        total=tally.total,
        count=tally.matching,
        listed=len(listed),
        first=_when(tally.first) if tally.first else "",
        last=_when(tally.last) if tally.last else "",
        years=years,
        host=host,
        host_href=f"{prefix}/calendar/{host}",
        calendar=parts,
        next_href=f"{prefix}/web/{within}*{following}/{url}" if following else None,
        next_when=next_when,
        start_href=f"{prefix}/web/{within}*/{url}" if start else None,
    )


def host_calendar(*, prefix: str, content: str, host: str, tally: PageTally, year: int | None,
                  day: date | None, keep: int) -> str:
    """The calendar of a host: a bar per year and the twelve months of ``year`` (default: the
    latest with captures) with the pages (distinct URLs) captured each day; with ``day``, that
    day's captures (the first ``keep`` of them in URL order, by time)."""
    shown = year if year is not None else day.year if day is not None else latest_year(tally.pages)
    base = f"{prefix}/calendar/{host}"

    def day_link(one: date) -> tuple[str, str]:
        title = f"{_plural(tally.pages[one], 'page')}, {_plural(tally.captures[one], 'capture')}"
        return f"{base}?day={one:%Y%m%d}#day", title

    parts = _calendar_parts(tally.pages, shown, bar_href=lambda y: f"{base}?year={y}", day_link=day_link,
                            unit="page", years_counted=tally.pages_per_year, chosen=day)
    of_day = [
        {"href": archive_url(content, c.timestamp, "", c.url), "list": list_url(prefix, c.url), "url": c.url,
         "time": f"{c.timestamp[8:10]}:{c.timestamp[10:12]}:{c.timestamp[12:14]}",
         "status": c.status if c.status is not None else "-", "mime": c.mime,
         "revisit": c.rectype == "revisit"}
        for c in tally.of_day
    ]  # fmt: skip
    return _ENV.get_template("host_calendar.html").render(
        prefix=prefix, query_url="", host=host, keys=tally.keys, total=tally.total,
        first=_when(tally.first) if tally.first else "", last=_when(tally.last) if tally.last else "",
        day=f"{day:%Y-%m-%d}" if day is not None else None, of_day=of_day, more=tally.more, keep=keep,
        day_pages=tally.pages[day] if day is not None else 0, calendar=parts,
    )  # fmt: skip


@dataclass
class UrlRow:
    """One URL of a prefix listing: its captures' count and first and last timestamps."""

    url: str
    count: int
    first: str
    last: str


def url_row(captures: Iterable[Capture]) -> UrlRow:
    """The row of one URL key from its captures in time order (at least one), read once: its
    memory is the row's, however many captures the URL has."""
    found = iter(captures)
    first = last = next(found)
    count = 1
    for capture in found:
        count += 1
        last = capture
    return UrlRow(first.url, count, first.timestamp, last.timestamp)


def url_list(*, prefix: str, content: str, url: str, rows: list[UrlRow], truncated: bool) -> str:
    """The URLs under a prefix, each with its capture list and first and last captures."""
    shown = [
        {
            "url": row.url,
            "count": row.count,
            "list": list_url(prefix, row.url),
            "first": _when(row.first),
            "first_href": archive_url(content, row.first, "", row.url),
            "last": _when(row.last),
            "last_href": archive_url(content, row.last, "", row.url),
        }
        for row in rows
    ]
    return _ENV.get_template("urls.html").render(
        prefix=prefix, query_url=url + "*", url=url, rows=shown, truncated=truncated
    )


def error_page(*, prefix: str, title: str, message: str, url: str | None = None,
               why: Answer | None = None) -> str:
    """An error page; with ``url``, a link to its capture list; with ``why``, why the archive
    has no capture of it (archiver.replay.why)."""
    host = urlsplit(url).netloc if url else ""
    robots = why is not None and why.kind == "robots" and bool(host)
    return _ENV.get_template("error.html").render(
        prefix=prefix,
        query_url=url or "",
        title=title,
        message=message,
        url=url,
        list_href=list_url(prefix, url) if url else None,
        why=why,
        robots_host=host,
        robots_href=f"{prefix}/robots/{host}?at={why.at}" if robots and why else None,
    )
