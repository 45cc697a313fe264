"""The replay web service as a Starlette app: Wayback-style replay, capture lists, Memento.

Routes (see the home page for a summary):

- ``/web/<timestamp><modifier>/<url>``: the capture closest to the timestamp (1 to 14 digits,
  padded as pywb does); when it is not exactly that timestamp, a 302 to the exact one, as the
  Wayback Machine does. Archived status, headers (see :func:`rewrite.replay_headers`) and body
  are served; HTML and CSS are rewritten into the archive; ``id_`` serves the archived bytes.
- ``/web/*/<url>``, ``/web/<digits>*/<url>``, ``/web/*/<prefix>*``: capture list, URL list.
- ``/web/<url>``: Memento TimeGate; ``/timemap/link/<url>``, ``/timemap/json/<url>``: TimeMaps.
- ``/``, ``/search``: home page with a search box; plus the routes of cdx, dnspages, statuspages.

The archived URL is read from the raw request path plus the query string, so its escapes reach
the catalog as sent. Catalog and WARC reads run on the event loop thread: both take well under a
millisecond for one capture, and the catalog is then only ever used from one thread.

Every response carries a Content-Security-Policy that lets pages load only from the replay
origin, so a replayed page cannot fetch from the live web. ValueError from bad input becomes a
400 with its message; an unknown URL or capture a 404 page linking to the capture list.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from itertools import groupby
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from archiver import urls
from archiver.catalog import Capture
from archiver.config import Config
from archiver.fetch import decode_body
from archiver.logs import event
from archiver.replay import cdx, dnspages, memento, pages, statuspages
from archiver.replay.archive import ReplayArchive
from archiver.replay.rewrite import (
    BANNERED,
    IDENTITY,
    WebTarget,
    archive_url,
    charset_of,
    header,
    parse_head,
    parse_web_path,
    refresher,
    replay_headers,
    requested_url,
    rewrite_css,
    rewrite_html,
)
from archiver.timestamps import parse_date, to_datetime
from archiver.warcindex import Stored, WarcError

log = logging.getLogger("archiver.replay")

# Everything from the replay origin (inline scripts and styles included, as archived pages need
# them), nothing from elsewhere: the policy pywb's and Webrecorder's proxy modes use to keep a
# replayed page off the live web. form-action does not fall back to default-src.
CSP = "default-src 'self' 'unsafe-inline' 'unsafe-eval' data: blob:; form-action 'self'"
# URLs shown by a prefix listing (the Wayback Machine's URL listing pages hold a few hundred).
PREFIX_ROWS = 1000
_HTML = frozenset(("text/html", "application/xhtml+xml"))
_CODINGS = frozenset(("gzip", "x-gzip", "deflate", "br", "identity"))
_NO_BODY = frozenset((204, 304))
_LATEST = "99991231235959"


def create_app(config: Config) -> Starlette:
    """The replay app over the archive of ``config`` (its catalog must exist)."""
    archive = ReplayArchive(config)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            archive.close()

    routes = [
        Route("/", home),
        Route("/search", search),
        Route("/web/{rest:path}", web),
        Route("/timemap/link/{rest:path}", timemap_link),
        Route("/timemap/json/{rest:path}", timemap_json),
        *cdx.routes,
        *dnspages.routes,
        *statuspages.routes,
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(_SecurityHeaders)],
        exception_handlers={ValueError: _bad_request, WarcError: _unreadable, 404: _not_found},
    )
    app.state.archive = archive
    return app


class _SecurityHeaders:
    """Adds the Content-Security-Policy to every HTTP response."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_policy(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (b"content-security-policy", CSP.encode())]
            await send(message)

        await self.app(scope, receive, send_with_policy)


# --- helpers ---------------------------------------------------------------------------------


def _archive(request: Request) -> ReplayArchive:
    return request.app.state.archive


def _prefix(request: Request) -> str:
    """Path prefix of the app (empty unless mounted under a root path)."""
    return request.scope.get("root_path", "").rstrip("/")


def _base(request: Request) -> str:
    """Absolute prefix for Memento links, which are read out of the page's context."""
    return str(request.base_url).rstrip("/")


def _rest(request: Request, route: str) -> str:
    """What follows ``route`` in the raw request path, with the query string: the archived URL."""
    raw = request.scope.get("raw_path") or request.scope["path"].encode("utf-8")
    path = raw.decode("utf-8", "replace")
    root = request.scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    rest = path[len(route) :] if path.startswith(route) else request.path_params.get("rest", "")
    query = request.scope.get("query_string", b"").decode("utf-8", "replace")
    return f"{rest}?{query}" if query else rest


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status)


def _missing(request: Request, url: str, message: str) -> HTMLResponse:
    page = pages.error_page(prefix=_prefix(request), title="Not in the archive", message=message, url=url)
    return _html(page, 404)


def _redirect(location: str, headers: dict[str, str] | None = None) -> RedirectResponse:
    return RedirectResponse(location, status_code=302, headers=headers)


