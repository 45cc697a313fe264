"""The replay service's own pages: banner, capture list, URL list, home page, error pages.

Rendered from Jinja2 templates in ``templates/`` with autoescaping on, so every archived value
(URLs, statuses, mime types) is escaped. Pure: captures in, HTML text out. ``prefix`` is where the
replay's own pages are (its base URL), ``content`` the origin of archived content (see
archiver.replay.app): links to captures go there.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from urllib.parse import urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined

from archiver.replay.rewrite import archive_url
from archiver.replay.why import Answer
from archiver.store.catalog import Capture
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


def banner(
    *, prefix: str, content: str, url: str, timestamp: str, prev: str | None, next: str | None, count: int
) -> str:
    """The strip shown atop a replayed page: capture date, previous and next captures, the list.

    Inline styles only (reset with ``all: initial``), so page stylesheets hardly reach it and
    it needs nothing from the page's origin.
    """
    return _ENV.get_template("banner.html").render(
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
        robots_href=f"{prefix}/robots/{urlsplit(url).netloc}?at={timestamp}",
    )


def home(*, prefix: str) -> str:
    return _ENV.get_template("home.html").render(prefix=prefix)


def capture_list(*, prefix: str, content: str, url: str, captures: list[Capture], within: str = "") -> str:
    """Every capture of ``url`` (in time order) grouped by year, then by day."""
    years = []
    for year, in_year in groupby(captures, key=lambda c: c.timestamp[:4]):
        days = []
        of_year = list(in_year)
        for day, in_day in groupby(of_year, key=lambda c: c.timestamp[:8]):
            items = [
                {
                    "href": archive_url(content, c.timestamp, "", url),
                    "time": f"{c.timestamp[8:10]}:{c.timestamp[10:12]}:{c.timestamp[12:14]}",
                    "title": f"{c.status if c.status is not None else '-'} {c.mime}"
                    + (" (unchanged: revisit)" if c.rectype == "revisit" else "")
                    + (f" {c.url}" if c.url != url else ""),
                    "revisit": c.rectype == "revisit",
                }
                for c in in_day
            ]
            days.append({"day": f"{day[:4]}-{day[4:6]}-{day[6:8]}", "captures": items})
        years.append({"year": year, "count": len(of_year), "days": days})
    return _ENV.get_template("captures.html").render(
        prefix=prefix,
        query_url=url,
        url=url,
        within=within,
        all_link=list_url(prefix, url),
        count=len(captures),
        first=_when(captures[0].timestamp) if captures else "",
        last=_when(captures[-1].timestamp) if captures else "",
        years=years,
    )


@dataclass
class UrlRow:
    """One URL of a prefix listing: its captures' count and first and last timestamps."""

    url: str
    count: int
    first: str
    last: str


def url_row(captures: list[Capture]) -> UrlRow:
    """The row of one URL key from its captures in time order."""
    return UrlRow(captures[0].url, len(captures), captures[0].timestamp, captures[-1].timestamp)


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
