"""The replay web service as two Starlette apps: the replay's own pages, and archived content.

**Two origins.** Archived pages run their own scripts, and an archive crawls hostile pages by
design. :func:`create_apps` therefore makes two apps served on two listeners: the replay's own
pages at ``replay.base_url`` (home, search, capture and URL lists, the Memento TimeGate and
TimeMaps, ``/cdx``, ``/status``, ``/metrics``, ``/dns/``), and archived content alone at
``replay.content_origin`` (``/web/<timestamp><modifier>/<url>``; anything else there is a 404, and
the list and TimeGate forms of ``/web/`` redirect to the base URL). A replayed page therefore
cannot read the replay's pages: another origin, and none of them sends CORS headers.

**Sandboxed content.** One content origin alone would still let every archived site read and
poison every other site's cookies and storage, so every archived response also carries a CSP
``sandbox`` without ``allow-same-origin``: each replayed document runs in an opaque origin of its
own, with no cookies or storage to read or share. The trade-off: pages whose scripts need storage
(logins, consent banners, some single-page apps) replay without it. Every rewritten HTML document
loads the client script first (``/_archiver/client.js``, archiver.replay.rewrite and client.js):
it sends what the page's scripts build (fetch, XMLHttpRequest, new elements, history, window.open)
into the archive at the page's date and keeps document.cookie in memory; scripts' location writes
and postMessage calls are rewritten on the server (archiver.replay.scripts). Archived content
answers replayed pages' CORS requests, without credentials (see _ReadableByArchivedPages), so a
page's fetch() of its own JSON reads the archived answer. The client script runs inside hostile
pages, which can undo it: it keeps honest pages in the archive, while the CSP below keeps every
page's subresources off the live web. What stays open: a page can change its own banner (part of
its document) and, with ``history.replaceState``, the path its tab shows (Chromium allows it in
opaque origins), so it can pass itself off as another capture; pywb's framed mode, the banner in a
top frame on the replay's own origin, would close that; and a navigation the client script does
not see (an aliased location object) can leave the archive, as no CSP directive governs a
document's own navigation.

Every response carries ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and a
CSP with ``frame-ancestors`` (``'none'`` for the replay's pages, ``'self'`` for content, whose
framesets frame each other). Absolute URLs (Link headers, TimeMaps, redirects between the
origins) are built from the configured base URL and content origin, never from a request's
``Host`` header.

Content routes: ``/web/<timestamp><modifier>/<url>``: the capture closest to the timestamp (1 to
14 digits, padded as pywb does); when it is not exactly that timestamp, a 302 to the exact one, as
the Wayback Machine does. Archived status, headers (see :func:`rewrite.replay_headers`) and body
are served; HTML and CSS are rewritten into the archive; ``id_`` serves the archived bytes. A
document of more than 16 KiB is rewritten in a worker process (archiver.replay.workers: a 503
when they and their queue are full); one larger than ``replay.max_rewrite_size`` once its content
codings are undone, or whose codings replay does not undo, is served as archived with an
``X-Archiver-Not-Rewritten`` header saying why. An HTML page's banner shows the dates of the
captures its embeds are served from, which a final ``coherence=json`` query field returns as JSON
instead of the page (archiver.replay.coherence; the embeds are looked up in one listing, at most
``coherence.EMBED_LIMIT`` of them).

App routes: ``/web/*/<url>``, ``/web/<digits>*/<url>``, ``/web/*/<prefix>*``: capture calendar
(archiver.replay.calendar: a bar per year, the days of the year the digits name or else of the
latest, a page of the captures the digits start; ``/web/<digits>*<timestamp>/<url>`` the page
from that timestamp on), URL list; ``/web/<url>``: Memento TimeGate; ``/timemap/link/<url>``,
``/timemap/json/<url>``: TimeMaps, paged (``/timemap/<form>/<timestamp>/<url>``: the page from a
date on); ``/web/<timestamp>/<url>`` redirects to the content origin; ``/``, ``/search``; plus the
routes of cdx, dnspages, statuspages, calendarpages (``/calendar/<host>``).

The archived URL is read from the raw request path plus the query string, so its escapes reach
the catalog as sent. Catalog reads go through archiver.replay.scan (off the event loop, within a
row cap and a deadline; a capture's replay by lookups, ahead of listings) and read what they show
by index seeks (archiver.replay.lookups), whatever the URL's captures; WARC records are opened in
a worker thread and their payloads streamed a piece at a time (archiver.replay.archive).
ValueError from bad input becomes a 400 with its message; an unknown URL or capture a 404 page
linking to the capture list. A capture replay cannot serve for now is a 503 with ``Retry-After``,
never a 404: its record when the object store is away, and a URL whose only captures wait in a
bundle its crawler has not shipped yet (shared stores; archiver.replay.archive).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from functools import partial
from importlib import resources
from itertools import groupby
from typing import Any
from urllib.parse import urlencode

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from archiver.config import Config, public_url
from archiver.logs import event
from archiver.replay import (
    calendarpages,
    cdx,
    coherence,
    dnspages,
    lookups,
    memento,
    pages,
    robotspages,
    searchpages,
    statuspages,
)
from archiver.replay.archive import ReplayArchive
from archiver.replay.calendar import LISTED, CaptureTally
from archiver.replay.lookups import Around
from archiver.replay.rewrite import (
    BANNERED,
    CSS,
    HTML,
    IDENTITY,
    PAGE,
    SCRIPT_FILE,
    NotRewritten,
    PageEmbeds,
    Rewritten,
    WebTarget,
    archive_url,
    header,
    pad_timestamp,
    parse_head,
    parse_web_path,
    refresher,
    replay_headers,
    requested_url,
    rewrite_document,
)
from archiver.replay.scan import Scan, ScanLimit
from archiver.replay.workers import Busy, WorkerLost
from archiver.store.bundles import NOT_MODIFIED_PROFILE
from archiver.store.models import Capture
from archiver.store.objectstore import ObjectStoreUnavailable
from archiver.store.warcindex import PIECE, OpenRecord, WarcError
from archiver.web import urls
from archiver.web.fuzzy import DEFAULT_RULES, JSONP_RULE, FuzzyRule, callback_names
from archiver.web.http import (
    UNSATISFIABLE,
    ByteRange,
    CodingError,
    content_codings,
    decode_body,
    media_type,
    parse_range,
)
from archiver.web.timestamps import parse_date

log = logging.getLogger("archiver.replay")

# Archived content: an opaque origin per document (no allow-same-origin), scripts, forms, popups
# and dialogs allowed, top-level navigation only on a click (a frameset's target=_top links).
# Everything from the content origin (inline scripts and styles included, as archived pages need
# them), nothing from elsewhere: the policy pywb's and Webrecorder's proxy modes use to keep a
# replayed page off the live web. form-action does not fall back to default-src.
SANDBOX = (
    "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-modals "
    "allow-downloads allow-top-navigation-by-user-activation"
)
CSP = (
    f"{SANDBOX}; default-src 'self' 'unsafe-inline' 'unsafe-eval' data: blob:; form-action 'self'; "
    "frame-ancestors 'self'"
)
# The replay's own pages: no scripts at all, inline styles only, never framed; images from the
# content origin too (``{content}``: the capture list's screenshot thumbnails, inert as images).
APP_CSP = (
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: {content}; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
COMMON_HEADERS = (("x-content-type-options", "nosniff"), ("referrer-policy", "no-referrer"))
# The client script every rewritten HTML document loads first (client.js), at a URL that names
# its version, so browsers may keep it for good.
CLIENT_SCRIPT = resources.files("archiver.replay").joinpath("client.js").read_bytes()
CLIENT_SRC = f"/_archiver/client.js?v={hashlib.sha256(CLIENT_SCRIPT).hexdigest()[:16]}"
_JAVASCRIPT = frozenset(
    ("text/javascript", "application/javascript", "application/x-javascript", "text/ecmascript",
     "application/ecmascript", "text/jscript")
)
# Response headers a replayed page's script may read (besides the CORS-safelisted ones).
_EXPOSED = ("Memento-Datetime, Link, Content-Range, Accept-Ranges, Content-Length, "
            "X-Archiver-Fuzzy-Match")
# Request headers a replayed page's script may send to archived content across origins: the
# CORS-safelisted ones (whatever their values) and X-Requested-With; the archive reads none but
# Range, and none carries credentials.
SAFE_REQUEST_HEADERS = frozenset(
    ("accept", "accept-language", "content-language", "content-type", "range", "x-requested-with")
)
# Sites on one home page, and the captures counted per site (past it: "1,000+").
SITES_PAGE = 100
SITE_COUNTED = 1000
# A host as the catalog's keys hold it (the home page's ``after``).
_SURT_HOST = re.compile(r"[0-9a-z_\-.,:\[\]]{1,300}", re.ASCII)
# URLs shown by a prefix listing (the Wayback Machine's URL listing pages hold a few hundred).
PREFIX_ROWS = 1000
_HTML = frozenset(("text/html", "application/xhtml+xml"))
# What is rewritten unless the modifier is id_, by media type.
_REWRITTEN = {**dict.fromkeys(_HTML, HTML), **dict.fromkeys(_JAVASCRIPT, SCRIPT_FILE), "text/css": CSS}
# Documents up to this size (content codings undone) are rewritten on the event loop: a few
# milliseconds at most. Larger ones go to the rewriting workers (ReplayArchive.rewriting).
_INLINE = 16 * 1024
# The header that says why a document that replay rewrites was served as archived.
NOT_REWRITTEN = "X-Archiver-Not-Rewritten"
# On a memento served (or redirected to) by a fuzzy rule (archiver.web.fuzzy): the rule's name.
FUZZY_MATCH = "X-Archiver-Fuzzy-Match"
_CODINGS = frozenset(("gzip", "x-gzip", "deflate", "br"))
_NO_BODY = frozenset((204, 304))
_LATEST = "99991231235959"
_EARLIEST = "0" * 14
# A TimeMap page's path: /timemap/<form>/<timestamp>/<url>, the mementos from that date on.
_TIMEMAP_PAGE = re.compile(r"(\d{1,14})/(.*)", re.S)
# Seconds a client is told to wait (Retry-After) for a capture replay cannot serve for now.
STORE_RETRY_AFTER = 30


@dataclass(frozen=True)
class ReplayApps:
    """The two apps of one replay service and the archive they share (close it after both stop)."""

    app: Starlette
    content: Starlette
    archive: ReplayArchive


def create_apps(config: Config) -> ReplayApps:
    """The replay's apps over the archive of ``config`` (its catalog must exist), for
    ``replay.base_url`` and ``replay.content_origin``, which must be set (serve.public fills them)."""
    replay = config.replay
    if not replay.base_url or not replay.content_origin:
        raise ValueError("replay.base_url and replay.content_origin must be known to create the apps")
    replay = dataclasses.replace(
        replay,
        base_url=public_url(replay.base_url, origin_only=False),
        content_origin=public_url(replay.content_origin, origin_only=True),
    )
    archive = ReplayArchive(dataclasses.replace(config, replay=replay))
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        ValueError: _bad_request, WarcError: _unreadable, ScanLimit: _too_much, Busy: _busy,
        ObjectStoreUnavailable: _objects_away, 404: _not_found}
    if archive.stores.watch is not None:  # (an embedded replay never loads psycopg)
        from archiver.store.postgres.connection import StoreAway
        handlers[StoreAway] = _database_away
    app = Starlette(
        routes=[
            Route("/", home),
            Route("/search", search),
            Route("/web/{rest:path}", web),
            Route("/timemap/link/{rest:path}", timemap_link),
            Route("/timemap/json/{rest:path}", timemap_json),
            *cdx.routes,
            *dnspages.routes,
            *robotspages.routes,
            *searchpages.routes,
            *statuspages.routes,
            *calendarpages.routes,
        ],
        middleware=[Middleware(_SecurityHeaders, policy=APP_CSP.format(content=replay.content_origin))],
        exception_handlers=handlers,
    )
    content = Starlette(
        routes=[Route("/web/{rest:path}", content_web), Route("/_archiver/client.js", client_script)],
        middleware=[Middleware(_SecurityHeaders, policy=CSP),
                    Middleware(_ReadableByArchivedPages, origin=replay.content_origin)],
        exception_handlers=handlers,
    )
    for one in (app, content):
        one.state.archive = archive
    return ReplayApps(app, content, archive)


class _SecurityHeaders:
    """Adds a Content-Security-Policy, nosniff and no-referrer to every HTTP response."""

    def __init__(self, app: Callable[..., Awaitable[None]], policy: str) -> None:
        self.app = app
        self.headers = [(b"content-security-policy", policy.encode())] + [
            (name.encode(), value.encode()) for name, value in COMMON_HEADERS
        ]

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_policy(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *self.headers]
            await send(message)

        await self.app(scope, receive, send_with_policy)


class _ReadableByArchivedPages:
    """CORS for archived content, no more than replay needs. A replayed page runs in an opaque
    origin, so its fetch() and XMLHttpRequest calls (which the client script sends into the
    archive) say ``Origin: null`` and could not read the answers without CORS: that origin, and
    the content origin itself, may read, without credentials. Credentials are never allowed: any
    page can make a sandboxed frame whose requests also say ``Origin: null``, and a page of any
    origin sends the visitor's credentials if it asks, which matter when an authenticating proxy
    or an intranet guards the archive (the content origin sets no cookies of its own: archived
    Set-Cookie headers are renamed, and the client script sends a page's requests without
    credentials). Preflights are answered for GET and HEAD with at most the headers in
    :data:`SAFE_REQUEST_HEADERS`; every other origin gets no CORS header, so a browser lets it
    read nothing. The replay's own pages, on the other origin, send no CORS headers at all."""

    def __init__(self, app: Callable[..., Awaitable[None]], origin: str) -> None:
        self.app = app
        self.allowed = {b"null", origin.encode("latin-1")}

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked = {name.lower(): value for name, value in scope["headers"]}
        origin = asked.get(b"origin")
        answer: list[tuple[bytes, bytes]] = [(b"vary", b"Origin")]
        if origin in self.allowed:
            answer += [(b"access-control-allow-origin", origin),
                       (b"access-control-expose-headers", _EXPOSED.encode())]
        if scope["method"] == "OPTIONS" and b"access-control-request-method" in asked:
            if origin in self.allowed:
                answer += [(b"access-control-allow-methods", b"GET, HEAD"),
                           (b"access-control-allow-headers", _safe_headers(asked)),
                           (b"access-control-max-age", b"600")]
            await send({"type": "http.response.start", "status": 204, "headers": answer})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_allowed(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *answer]
            await send(message)

        await self.app(scope, receive, send_allowed)


