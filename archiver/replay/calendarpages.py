"""The calendar of a host: ``GET /calendar/<host>[?year=YYYY | ?day=YYYYMMDD]``.

The pages of one host (``host[:port]``, both schemes, ``www.`` folded as the catalog's SURT keys
fold it) captured per day: a bar per year, the twelve months of the year asked for (default: the
latest with captures), each day shaded by how many distinct URLs were captured that day; ``day``
lists that day's captures (at most ``DAY_ROWS``). Read as one listing of the catalog's host range
(``CatalogStore.list(url, "host")``) through archiver.replay.scan, so within the service's row cap
and deadline; grouped by archiver.replay.calendar. A URL's own calendar is ``/web/*/<url>``
(archiver.replay.app).
"""

from __future__ import annotations

from datetime import date
from functools import partial

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from archiver.replay import pages
from archiver.replay.calendar import PageTally, day_of, tally_pages
from archiver.replay.robotspages import origin_of
from archiver.replay.scan import Scan
from archiver.store.catalogkeys import rendering_of

# Captures listed for one day (the URL lists hold as many).
DAY_ROWS = 1000


def _year(text: str) -> int:
    if len(text) != 4 or not text.isascii() or not text.isdigit() or text == "0000":
        raise ValueError(f"bad year {text[:20]!r}: give four digits, e.g. ?year=2026")
    return int(text)


def _day(text: str) -> date:
    try:
        if len(text) != 8 or not text.isascii() or not text.isdigit():
            raise ValueError
        return day_of(text)
    except ValueError:
        raise ValueError(f"bad day {text[:20]!r}: give a date as YYYYMMDD, e.g. ?day=20261122") from None


def _host_tally(origin: str, day: date | None, scan: Scan) -> PageTally:
    """The host's pages: the records of a page's rendering (its screenshot and text, listed
    right after it) are not pages of their own, nor is a capture that is not content (a
    challenge, docs/gatekeepers.md)."""
    captures = scan.rows(scan.catalog.list(origin + "/", "host"))
    return tally_pages((c for c in captures if rendering_of(c.url) is None and c.is_content), day,
                       DAY_ROWS)


async def host_calendar(request: Request) -> Response:
    origin = origin_of(request.path_params["host"])
    params = request.query_params
    year = _year(params["year"]) if "year" in params else None
    day = _day(params["day"]) if "day" in params else None
    if year is not None and day is not None and day.year != year:
        raise ValueError("year and day name different years: give one of them")
    archive = request.app.state.archive
    tally = await archive.scanner.collect(partial(_host_tally, origin, day))
    replay = archive.config.replay
    page = pages.host_calendar(prefix=replay.base_url, content=replay.content_origin,
                               host=origin.partition("://")[2], tally=tally, year=year, day=day,
                               keep=DAY_ROWS)
    return HTMLResponse(page, status_code=200 if tally.total else 404)


routes = [Route("/calendar/{host}", host_calendar)]