def _self_redirect(capture: Capture, url: str) -> bool:
    """A redirect to ``url`` itself, as ``http://x/`` -> ``https://x/`` or ``/dir`` -> ``/dir/``
    under one SURT key: replaying it for ``url`` would loop (pywb skips these too)."""
    return capture.redirect is not None and capture.redirect == url


def closest(captures: list[Capture], at: str, url: str) -> int | None:
    """Index of the capture nearest to ``at`` (ties to the earlier, as Catalog.closest), skipping
    redirects of ``url`` to itself; captures in time order."""
    stamps = [c.timestamp for c in captures]
    right = bisect.bisect_right(stamps, at)
    left = right - 1
    while left >= 0 and _self_redirect(captures[left], url):
        left -= 1
    while right < len(captures) and _self_redirect(captures[right], url):
        right += 1
    if left < 0:
        return right if right < len(captures) else None
    if right >= len(captures):
        return left
    target = to_datetime(at)
    before = target - to_datetime(stamps[left])
    return left if before <= to_datetime(stamps[right]) - target else right


def _mementos(request: Request, captures: list[Capture], url: str) -> list[tuple[str, str]]:
    """(URI-M, timestamp) per distinct capture second, in time order."""
    base = _base(request)
    seconds = sorted({c.timestamp for c in captures})
    return [(archive_url(base, ts, "", url), ts) for ts in seconds]


def _memento_links(request: Request, url: str, mementos: list[tuple[str, str]], current: int | None) -> str:
    base = _base(request)
    return memento.link_header(
        original=url,
        timegate=f"{base}/web/{url}",
        timemap=f"{base}/timemap/link/{url}",
        mementos=mementos,
        current=current,
    )


# --- routes ----------------------------------------------------------------------------------


async def home(request: Request) -> Response:
    return _html(pages.home(prefix=_prefix(request)))


async def search(request: Request) -> Response:
    """The home page's form: a URL (``*`` at the end for a prefix) and an optional date."""
    params = request.query_params
    text = params.get("url", "").strip()
    if not text:
        raise ValueError("give a URL to look for: /search?url=example.org[&date=2026-11-22]")
    prefix = _prefix(request)
    if text.endswith("*"):
        return _redirect(pages.list_url(prefix, requested_url(text[:-1])) + "*")
    url = requested_url(text)
    date = params.get("date", "").strip()
    if not date:
        return _redirect(pages.list_url(prefix, url))
    return _redirect(archive_url(prefix, parse_date(date), "", url))


async def web(request: Request) -> Response:
    target = parse_web_path(_rest(request, "/web/"))
    if target.kind == "timegate":
        return _timegate(request, target.url)
    if target.kind == "prefix":
        return _url_list(request, target.url)
    captures = _archive(request).catalog.captures(target.url)
    if target.kind == "list":
        return _capture_list(request, target, captures)
    return _memento(request, target, captures)


def _capture_list(request: Request, target: WebTarget, captures: list[Capture]) -> Response:
    if target.within:
        captures = [c for c in captures if c.timestamp.startswith(target.within)]
    page = pages.capture_list(
        prefix=_prefix(request), url=target.url, captures=captures, within=target.within
    )
    return _html(page, 200 if captures else 404)


def _url_list(request: Request, url: str) -> Response:
    rows: list[pages.UrlRow] = []
    truncated = False
    for _, group in groupby(_archive(request).catalog.list(url, "prefix"), key=lambda c: c.urlkey):
        if len(rows) == PREFIX_ROWS:
            truncated = True
            break
        rows.append(pages.url_row(list(group)))
    if not rows:
        return _missing(request, url, f"No URL under {url} is in the archive.")
    return _html(pages.url_list(prefix=_prefix(request), url=url, rows=rows, truncated=truncated))


def _timegate(request: Request, url: str) -> Response:
    """RFC 7089 section 4.1 (pattern 2.2): 302 to the memento closest to Accept-Datetime, the
    latest one without it."""
    wanted = request.headers.get("accept-datetime")
    at = memento.parse_http_date(wanted) if wanted is not None else _LATEST
    captures = _archive(request).catalog.captures(url)
    index = closest(captures, at, url)
    if index is None:
        response = _missing(request, url, f"{url} is not in the archive.")
        response.headers["Vary"] = "accept-datetime"
        return response
    mementos = _mementos(request, captures, url)
    links = _memento_links(request, url, mementos, None)
    location = archive_url(_prefix(request), captures[index].timestamp, "", url)
    return _redirect(location, {"Vary": "accept-datetime", "Link": links})


def _timemap_captures(request: Request, route: str) -> tuple[str, list[tuple[str, str]]]:
    url = requested_url(_rest(request, route))
    return url, _mementos(request, _archive(request).catalog.captures(url), url)