def _safe_headers(asked: dict[bytes, bytes]) -> bytes:
    """Of the request headers a preflight asks for, those in SAFE_REQUEST_HEADERS."""
    names = asked.get(b"access-control-request-headers", b"").decode("latin-1").split(",")
    return ", ".join(name for name in (n.strip().lower() for n in names)
                     if name in SAFE_REQUEST_HEADERS).encode("latin-1")


# --- helpers ---------------------------------------------------------------------------------


def _archive(request: Request) -> ReplayArchive:
    return request.app.state.archive


def _prefix(request: Request) -> str:
    """Where the replay's own pages are: its public base URL."""
    return _archive(request).config.replay.base_url


def _content(request: Request) -> str:
    """The origin of archived content."""
    return _archive(request).config.replay.content_origin


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


async def _missing(request: Request, url: str, message: str, *, why: bool = False) -> HTMLResponse:
    """The 404 page; with ``why``, for a URL the archive has no capture of, saying why not (a
    503 if its captures wait to be shipped: :func:`_unshipped`)."""
    if why and (waiting := await _unshipped(request, url)) is not None:
        return waiting
    answer = await _archive(request).why(url) if why else None
    page = pages.error_page(prefix=_prefix(request), title="Not in the archive", message=message,
                            url=url, why=answer)
    return _html(page, 404)


