"""robots.txt over time: ``GET /robots/<host>[?at=DATE]`` as HTML, or JSON (as the DNS pages
choose: ``?format=json`` or the Accept header).

The same answer as ``archiver robots HOST`` (archiver.store.robotstxt): the robots.txt in force at
the date (default: now), what it meant, its text, and every version the archive captured, each
linked to its capture. A replayed page's banner links here at its own date.
"""

from __future__ import annotations

from datetime import UTC, datetime

from jinja2 import Environment, PackageLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from archiver.replay.dnspages import wants_json
from archiver.replay.rewrite import archive_url
from archiver.replay.scan import Scan
from archiver.store import robotstxt
from archiver.web.timestamps import from_datetime, parse_date, to_iso
from archiver.web.urls import normalize, split_origin

_templates = Environment(loader=PackageLoader("archiver.replay", "templates"), autoescape=True)


def origin_of(host: str) -> str:
    """``http://<host>`` for a host name with an optional port; ValueError if it is not one."""
    url = normalize(f"http://{host}/") if host and "/" not in host else None
    if url is None or split_origin(url)[1] != "/":
        raise ValueError(f"not a host name: {host!r}")
    return split_origin(url)[0]


async def robots_page(request: Request) -> Response:
    as_json = wants_json(request)
    origin = origin_of(request.path_params["host"])
    at_text = request.query_params.get("at")
    at = parse_date(at_text, upper=True) if at_text else from_datetime(datetime.now(UTC))
    archive = request.app.state.archive

    def read(scan: Scan) -> list[robotstxt.RobotsCapture]:
        return robotstxt.history(scan.catalog, archive.warcs, origin, scan.rows)

    found = await archive.scanner.collect(read)
    current = robotstxt.governing(found, at)
    changes = [r for r in found if r.changed]
    headers = {"Vary": "Accept"}
    status = 200 if found else 404
    if as_json:
        return JSONResponse({
            "origin": origin, "at": at,
            "in_force": None if current is None else current.to_json(text=True),
            "changes": [r.to_json(text=False) for r in changes], "captures": len(found)},
            status_code=status, headers=headers)
    content = archive.config.replay.content_origin
    page = _templates.get_template("robots.html").render(
        origin=origin, at=to_iso(at), at_text=at_text or "", current=current, changes=changes,
        captures=len(found), iso=to_iso,
        link=lambda r: archive_url(content, r.capture.timestamp, "id_", r.capture.url))
    return HTMLResponse(page, status_code=status, headers=headers)


routes = [Route("/robots/{host}", robots_page)]
