"""The CDX API route: ``GET /cdx`` (pywb's CDX server dialect; see archiver.replay.cdxquery, docs/cdx.md).

The lines are streamed as they are read, a batch at a time, with a checkpoint between batches so
that a long listing shares the event loop with other requests. Catalog reads stay on the event loop
thread (sub-millisecond SQLite pages), as every other route does, which keeps the catalog used
from one thread only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anyio.lowlevel
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from archiver.replay.cdxquery import parse_query, render, select

# Lines per chunk written: about 25 KiB of CDXJ.
_BATCH = 100


async def cdx(request: Request) -> Response:
    archive = request.app.state.archive
    try:
        query = parse_query(request.query_params.multi_items())
        listing = archive.catalog.list(query.url, query.match)
    except ValueError as exc:
        return PlainTextResponse(f"{exc}\n", status_code=400)
    lines = (render(query, row) for row in select(query, listing))
    return StreamingResponse(_batches(lines), media_type=query.content_type)


async def _batches(lines: Iterator[str]) -> AsyncIterator[str]:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == _BATCH:
            yield "".join(batch)
            batch.clear()
            await anyio.lowlevel.checkpoint()
    if batch:
        yield "".join(batch)


routes = [Route("/cdx", cdx)]