async def _unshipped(request: Request, url: str) -> HTMLResponse | None:
    """The 503 page (Retry-After) for a URL whose captures wait in a bundle not in the object
    store yet; None if none does."""
    if not await _archive(request).unshipped(url):
        return None
    page = pages.error_page(
        prefix=_prefix(request), title="Not shipped yet",
        message=f"{url} is captured, but the WARC bundle holding it has not reached the object store "
                "yet (it is still being written, or the store is away): try again later.")
    return HTMLResponse(page, status_code=503, headers={"Retry-After": str(STORE_RETRY_AFTER)})


def _redirect(location: str, headers: dict[str, str] | None = None) -> RedirectResponse:
    return RedirectResponse(location, status_code=302, headers=headers)


def _look_up(url: str, at: str, near: bool | None, count: bool, scan: Scan
             ) -> tuple[Capture, Around | None] | None:
    """The capture served for ``url`` at ``at`` (lookups.served) and its neighbours
    (lookups.around; with ``count``, their count for the banner): with ``near`` None only when
    the capture is of that very second (a memento served, not redirected), else if ``near``."""
    capture = lookups.served(scan, url, at)
    if capture is None:
        return None
    if near is None:
        near = capture.timestamp == at
    return capture, lookups.around(scan, url, capture, count=count) if near else None


