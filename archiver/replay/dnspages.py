"""DNS history pages: ``GET /dns/<host>[?at=DATE]`` as HTML, or JSON.

JSON is chosen by ``?format=json``, or, without ``format``, by an Accept header that ranks
``application/json`` above ``text/html`` (``curl -H 'Accept: application/json'``); browsers, and
``*/*``, get HTML. The page shows every row ever recorded about the host's canonical hosts, what
the name resolves to now, and with ``at`` (1-14 digits or ISO, archiver.web.timestamps.parse_date)
what it resolved to at that second.
"""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, PackageLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from archiver.store.models import DnsRow, Resolved
from archiver.web.timestamps import parse_date, to_datetime, to_iso
from archiver.web.urls import normalize, origin_parts, split_origin

_templates = Environment(loader=PackageLoader("archiver.replay", "templates"), autoescape=True)


def host_name(raw: str) -> str:
    """The host name as the history stores it (lower-case, IDNA, no trailing dot); ValueError if none."""
    url = normalize(f"http://{raw}/") if raw and "/" not in raw else None
    if url is None or split_origin(url)[1] != "/" or url.count(":") != 1:
        raise ValueError(f"not a host name: {raw!r}")
    host = origin_parts(split_origin(url)[0])[1]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host
    raise ValueError(f"{raw!r} is an address: the DNS history is kept by host name")


def wants_json(request: Request) -> bool:
    """``format`` if given (json or html), else whether Accept ranks application/json above text/html."""
    fmt = request.query_params.get("format")
    if fmt is not None:
        if fmt not in ("json", "html"):
            raise ValueError(f"unknown format {fmt!r}: use json or html")
        return fmt == "json"
    ranks = _accept(request.headers.get("accept", ""))
    return ranks.get("application/json", 0.0) > ranks.get("text/html", 0.0)


def _accept(header: str) -> dict[str, float]:
    """The q-value of each media type named outright in an Accept header (RFC 9110 section 12.5.1)."""
    out: dict[str, float] = {}
    for item in header.split(","):
        kind, *params = (p.strip() for p in item.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        out[kind.lower()] = max(out.get(kind.lower(), 0.0), q)
    return out


def _time(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def row_json(row: DnsRow) -> dict[str, Any]:
    """A row for JSON: dates as RFC 3339 UTC text (to the second) and as the stored unix seconds."""
    return {
        "value": row.value,
        "type": row.type,
        "entered": _time(row.entered),
        "superseded": _time(row.superseded),
        "entered_unix": row.entered,
        "superseded_unix": row.superseded,
        "id": row.id,
        "source": row.source,
    }


def resolved_json(found: Resolved | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "canonical": found.canonical,
        "addresses": list(found.addresses),
        "aliases": list(found.aliases),
        "id": found.id,
    }


async def dns_page(request: Request) -> Response:
    try:
        as_json = wants_json(request)
    except ValueError as exc:
        return _error(400, str(exc), as_json=False)
    try:
        host = host_name(request.path_params["host"])
        at_text = request.query_params.get("at")
        at = parse_date(at_text) if at_text else None
    except ValueError as exc:
        return _error(400, str(exc), as_json=as_json)
    history = request.app.state.archive.dns()
    if history is None:
        return _error(404, "this archive has no DNS history yet", as_json=as_json)
    rows = history.history(host)
    if not rows:
        return _error(404, f"no DNS history for {host}", as_json=as_json)
    current = history.current(host)
    then = history.at(host, to_datetime(at).timestamp()) if at else None
    body: dict[str, Any] = {
        "host": host,
        "current": resolved_json(current),
        "rows": [row_json(r) for r in rows],
    }
    if at:
        body["at"] = {"date": to_iso(at), "resolved": resolved_json(then)}
    headers = {"Vary": "Accept"}
    if as_json:
        return JSONResponse(body, headers=headers)
    page = _templates.get_template("dns.html").render(
        host=host,
        at=at and to_iso(at),
        at_text=at_text or "",
        then=then,
        current=current,
        rows=rows,
        time=_time,
    )
    return HTMLResponse(page, headers=headers)


def _error(status: int, message: str, *, as_json: bool) -> Response:
    if as_json:
        return JSONResponse({"error": message}, status_code=status, headers={"Vary": "Accept"})
    page = _templates.get_template("dns_error.html").render(status=status, message=message)
    return HTMLResponse(page, status_code=status, headers={"Vary": "Accept"})


routes = [Route("/dns/{host}", dns_page)]
