"""The CDX API route: ``GET /cdx`` (pywb's CDX server dialect; see archiver.replay.cdxquery, docs/cdx.md).

The listing runs as a :mod:`~archiver.replay.scan` listing: off the event loop, sharing the catalog
with other requests every few hundred rows examined, within the service's row cap and deadline.
A URL with no capture of its own (``matchType=exact``) is looked up by the fuzzy rules as replay
looks it up (archiver.replay.lookups.fuzzy, with ``replay.fuzzy``): its answer is then the
captures of the URL the rule matched, each marked with a ``fuzzy`` field naming the rule.
The answer is sent once complete (at most ``limit`` lines, as closest and reverse already held):
a query stopped by a limit is a 400 or 503 with the reason, never a listing silently cut short.
Its memory is that of its lines, whatever the rows examined; they are sent a batch at a time,
never joined into one more copy of the answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from functools import partial

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from archiver.replay import lookups
from archiver.replay.cdxquery import CdxQuery, marked, parse_query, render, select
from archiver.replay.scan import Scan, ScanLimit
from archiver.store.models import Capture
from archiver.web.fuzzy import DEFAULT_RULES, FuzzyRule
from archiver.web.timestamps import from_datetime

# Lines encoded and sent at a time.
_BATCH = 1000


def _lines(query: CdxQuery, rules: tuple[FuzzyRule, ...], scan: Scan) -> list[str]:
    listed = False

    def listing(url: str) -> Iterator[Capture]:
        nonlocal listed
        for capture in scan.rows(scan.catalog.list(url, query.match)):
            listed = True
            yield capture

    lines = [render(query, row) for row in select(query, listing(query.url))]
    if listed or query.match != "exact" or not rules:
        return lines
    at = query.closest or from_datetime(datetime.now(UTC))  # else the latest capture
    matched = lookups.fuzzy(scan, query.url, at, rules)
    if matched is None:
        return lines
    capture, rule = matched
    return [render(query, marked(row, rule)) for row in select(query, listing(capture.url))]


async def cdx(request: Request) -> Response:
    archive = request.app.state.archive
    try:
        query = parse_query(request.query_params.multi_items())
        settings = archive.config.replay
        rules = settings.fuzzy_rules + DEFAULT_RULES if settings.fuzzy else ()
        lines = await archive.scanner.collect(partial(_lines, query, rules))
    except ValueError as exc:
        return PlainTextResponse(f"{exc}\n", status_code=400)
    except ScanLimit as exc:
        retry = None if exc.retry_after is None else {"Retry-After": str(exc.retry_after)}
        return PlainTextResponse(f"{exc}\n", status_code=exc.status, headers=retry)
    return StreamingResponse(_batches(lines), media_type=query.content_type)


async def _batches(lines: list[str]) -> AsyncIterator[bytes]:
    """The answer's lines, _BATCH at a time, each batch let go once sent."""
    for start in range(0, len(lines), _BATCH):
        batch = lines[start:start + _BATCH]
        lines[start:start + _BATCH] = [""] * len(batch)
        yield "".join(batch).encode()


routes = [Route("/cdx", cdx)]