async def _served(request: Request, url: str, at: str, *, near: bool | None, count: bool = False
                  ) -> tuple[Capture, Around | None] | None:
    """:func:`_look_up` as a lookup (archiver.replay.scan): a few index seeks."""
    return await _archive(request).scanner.look_up(partial(_look_up, url, at, near, count))


def _memento_links(request: Request, url: str, near: Around, current: str | None) -> str:
    """The Link header of a memento (``current``, its timestamp) or a TimeGate (None)."""
    base, content = _prefix(request), _content(request)

    def uri_m(timestamp: str | None) -> memento.Memento | None:
        return None if timestamp is None else (archive_url(content, timestamp, "", url), timestamp)

    return memento.link_header(
        original=url,
        timegate=f"{base}/web/{url}",
        timemap=f"{base}/timemap/link/{url}",
        first=uri_m(near.first),
        last=uri_m(near.last),
        prev=uri_m(near.prev),
        current=uri_m(current),
        next=uri_m(near.next),
    )


# --- the replay's own pages ------------------------------------------------------------------


def _sites(after: str, scan: Scan) -> tuple[list[pages.SiteRow], str | None]:
    """A page of the archive's sites from the host after ``after`` on (CatalogStore.hosts: each
    an index seek and at most SITE_COUNTED rows counted), each with its front page's latest
    content capture (lookups.latest), and the host to start the next page after (None on the
    last page)."""
    sites: list[pages.SiteRow] = []
    for tally in scan.catalog.hosts(after=after, at_most=SITE_COUNTED):
        scan.examine(tally.captures + 1)
        if len(sites) == SITES_PAGE:
            return sites, sites[-1].tally.host
        front = urls.origin(tally.url) + "/"
        sites.append(pages.SiteRow(tally, lookups.latest(scan, front)))
    return sites, None


async def home(request: Request) -> Response:
    """The home page, with a page of the archive's sites (``?after=<host>``: the page after it,
    the host as the catalog's keys hold it)."""
    after = request.query_params.get("after", "")
    if after and not _SURT_HOST.fullmatch(after):
        raise ValueError(f"bad after={after[:40]!r}: follow the home page's link to more sites")
    sites, last = await _archive(request).scanner.collect(partial(_sites, after))
    prefix = _prefix(request)
    return _html(pages.home(prefix=prefix, content=_content(request), sites=sites, counted=SITE_COUNTED,
                            next_href=f"{prefix}/?{urlencode({'after': last})}" if last else None))


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
    return _redirect(archive_url(_content(request), parse_date(date), "", url))


async def web(request: Request) -> Response:
    rest = _rest(request, "/web/")
    target = parse_web_path(rest)
    if target.kind == "timegate":
        return await _timegate(request, target.url)
    if target.kind == "prefix":
        return await _url_list(request, target.url)
    if target.kind == "memento":
        return _redirect(f"{_content(request)}/web/{rest}")
    return await _capture_list(request, target)


async def _capture_list(request: Request, target: WebTarget) -> Response:
    """The capture calendar of a URL (pages.capture_list); ``/web/<digits>*/<url>`` shows the
    year its digits name and lists the captures they start, ``/web/<digits>*<timestamp>/<url>``
    the page of that list from the timestamp on (lookups.calendar: a page of LISTED)."""
    tally, shots = await _archive(request).scanner.collect(partial(_calendar, target))
    if not tally.listed and (waiting := await _unshipped(request, target.url)) is not None:
        return waiting
    page = pages.capture_list(
        prefix=_prefix(request), content=_content(request), url=target.url, within=target.within, tally=tally,
        start=target.timestamp, screenshots=shots,
    )  # fmt: skip
    return _html(page, 200 if tally.listed else 404)


def _calendar(target: WebTarget, scan: Scan) -> tuple[CaptureTally, set[str]]:
    """The calendar of a capture list (lookups.calendar: a page of LISTED captures) and the
    seconds of the captures listed that have a screenshot (lookups.screenshots: one query)."""
    tally = lookups.calendar(scan, target.url, target.within, target.timestamp, LISTED)
    return tally, lookups.screenshots(scan, target.url, tally.listed)


def _url_rows(url: str, scan: Scan) -> tuple[list[pages.UrlRow], bool]:
    rows: list[pages.UrlRow] = []
    for _, group in groupby(scan.rows(scan.catalog.list(url, "prefix")), key=lambda c: c.urlkey):
        if len(rows) == PREFIX_ROWS:
            return rows, True
        rows.append(pages.url_row(group))
    return rows, False


async def _url_list(request: Request, url: str) -> Response:
    rows, truncated = await _archive(request).scanner.collect(partial(_url_rows, url))
    if not rows:
        return await _missing(request, url, f"No URL under {url} is in the archive.")
    page = pages.url_list(
        prefix=_prefix(request), content=_content(request), url=url, rows=rows, truncated=truncated
    )
    return _html(page)