async def timemap_link(request: Request) -> Response:
    url, mementos = _timemap_captures(request, "/timemap/link/")
    if not mementos:
        return PlainTextResponse(f"{url} is not in the archive\n", status_code=404)
    base = _base(request)
    body = memento.link_timemap(
        original=url, timegate=f"{base}/web/{url}", timemap=f"{base}/timemap/link/{url}", mementos=mementos
    )
    return Response(body, media_type=memento.LINK_FORMAT)


async def timemap_json(request: Request) -> Response:
    url, mementos = _timemap_captures(request, "/timemap/json/")
    if not mementos:
        return PlainTextResponse(f"{url} is not in the archive\n", status_code=404)
    base = _base(request)
    body = memento.json_timemap(
        original=url,
        timegate=f"{base}/web/{url}",
        timemap=f"{base}/timemap/link/{url}",
        timemap_json=f"{base}/timemap/json/{url}",
        mementos=mementos,
    )
    return Response(body, media_type="application/json")


def _memento(request: Request, target: WebTarget, captures: list[Capture]) -> Response:
    assert target.timestamp is not None
    index = closest(captures, target.timestamp, target.url)
    if index is None:
        return _missing(request, target.url, f"{target.url} is not in the archive.")
    capture = captures[index]
    if not target.exact or capture.timestamp != target.timestamp:
        return _redirect(archive_url(_prefix(request), capture.timestamp, target.modifier, target.url))
    archive = _archive(request)
    stored = archive.record(capture)
    payload = stored
    if capture.rectype == "revisit":
        found = archive.original(capture, stored)
        if found is None:
            message = (
                f"The capture of {target.url} at {capture.timestamp} records an unchanged payload, "
                "but the capture holding that payload is not in the archive."
            )
            return _missing(request, target.url, message)
        payload = found[1]
    mementos = _mementos(request, captures, target.url)
    current = [ts for _, ts in mementos].index(capture.timestamp)
    banner = None
    if target.modifier in BANNERED:
        banner = pages.banner(
            prefix=_prefix(request),
            url=target.url,
            timestamp=capture.timestamp,
            prev=mementos[current - 1][1] if current > 0 else None,
            next=mementos[current + 1][1] if current + 1 < len(mementos) else None,
            count=len(mementos),
        )
    head = stored if stored.http_head else payload
    response = _replay(request, target, capture, head, payload.payload, banner)
    response.headers["Memento-Datetime"] = memento.http_date(capture.timestamp)
    response.headers["Link"] = _memento_links(request, target.url, mementos, current)
    return response


def _replay(
    request: Request, target: WebTarget, capture: Capture, head: Stored, body: bytes, banner: str | None
) -> Response:
    """The archived response: status, headers and body, rewritten as the modifier asks; the
    banner goes into HTML pages that are not redirects."""
    status, headers = parse_head(head.http_head)
    prefix = _prefix(request)
    url = urls.normalize(capture.url) or target.url
    content_type = header(headers, "content-type")
    mime = (content_type or capture.mime).split(";")[0].strip().lower()
    coding = header(headers, "content-encoding") or ""
    codings = {c.strip().lower() for c in coding.split(",") if c.strip()}
    rewritten = False
    if target.modifier != IDENTITY and (mime in _HTML or mime == "text/css") and codings <= _CODINGS:
        decoded = decode_body(body, coding, _archive(request).config.crawl.max_decoded_size)
        charset = charset_of(content_type)
        common = {"url": url, "timestamp": capture.timestamp, "prefix": prefix, "charset": charset}
        if mime == "text/css":
            body = rewrite_css(decoded, **common)
        else:
            if status is not None and 300 <= status < 400:
                banner = None
            body = rewrite_html(decoded, banner=banner, **common)
        rewritten = True
    location = None
    if capture.redirect is not None:
        location = archive_url(prefix, capture.timestamp, target.modifier, capture.redirect)
    served = replay_headers(
        headers, rewritten=rewritten, location=location, refresh=refresher(url, capture.timestamp, prefix)
    )
    if status is None or not 200 <= status <= 599:
        status = 200
    response = Response(b"" if status in _NO_BODY else body, status_code=status)
    response.raw_headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in served]
    return response


# --- errors ----------------------------------------------------------------------------------


async def _bad_request(request: Request, exc: Exception) -> Response:
    return PlainTextResponse(f"400 Bad Request: {exc}\n", status_code=400)


async def _unreadable(request: Request, exc: Exception) -> Response:
    event(log, logging.ERROR, "replay-unreadable-record", url=str(request.url), error=str(exc))
    page = pages.error_page(
        prefix=_prefix(request),
        title="Capture unreadable",
        message="The catalog lists this capture, but its WARC record cannot be read.",
    )
    return _html(page, 404)


async def _not_found(request: Request, exc: Exception) -> Response:
    detail = exc.detail if isinstance(exc, HTTPException) else "Not Found"
    page = pages.error_page(
        prefix=_prefix(request), title="Not found", message=f"{request.url.path}: {detail}"
    )
    return _html(page, 404)