async def _timegate(request: Request, url: str) -> Response:
    """RFC 7089 section 4.1 (pattern 2.2): 302 to the memento closest to Accept-Datetime, the
    latest one without it."""
    wanted = request.headers.get("accept-datetime")
    at = memento.parse_http_date(wanted) if wanted is not None else _LATEST
    found = await _served(request, url, at, near=True)
    if found is None:
        response = await _missing(request, url, f"{url} is not in the archive.", why=True)
        response.headers["Vary"] = "accept-datetime"
        return response
    capture, near = found
    assert near is not None
    links = _memento_links(request, url, near, None)
    location = archive_url(_content(request), capture.timestamp, "", url)
    return _redirect(location, {"Vary": "accept-datetime", "Link": links})


async def _timemap_page(request: Request, form: str) -> tuple[str, str | None, lookups.TimeMapPage]:
    """The URL and start a TimeMap path names (``/timemap/<form>/[<timestamp>/]<url>``) and that
    page of its mementos: ``replay.timemap_page`` of them (lookups.timemap_page)."""
    rest = _rest(request, f"/timemap/{form}/")
    if paged := _TIMEMAP_PAGE.fullmatch(rest):
        url, start = requested_url(paged[2]), pad_timestamp(paged[1])
    else:
        url, start = requested_url(rest), None
    size = _archive(request).config.replay.timemap_page
    listing = partial(lookups.timemap_page, url=url, start=start or _EARLIEST, size=size)
    return url, start, await _archive(request).scanner.collect(listing)


def _timemap_parts(request: Request, url: str, start: str | None, page: lookups.TimeMapPage, form: str
                   ) -> tuple[list[memento.Memento], memento.PageLink | None, memento.PageLink | None]:
    """A TimeMap page's mementos and its links to the pages before and after it (``form``'s)."""
    content = _content(request)
    mementos = [(archive_url(content, ts, "", url), ts) for ts in page.seconds]
    previous = following = None
    if page.previous is not None:
        previous = memento.PageLink(_timemap_uri(request, form, url, page.previous[0]), *page.previous)
    if page.following is not None:
        following = memento.PageLink(_timemap_uri(request, form, url, page.following), page.following)
    return mementos, previous, following


def _timemap_uri(request: Request, form: str, url: str, start: str | None) -> str:
    """Where the TimeMap page of ``url`` from ``start`` is (its first page without ``start``)."""
    page = f"{start}/" if start else ""
    return f"{_prefix(request)}/timemap/{form}/{page}{url}"


async def _no_timemap(request: Request, url: str, start: str | None) -> Response:
    if start is None and (waiting := await _unshipped(request, url)) is not None:
        return waiting
    since = f" at or after {start}" if start else ""
    return PlainTextResponse(f"{url} has no capture{since} in the archive\n", status_code=404)


async def timemap_link(request: Request) -> Response:
    url, start, page = await _timemap_page(request, "link")
    if not page.seconds:
        return await _no_timemap(request, url, start)
    mementos, previous, following = _timemap_parts(request, url, start, page, "link")
    body = memento.link_timemap(
        original=url,
        timegate=f"{_prefix(request)}/web/{url}",
        timemap=_timemap_uri(request, "link", url, start),
        mementos=mementos,
        first=previous is None,
        last=following is None,
        pages=tuple(p for p in (previous, following) if p is not None),
    )
    return Response(body, media_type=memento.LINK_FORMAT)


async def timemap_json(request: Request) -> Response:
    url, start, page = await _timemap_page(request, "json")
    if not page.seconds:
        return await _no_timemap(request, url, start)
    mementos, previous, following = _timemap_parts(request, url, start, page, "json")
    body = memento.json_timemap(
        original=url,
        timegate=f"{_prefix(request)}/web/{url}",
        timemap=_timemap_uri(request, "link", url, start),
        timemap_json=_timemap_uri(request, "json", url, start),
        mementos=mementos,
        first=previous is None,
        last=following is None,
        previous=previous,
        following=following,
    )
    return Response(body, media_type="application/json")


# --- archived content ------------------------------------------------------------------------


async def client_script(request: Request) -> Response:
    """The client script (client.js), cached for good: its URL names its version."""
    return Response(CLIENT_SCRIPT, media_type="text/javascript; charset=utf-8",
                    headers={"Cache-Control": "public, max-age=31536000, immutable"})


async def content_web(request: Request) -> Response:
    rest = _rest(request, "/web/")
    target = parse_web_path(rest)
    if target.kind != "memento":  # lists and the TimeGate are the replay's own pages
        return _redirect(f"{_prefix(request)}/web/{rest}")
    page, asked = coherence.split_parameter(rest)
    if asked is not None:
        if asked != "json":
            raise ValueError(f"coherence={asked[:40]!r}: the one form is ?coherence=json")
        target = parse_web_path(page)
        assert target.timestamp is not None
        found = await _served(request, target.url, target.timestamp, near=False)
        return await _coherence_json(request, target, None if found is None else found[0])
    assert target.timestamp is not None
    count = target.modifier in BANNERED
    found = await _served(request, target.url, target.timestamp, near=None, count=count)
    rule = None
    if found is None and (matched := await _fuzzy(request, target.url, target.timestamp, count)):
        found, rule = matched
    return await _memento(request, target, found, rule)


def _look_up_fuzzy(url: str, at: str, count: bool, rules: tuple[FuzzyRule, ...], scan: Scan
                   ) -> tuple[tuple[Capture, Around | None], str] | None:
    """The capture a fuzzy rule maps ``url`` to (lookups.fuzzy), its neighbours among the
    captures of its own URL when it is of the second ``at`` (as :func:`_look_up`), and the rule."""
    matched = lookups.fuzzy(scan, url, at, rules)
    if matched is None:
        return None
    capture, rule = matched
    near = lookups.around(scan, capture.url, capture, count=count) if capture.timestamp == at else None
    return (capture, near), rule


async def _fuzzy(request: Request, url: str, at: str, count: bool
                 ) -> tuple[tuple[Capture, Around | None], str] | None:
    """:func:`_look_up_fuzzy` as a lookup, with the operator's rules then the shipped ones; None
    when ``replay.fuzzy`` is off, no rule matches, or the lookup passes its limits (logged: the
    URL is then missing, as without fuzzy matching)."""
    settings = _archive(request).config.replay
    if not settings.fuzzy:
        return None
    rules = settings.fuzzy_rules + DEFAULT_RULES
    try:
        return await _archive(request).scanner.look_up(partial(_look_up_fuzzy, url, at, count, rules))
    except ScanLimit as e:
        event(log, logging.WARNING, "replay-fuzzy-skipped", url=url, error=str(e))
        return None


async def _memento(request: Request, target: WebTarget, found: tuple[Capture, Around | None] | None,
                   rule: str | None = None) -> Response:
    """The memento of ``target`` from the capture ``found`` (a redirect to its own second when it
    is of another), marked with FUZZY_MATCH when the fuzzy ``rule`` found it."""
    if found is None:
        return await _missing(request, target.url, f"{target.url} is not in the archive.", why=True)
    capture, near = found
    marked = {FUZZY_MATCH: rule} if rule is not None else None
    if not target.exact or near is None:
        return _redirect(archive_url("", capture.timestamp, target.modifier, target.url), marked)
    records = await _records(request, capture)
    if records is None:
        return await _missing(request, target.url, _no_original(target.url, capture))
    head, payload = records
    banner: Banner | None = None
    if target.modifier in BANNERED:

        async def with_banner(embeds: PageEmbeds) -> str:
            return pages.banner(
                prefix=_prefix(request),
                content="",
                url=target.url,
                timestamp=capture.timestamp,
                prev=near.prev,
                next=near.next,
                count=near.count,
                more=near.more,
                coherence=await _banner_coherence(request, target.url, capture, embeds),
                screenshot=await _banner_screenshot(request, target.url, capture),
            )

        banner = with_banner
    callback = callback_names(target.url, capture.url) if rule == JSONP_RULE else None
    response = await _replay(request, target, capture, head, payload, banner, callback)
    response.headers["Memento-Datetime"] = memento.http_date(capture.timestamp)
    response.headers["Link"] = _memento_links(request, target.url, near, capture.timestamp)
    if rule is not None:
        response.headers[FUZZY_MATCH] = rule
    return response


async def _records(request: Request, capture: Capture) -> tuple[OpenRecord, OpenRecord] | None:
    """The record whose HTTP head replay serves for ``capture`` and the record whose payload it
    serves (a revisit's comes from the capture it refers to), both open (:func:`_replay` closes
    them); None if that capture is not archived."""
    archive = _archive(request)
    stored = await archive.record(capture)
    payload = stored
    if capture.rectype == "revisit":
        try:
            found = await archive.original(capture, stored)
        except BaseException:
            stored.close()
            raise
        if found is None:
            stored.close()
            return None
        payload = found[1]
    # A server-not-modified revisit holds the 304's head: the page is the original's, head too.
    head = stored if stored.http_head and not _not_modified(stored) else payload
    if stored is not head and stored is not payload:
        stored.close()
    return head, payload


def _no_original(url: str, capture: Capture) -> str:
    return (f"The capture of {url} at {capture.timestamp} records an unchanged payload, "
            "but the capture holding that payload is not in the archive.")


# --- temporal coherence ----------------------------------------------------------------------

# What a replayed HTML page's banner is made with: the page's embeds in, the banner out.
Banner = Callable[[PageEmbeds], Awaitable[str]]


def _served_capture(scan: Scan, url: str, at: str) -> Capture | None:
    """The capture replay serves for ``url`` asked for at ``at`` (lookups.served: a seek each
    way, walking past redirects to ``url`` itself)."""
    try:
        return lookups.served(scan, url, at)
    except ValueError:  # a URL the catalog cannot key: replay has no capture of it either
        return None


async def _coherence(request: Request, url: str, capture: Capture,
                     embeds: PageEmbeds) -> coherence.Coherence:
    """The dates of what the page captured as ``capture`` loads: its first EMBED_LIMIT distinct
    embeds looked up in one lookup (archiver.replay.scan; ScanLimit past its limits)."""
    checked = embeds.first[: coherence.EMBED_LIMIT]

    def served(scan: Scan) -> list[coherence.Served]:
        lookup = partial(_served_capture, scan)
        return [coherence.follow(embed, capture.timestamp, lookup) for embed in checked]

    archive = _archive(request)
    found = await archive.scanner.look_up(served) if checked else []
    max_skew = archive.config.replay.max_skew
    return coherence.assess(url, capture.timestamp, found, found=embeds.count, max_skew=max_skew)


async def _banner_coherence(request: Request, url: str, capture: Capture,
                            embeds: PageEmbeds) -> coherence.Coherence | None:
    """:func:`_coherence` for the banner, which goes without it when the listing fails."""
    try:
        return await _coherence(request, url, capture, embeds)
    except ScanLimit as e:
        event(log, logging.WARNING, "replay-coherence-skipped", url=url, error=str(e))
        return None


async def _banner_screenshot(request: Request, url: str, capture: Capture) -> bool:
    """Whether the capture has a screenshot (lookups.has_screenshot, a lookup), for the banner,
    which goes without the link when the lookup fails."""
    try:
        return await _archive(request).scanner.look_up(
            partial(lookups.has_screenshot, url=url, at=capture.timestamp))
    except ScanLimit as e:
        event(log, logging.WARNING, "replay-screenshot-skipped", url=url, error=str(e))
        return False


async def _coherence_json(request: Request, target: WebTarget, capture: Capture | None) -> Response:
    """``?coherence=json`` on a memento URL: the page's timestamp and, per embed, the one served."""
    if capture is None:
        return PlainTextResponse(f"{target.url} is not in the archive\n", status_code=404)
    records = await _records(request, capture)
    if records is None:
        return PlainTextResponse(_no_original(target.url, capture) + "\n", status_code=404)
    embeds = [PageEmbeds([], 0)]

    async def keep(found: PageEmbeds) -> str:
        embeds.append(found)
        return ""

    # What the page loads is what replay's own rewriting finds in it, a redirect loading nothing.
    await _replay(request, dataclasses.replace(target, modifier=PAGE), capture, *records, keep)
    report = await _coherence(request, target.url, capture, embeds[-1])
    return JSONResponse(report.to_json(), headers={"Memento-Datetime": memento.http_date(capture.timestamp)})


def _not_modified(stored: OpenRecord) -> bool:
    """Whether a record is a revisit of the server-not-modified profile."""
    return any(name.lower() == "warc-profile" and value == NOT_MODIFIED_PROFILE
               for name, value in stored.warc_headers)


async def _replay(request: Request, target: WebTarget, capture: Capture, head: OpenRecord,
                  body: OpenRecord, banner: Banner | None,
                  callback: tuple[str, str] | None = None) -> Response:
    """The archived response: status, headers and body, rewritten as the modifier asks; an HTML
    page that is not a redirect gets ``banner(its embeds)`` inserted; a script's JSONP
    ``callback`` (captured name, asked name) is renamed. Links point into the content
    origin, as paths (the document's own origin). A payload served as archived is streamed from
    ``body``, a range of it read past the bytes before it; a rewritten one is read whole, within
    ``replay.max_rewrite_size``. Closes both records (the streamed one once it is sent)."""
    records = {id(head): head, id(body): body}.values()
    try:
        response = await _replay_records(request, target, capture, head, body, banner, callback)
    except BaseException:
        for record in records:
            record.close()
        raise
    for record in records:
        if not (isinstance(response, _Streamed) and response.record is record):
            record.close()
    return response


async def _replay_records(request: Request, target: WebTarget, capture: Capture, head: OpenRecord,
                          body: OpenRecord, banner: Banner | None,
                          callback: tuple[str, str] | None) -> Response:
    status, headers = parse_head(head.http_head)
    if not head.http_head:  # a resource record: its WARC Content-Type, parameters included
        content_type = header(head.warc_headers, "content-type")
        if content_type or capture.mime != "-":
            headers = [("Content-Type", content_type or capture.mime)]
    url = urls.normalize(capture.url) or target.url
    content_type = header(headers, "content-type")
    mime = media_type(content_type or capture.mime)[0]
    coding = header(headers, "content-encoding") or ""
    payload: bytes | OpenRecord = body
    rewritten = False
    note = None
    kind = _REWRITTEN.get(mime) if target.modifier != IDENTITY else None
    if kind is not None:
        try:
            payload = await _payload(request, body, coding)
            done = await _rewrite(request, payload, kind=kind, coding=coding, url=url,
                                  timestamp=capture.timestamp, charset=media_type(content_type)[1],
                                  modifier=target.modifier, callback=callback)
        except NotRewritten as e:
            note = str(e)
            event(log, logging.WARNING, "replay-not-rewritten", url=url, timestamp=capture.timestamp,
                  reason=note)
        else:
            if done is not None:  # None: a script with nothing to rewrite, served as archived
                payload, rewritten = done.before, True
                if done.after is not None:
                    redirect = status is not None and 300 <= status < 400
                    text = await banner(done.embeds) if banner is not None and not redirect else ""
                    payload = b"".join((done.before, text.encode("utf-8"), done.after))
    location = None
    if capture.redirect is not None:
        location = archive_url("", capture.timestamp, target.modifier, capture.redirect)
    refresh = refresher(url, capture.timestamp, "", target.modifier)
    served = replay_headers(headers, rewritten=rewritten, location=location, refresh=refresh)
    if note is not None:
        served.append((NOT_REWRITTEN, note))
    if status is None or not 200 <= status <= 599:
        status = 200
    size = len(payload) if isinstance(payload, bytes) else payload.size
    wanted = None
    if status == 200 and not rewritten:  # audio and video are seeked by range (RFC 9110 section 14)
        status, wanted, ranged = _byte_range(request.headers.get("range"), size)
        served += ranged
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in served]
    if status in _NO_BODY or status == 416:
        payload = b""
    first, length = (wanted.first, wanted.last + 1 - wanted.first) if wanted is not None else (0, size)
    if isinstance(payload, bytes):
        response = Response(payload[first:first + length], status_code=status)
        response.raw_headers += raw
        return response
    streamed = _Streamed(payload, first, length if request.method != "HEAD" else 0, status)
    streamed.raw_headers += [(b"content-length", str(length).encode()), *raw]
    return streamed


async def _payload(request: Request, record: OpenRecord, coding: str) -> bytes:
    """The whole payload of a record replay rewrites: NotRewritten past replay.max_rewrite_size
    (left unread, to be streamed) or for a Content-Encoding replay does not undo (an unknown
    coding, more than MAX_CODINGS)."""
    try:
        codings = content_codings(coding)
    except CodingError as e:
        raise NotRewritten(str(e)) from None
    if not set(codings) <= _CODINGS:
        raise NotRewritten("its Content-Encoding names a coding replay does not undo")
    limit = _archive(request).config.replay.max_rewrite_size
    if record.size > limit:
        raise NotRewritten(f"larger than replay.max_rewrite_size ({limit} bytes) once decoded")
    return await trio.to_thread.run_sync(record.read, record.size)


async def _rewrite(request: Request, body: bytes, *, kind: str, coding: str, url: str, timestamp: str,
                   charset: str | None, modifier: str, callback: tuple[str, str] | None
                   ) -> Rewritten | None:
    """:func:`rewrite_document` of an archived payload: on the event loop up to _INLINE bytes,
    else in a rewriting worker (Busy when they and their queue are full)."""
    archive = _archive(request)
    job = partial(rewrite_document, body, kind=kind, coding=coding, url=url, timestamp=timestamp,
                  charset=charset, limit=archive.config.replay.max_rewrite_size, client=CLIENT_SRC,
                  embeds_kept=coherence.EMBED_LIMIT, modifier=modifier, callback=callback)
    if len(decode_body(body, coding, _INLINE + 1)) <= _INLINE:
        return job()
    try:
        return await archive.rewriting.run(job)
    except WorkerLost as e:
        raise NotRewritten(f"its rewriting failed ({e})") from None


class _Streamed(StreamingResponse):
    """``length`` bytes of a record's payload from ``first``, streamed: read a piece at a time in
    a worker thread, the bytes before ``first`` read past (a gzip member cannot be entered in
    the middle); the record is closed once the answer ends or the client has gone."""

    def __init__(self, record: OpenRecord, first: int, length: int, status: int) -> None:
        self.record = record
        super().__init__(self._pieces(first, length), status_code=status)

    async def _pieces(self, first: int, length: int) -> AsyncIterator[bytes]:
        record = self.record
        try:
            await trio.to_thread.run_sync(record.skip, first)
            while length > 0:
                piece = await trio.to_thread.run_sync(record.read, min(PIECE, length))
                length -= len(piece)
                yield piece
        except WarcError as e:  # the answer ends short of its Content-Length: the client sees it
            event(log, logging.ERROR, "replay-unreadable-record", url=record.url, error=str(e))

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.record.close()


def _byte_range(value: str | None, size: int) -> tuple[int, ByteRange | None, list[tuple[str, str]]]:
    """(status, range, headers) of an archived 200 of ``size`` bytes answering a Range header:
    206 with the range asked, 416 for one past the end, else 200 with the whole body (range
    None); Accept-Ranges always."""
    wanted = parse_range(value, size)
    if wanted is None:
        return 200, None, [("Accept-Ranges", "bytes")]
    if wanted == UNSATISFIABLE:
        return 416, None, [("Accept-Ranges", "bytes"), ("Content-Range", f"bytes */{size}")]
    return 206, wanted, [("Accept-Ranges", "bytes"),
                         ("Content-Range", f"bytes {wanted.first}-{wanted.last}/{size}")]


# --- errors ----------------------------------------------------------------------------------


async def _bad_request(request: Request, exc: Exception) -> Response:
    return PlainTextResponse(f"400 Bad Request: {exc}\n", status_code=400)


async def _busy(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Busy)
    event(log, logging.WARNING, "replay-busy", url=str(request.url.path), work=exc.what)
    return PlainTextResponse(f"503 Service Unavailable: {exc}\n", status_code=503,
                             headers={"Retry-After": str(exc.retry_after)})


async def _database_away(request: Request, exc: Exception) -> Response:
    """The database is restarting or failing over (logged once per outage as store-unavailable):
    ask again after Retry-After."""
    assert hasattr(exc, "retry_after")
    page = pages.error_page(
        prefix=_prefix(request),
        title="Archive database unavailable",
        message=f"The database holding the catalog cannot be reached right now ({exc}): try again "
                "later.",
    )
    return HTMLResponse(page, status_code=503, headers={"Retry-After": str(exc.retry_after)})


async def _too_much(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ScanLimit)
    event(log, logging.WARNING, "replay-scan-limit", url=str(request.url.path), error=str(exc))
    return PlainTextResponse(f"{exc.status} {exc}\n", status_code=exc.status, headers=_retry(exc))


def _retry(exc: ScanLimit) -> dict[str, str] | None:
    """A Retry-After header when waiting helps (a listing refused for want of room)."""
    return None if exc.retry_after is None else {"Retry-After": str(exc.retry_after)}


async def _objects_away(request: Request, exc: Exception) -> Response:
    """A record the object store cannot give now (away, failing): 503, ask again later."""
    event(log, logging.WARNING, "replay-store-unavailable", url=str(request.url.path), error=str(exc))
    page = pages.error_page(
        prefix=_prefix(request),
        title="Archive store unavailable",
        message="The catalog lists this capture, but the object store holding its WARC record "
                "cannot be reached right now: try again later.",
    )
    return HTMLResponse(page, status_code=503, headers={"Retry-After": str(STORE_RETRY_AFTER)})


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
