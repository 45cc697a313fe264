"""A loopback web of sessions and gatekeepers (issue 41): cookies, logins, sitemaps, challenges.

One trio + h11 server on 127.0.0.1 (a free port) serves every host below by its ``Host`` header;
the test config maps the names to 127.0.0.1 (:meth:`SessionWeb.hosts_file`). Every request is
logged (:class:`Request`: host, method, target, headers, body, arrival time, and the status
answered) before it is answered. Every host serves ``/robots.txt`` allowing all
(``sitemaps.test``'s also names its sitemap index); robots.txt is never redirected, guarded nor
challenged (real Cloudflare sites rarely challenge it).

- ``cookies.test``: a page requested without the ``visitor`` cookie the server issued answers 302
  to the same URL with ``Set-Cookie: visitor=<random>`` (a client keeping no cookie loops, with a
  new cookie each time); with it, the home page links ``COOKIE_PAGES`` pages (each needing the
  cookie too) and ``other.test``'s home page. ``other.test`` (and ``other.github.io``,
  ``other.co.uk``, ``elsewhere.test``) serve a plain page on any path.
- ``shop.github.io`` and ``shop.example.co.uk``: the home page sets a cookie for the public
  suffix (``tracker``, ``Domain=github.io`` or ``co.uk``), one for the shop alone (``basket``,
  host-only: the jar's working control) and links ``/basket.html`` and a page on a sibling host
  under the same suffix; a client following RFC 6265bis sends ``basket`` back to the shop only,
  and ``tracker`` nowhere.
- ``basic.test``: ``/`` is public and links ``/members/``, which links ``MEMBER_PAGES - 1`` more
  pages; everything under ``/members/`` needs HTTP Basic (``BASIC_USER``, ``BASIC_PASSWORD``, realm
  ``Members``), else 401. ``digest.test`` is the same behind Digest (RFC 7616, MD5, qop=auth):
  the response, the URI, the nonce (issued here) and a growing nonce count are all checked.
- ``forms.test``: ``/login`` sets a ``login`` cookie and serves a form whose hidden ``csrf`` token
  (new on every GET) must come back with that cookie in a POST to ``/session``; right credentials
  (``FORM_USER``, ``FORM_PASSWORD``) set ``sid`` and answer 303 to ``/members/``, wrong ones 200
  with "Login failed"; ``/login-js`` is the same login page with its form built by a script,
  ``/login-get`` too, its form sending by GET.
  ``/members/`` and its pages (``FORM_PAGES`` in all, each linking the next)
  contain ``Log out`` (as text, not a link a crawler could follow) and need a live ``sid``, else
  302 to ``/login?next=<path>``. ``expire_after`` ends a session after that many members' pages;
  ``logins_fail`` refuses every login; :meth:`SessionWeb.revive` lifts both.
- ``sitemaps.test``: the home page links nothing; robots.txt names a gzip sitemap index listing a
  gzip urlset, a plain urlset and a text sitemap (``SITEMAP_PAGES`` pages in all, with
  ``lastmod``s); ``/sitemap.xml`` (the default location, not in robots.txt) lists one more page.
  The plain urlset also lists a page of ``elsewhere.test``, which a sitemap may not speak for.
- ``gated.test``: every second page request (a count across the host) answers a challenge,
  alternately a 403 with ``cf-mitigated: challenge`` and a 200 "Just a moment..." page holding
  ``window._cf_chl_opt`` (no telling header); ``gated_always`` challenges every request. The
  home page links ``GATED_PAGES`` pages, each holding the text ``page N content``.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email.utils import formatdate
from urllib.parse import parse_qs, quote, urlsplit
from urllib.request import parse_http_list, parse_keqv_list

import h11
import trio

COOKIES, OTHER = "cookies.test", "other.test"
PSL_SHOPS = {"shop.github.io": ("github.io", "other.github.io"),
             "shop.example.co.uk": ("co.uk", "other.co.uk")}  # host: (cookie domain, sibling)
BASIC, DIGEST, FORMS = "basic.test", "digest.test", "forms.test"
SITEMAPS, ELSEWHERE, GATED = "sitemaps.test", "elsewhere.test", "gated.test"
PLAIN = (OTHER, ELSEWHERE, *(sibling for _, sibling in PSL_SHOPS.values()))
HOSTS = (COOKIES, *PSL_SHOPS, BASIC, DIGEST, FORMS, SITEMAPS, GATED, *PLAIN)

BASIC_USER, BASIC_PASSWORD, REALM = "reader", "s3cret-basic-pass", "Members"
DIGEST_USER, DIGEST_PASSWORD = "reader", "s3cret-digest-pass"
FORM_USER, FORM_PASSWORD = "archivist", "s3cret-form-pass"
COOKIE_PAGES, MEMBER_PAGES, FORM_PAGES, GATED_PAGES = 5, 5, 8, 6
LOGGED_IN, LOGIN_FAILED = "Log out", "Login failed"
# sitemaps.test: the page each sitemap lists and its lastmod; ``/p7.html`` only in /sitemap.xml.
SITEMAP_PAGES = {f"/p{n}.html": f"2026-0{n}-15" for n in range(1, 7)}
DEFAULT_SITEMAP_PAGE = "/p7.html"
MAX_BODY = 64 * 1024  # a request body larger than this is refused (413)

CF_BLOCK = (b"<!DOCTYPE html><html><head><title>Attention Required! | Cloudflare</title></head>"
            b"<body><div id='cf-error-details'><h1>Sorry, you have been blocked</h1>"
            b"<p>Please enable cookies.</p><span>Cloudflare Ray ID: 8f2a</span></div></body></html>")
CF_JS = (b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
         b"<noscript>Enable JavaScript and cookies to continue</noscript>"
         b"<script>(function(){window._cf_chl_opt={cvId:'3',cType:'managed',cRay:'8f2b'};"
         b"}());</script></body></html>")


@dataclass
class Request:
    """One request as received (``at``: the trio time its head arrived), and the status it was
    answered with (0 until answered)."""

    host: str
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    at: float
    status: int = 0

    def header(self, name: str) -> str | None:
        """The last value of header ``name`` (any case), or None."""
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return values[-1] if values else None

    def cookies(self) -> dict[str, str]:
        """The cookies sent (every ``Cookie`` header, as a client may split them)."""
        found = {}
        for name, value in self.headers:
            if name.lower() == "cookie":
                for pair in value.split(";"):
                    key, _, val = pair.strip().partition("=")
                    found[key] = val
        return found


@dataclass
class Answer:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    content_type: str = "text/html; charset=utf-8"


def html(title: str, *parts: str) -> bytes:
    body = "".join(parts)
    return f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{body}</body></html>".encode()


def links(paths: list[str]) -> str:
    return "".join(f'<a href="{p}">{p}</a>\n' for p in paths)


def redirect(status: int, location: str, *headers: tuple[str, str]) -> Answer:
    return Answer(status, b"", [("Location", location), *headers])


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


@dataclass
class SessionWeb:
    """The server, its request log and the settings a test changes while it runs."""

    expire_after: int | None = None  # forms.test: members' pages a session serves, then it ends
    logins_fail: bool = False  # forms.test: refuse every login ("Login failed")
    gated_always: bool = False  # gated.test: challenge every page request, not every second one
    lastmod: dict[str, str] = field(default_factory=dict)  # sitemaps.test: a page's new lastmod
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    visitors: set[str] = field(default_factory=set)  # cookies.test: visitor cookies issued
    login_forms: dict[str, str] = field(default_factory=dict)  # forms.test: csrf -> login cookie
    sessions: dict[str, int] = field(default_factory=dict)  # forms.test: live sid -> pages served
    nonces: dict[str, int] = field(default_factory=dict)  # digest.test: nonce -> last nc accepted
    gated_count: int = 0  # gated.test: page requests received
    challenges: int = 0  # gated.test: challenges sent

    # -- for the tests -----------------------------------------------------------------------

    def hosts_file(self) -> str:
        return "".join(f"127.0.0.1 {host}\n" for host in HOSTS)

    def origin(self, host: str) -> str:
        return f"http://{host}:{self.port}"

    def revive(self) -> None:
        """Let the next login succeed, with a session that does not expire."""
        self.logins_fail, self.expire_after = False, None

    def to(self, host: str) -> list[Request]:
        """The requests ``host`` received, in order."""
        return [r for r in self.requests if r.host == host]

    def member_urls(self, host: str) -> set[str]:
        """The URLs of the members' area of ``basic.test``, ``digest.test`` or ``forms.test``."""
        count = FORM_PAGES if host == FORMS else MEMBER_PAGES
        return {self.origin(host) + path for path in self._members(count)}

    # -- serving ---------------------------------------------------------------------------

    async def serve(self, nursery: trio.Nursery) -> None:
        [listener] = await nursery.start(functools.partial(trio.serve_tcp, self._connection, 0,
                                                           host="127.0.0.1"))
        self.port = listener.socket.getsockname()[1]

    async def _connection(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        request: Request | None = None
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                elif isinstance(event, h11.Request):
                    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers]
                    host = dict((k.lower(), v) for k, v in headers).get("host", "")
                    request = Request(host.lower().rsplit(":", 1)[0], event.method.decode("ascii"),
                                      event.target.decode("latin-1"), headers, b"",
                                      trio.current_time())
                    self.requests.append(request)
                elif isinstance(event, h11.Data) and request is not None:
                    request.body = (request.body + event.data)[: MAX_BODY + 1]  # kept bounded
                elif isinstance(event, h11.EndOfMessage) and request is not None:
                    if len(request.body) > MAX_BODY:
                        answer = Answer(413, b"request body too large")
                    else:
                        answer = self.answer(request)
                    await self._send(stream, conn, request, answer)
                    if conn.our_state is not h11.DONE:
                        return
                    conn.start_next_cycle()
                    request = None
                elif isinstance(event, h11.ConnectionClosed):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return

    async def _send(self, stream: trio.SocketStream, conn: h11.Connection, request: Request,
                    answer: Answer) -> None:
        request.status = answer.status
        headers = [("Content-Type", answer.content_type), ("Content-Length", str(len(answer.body))),
                   ("Date", formatdate(usegmt=True)), *answer.headers]
        body = b"" if request.method == "HEAD" else answer.body
        await stream.send_all(conn.send(h11.Response(status_code=answer.status, headers=headers))
                              + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))

    def answer(self, request: Request) -> Answer:
        """The answer to ``request``, by its host."""
        path = urlsplit(request.target).path
        if path == "/robots.txt":
            return self._robots(request.host)
        if request.host == COOKIES:
            return self._cookies(request, path)
        if request.host in PSL_SHOPS:
            return self._shop(request.host, path)
        if request.host in (BASIC, DIGEST):
            return self._guarded(request, path)
        if request.host == FORMS:
            return self._forms(request, path)
        if request.host == SITEMAPS:
            return self._sitemaps(path)
        if request.host == GATED:
            return self._gated(path)
        if request.host in PLAIN:
            return Answer(200, html(request.host, f"<p>a page of {request.host}: {path}</p>"))
        return Answer(404, b"no such host here", content_type="text/plain")

    def _robots(self, host: str) -> Answer:
        text = "User-agent: *\nAllow: /\n"
        if host == SITEMAPS:
            text += f"Sitemap: {self.origin(SITEMAPS)}/sitemap_index.xml.gz\n"
        return Answer(200, text.encode(), content_type="text/plain")

    # -- cookies.test and the public-suffix shops ----------------------------------------

    def _cookies(self, request: Request, path: str) -> Answer:
        if request.cookies().get("visitor") not in self.visitors:
            visitor = secrets.token_hex(8)
            self.visitors.add(visitor)
            return redirect(302, request.target,
                            ("Set-Cookie", f"visitor={visitor}; Path=/; HttpOnly"))
        pages = [f"/page{n}.html" for n in range(1, COOKIE_PAGES + 1)]
        if path == "/":
            return Answer(200, html("cookies home", links([*pages, self.origin(OTHER) + "/"])))
        if path in pages:
            return Answer(200, html(path, f"<p>cookie page {path}</p>", links(["/"])))
        return Answer(404, html("not found"))

    def _shop(self, host: str, path: str) -> Answer:
        domain, sibling = PSL_SHOPS[host]
        if path != "/":
            return Answer(200, html(host, f"<p>a page of {host}: {path}</p>"))
        body = html("shop", links(["/basket.html", self.origin(sibling) + "/"]))
        return Answer(200, body, [("Set-Cookie", f"tracker=1; Domain={domain}; Path=/"),
                                  ("Set-Cookie", "basket=1; Path=/")])

    # -- basic.test, digest.test ----------------------------------------------------------

    @staticmethod
    def _members(count: int) -> list[str]:
        return ["/members/", *(f"/members/p{n}.html" for n in range(1, count))]

    def _guarded(self, request: Request, path: str) -> Answer:
        if path == "/":
            return Answer(200, html("public", "<p>public home</p>", links(["/members/"])))
        if not path.startswith("/members/"):
            return Answer(404, html("not found"))
        basic = request.host == BASIC
        if not (self._basic_ok(request) if basic else self._digest_ok(request)):
            if basic:
                challenge = f'Basic realm="{REALM}"'
            else:
                nonce = secrets.token_hex(16)
                self.nonces[nonce] = 0
                challenge = (f'Digest realm="{REALM}", qop="auth", algorithm=MD5, '
                             f'nonce="{nonce}", opaque="{_md5(REALM)}"')
            return Answer(401, html("401", "<p>members only</p>"),
                          [("WWW-Authenticate", challenge)])
        pages = self._members(MEMBER_PAGES)
        if path not in pages:
            return Answer(404, html("not found"))
        return Answer(200, html(path, f"<p>member page {path}</p>", links(pages)))

    @staticmethod
    def _basic_ok(request: Request) -> bool:
        expected = base64.b64encode(f"{BASIC_USER}:{BASIC_PASSWORD}".encode()).decode()
        return request.header("Authorization") == f"Basic {expected}"

    def _digest_ok(self, request: Request) -> bool:
        """RFC 7616 section 3.4 with MD5 and qop=auth; the nonce must be one issued here and its
        count grow (no replayed response)."""
        scheme, _, rest = (request.header("Authorization") or "").partition(" ")
        if scheme.lower() != "digest":
            return False
        fields = parse_keqv_list([item for item in parse_http_list(rest) if "=" in item])
        need = ("username", "realm", "nonce", "uri", "response", "qop", "nc", "cnonce")
        if any(key not in fields for key in need) or fields["qop"] != "auth":
            return False
        nonce, nc = fields["nonce"], _count(fields["nc"])
        if (fields["username"] != DIGEST_USER or fields["realm"] != REALM
                or fields["uri"] != request.target or nonce not in self.nonces
                or nc <= self.nonces[nonce]
                or fields.get("algorithm", "MD5").upper() != "MD5"):
            return False
        ha1 = _md5(f"{DIGEST_USER}:{REALM}:{DIGEST_PASSWORD}")
        ha2 = _md5(f"{request.method}:{fields['uri']}")
        expected = _md5(f"{ha1}:{nonce}:{fields['nc']}:{fields['cnonce']}:auth:{ha2}")
        if not secrets.compare_digest(expected, fields["response"]):
            return False
        self.nonces[nonce] = nc
        return True

    # -- forms.test ------------------------------------------------------------------------

    def _forms(self, request: Request, path: str) -> Answer:
        if path == "/":
            return Answer(200, html("forms home", links(["/login", "/members/"])))
        if path == "/login" and request.method == "GET":
            return self._login_form("")
        if path == "/login-js" and request.method == "GET":
            return self._login_form("", scripted=True)
        if path == "/login-get" and request.method == "GET":  # a form that sends by GET
            return self._login_form("", scripted=True, method="get")
        if path == "/session" and request.method == "POST":
            return self._log_in(request)
        pages = self._members(FORM_PAGES)
        if path not in pages:
            return Answer(404, html("not found"))
        sid = request.cookies().get("sid", "")
        if sid not in self.sessions:
            return redirect(302, f"/login?next={quote(path)}")
        if self.expire_after is not None and self.sessions[sid] >= self.expire_after:
            del self.sessions[sid]
            return redirect(302, f"/login?next={quote(path)}")
        self.sessions[sid] += 1
        following = pages[pages.index(path) + 1 : pages.index(path) + 2]
        return Answer(200, html(path, f"<p>member page {path}</p>", links(following),
                                f"<p>Signed in as {FORM_USER}. {LOGGED_IN} from the menu.</p>"))

    def _login_form(self, notice: str, *, scripted: bool = False, method: str = "post") -> Answer:
        login, csrf = secrets.token_hex(8), secrets.token_hex(8)
        self.login_forms[csrf] = login
        form = (f'<form action="/session" method="{method}">'
                '<input name="user" type="text"><input name="pass" type="password">'
                f'<input name="csrf" type="hidden" value="{csrf}">'
                '<button type="submit">Log in</button></form>')
        if scripted:  # /login-js: the form is built by a script (none in the HTML as sent)
            built = json.dumps(form).replace("<", "\\u003c")
            form = f"<div id=login></div><script>login.innerHTML = {built};</script>"
        return Answer(200, html("log in", notice, form),
                      [("Set-Cookie", f"login={login}; Path=/; HttpOnly")])

    def _log_in(self, request: Request) -> Answer:
        fields = {k: v[-1] for k, v in parse_qs(request.body.decode("utf-8", "replace")).items()}
        login = self.login_forms.pop(fields.get("csrf", ""), None)
        if login is None or request.cookies().get("login") != login:
            return Answer(403, html("403", "<p>Invalid form token</p>"))
        if (self.logins_fail or fields.get("user") != FORM_USER
                or fields.get("pass") != FORM_PASSWORD):
            return self._login_form(f"<p>{LOGIN_FAILED}</p>")
        sid = secrets.token_hex(16)
        self.sessions[sid] = 0
        return redirect(303, "/members/", ("Set-Cookie", f"sid={sid}; Path=/; HttpOnly"))

    # -- sitemaps.test ---------------------------------------------------------------------

    def _sitemaps(self, path: str) -> Answer:
        at = self.origin(SITEMAPS)
        first, second, third = list(SITEMAP_PAGES)[:3], list(SITEMAP_PAGES)[3:5], list(SITEMAP_PAGES)[5:]
        if path == "/":
            return Answer(200, html("sitemaps home", "<p>nothing linked here</p>"))
        if path == "/sitemap_index.xml.gz":
            entries = "".join(f"<sitemap><loc>{at}{p}</loc><lastmod>2026-07-01</lastmod></sitemap>"
                              for p in ("/maps/first.xml.gz", "/maps/second.xml", "/maps/third.txt"))
            return _gzip(_xml("sitemapindex", entries))
        if path == "/maps/first.xml.gz":
            return _gzip(self._urlset(first))
        if path == "/maps/second.xml":
            stray = f"<url><loc>{self.origin(ELSEWHERE)}/stray.html</loc></url>"
            return Answer(200, self._urlset(second, stray), content_type="application/xml")
        if path == "/maps/third.txt":
            return Answer(200, "".join(f"{at}{p}\n" for p in third).encode(),
                          content_type="text/plain")
        if path == "/sitemap.xml":
            entry = f"<url><loc>{at}{DEFAULT_SITEMAP_PAGE}</loc></url>"
            return Answer(200, _xml("urlset", entry), content_type="application/xml")
        if path in SITEMAP_PAGES or path == DEFAULT_SITEMAP_PAGE:
            return Answer(200, html(path, f"<p>sitemap page {path}</p>"))
        return Answer(404, html("not found"))

    def _urlset(self, paths: list[str], extra: str = "") -> bytes:
        entries = "".join(f"<url><loc>{self.origin(SITEMAPS)}{p}</loc>"
                          f"<lastmod>{self.lastmod.get(p, SITEMAP_PAGES[p])}</lastmod></url>"
                          for p in paths)
        return _xml("urlset", entries + extra)

    # -- gated.test ------------------------------------------------------------------------

    def _gated(self, path: str) -> Answer:
        self.gated_count += 1
        if self.gated_always or self.gated_count % 2 == 0:
            self.challenges += 1
            if self.challenges % 2:
                return Answer(403, CF_BLOCK, [("cf-mitigated", "challenge"), ("Server", "cloudflare"),
                                              ("Cache-Control", "private, no-store")])
            return Answer(200, CF_JS, [("Server", "cloudflare")])
        pages = [f"/page{n}.html" for n in range(1, GATED_PAGES + 1)]
        if path == "/":
            return Answer(200, html("gated home", "<p>gated home content</p>", links(pages)))
        if path in pages:
            n = path.removeprefix("/page").removesuffix(".html")
            return Answer(200, html(path, f"<p>page {n} content</p>"))
        return Answer(404, html("not found"))


def _count(nc: str) -> int:
    """A Digest nonce count (8 hex digits), or 0 if it is none."""
    try:
        return int(nc, 16) if len(nc) == 8 else 0
    except ValueError:
        return 0


def _xml(root: str, entries: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} '
            f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</{root}>\n').encode()


def _gzip(data: bytes) -> Answer:
    """A gzip file as a server sends one: the type says gzip, no Content-Encoding."""
    return Answer(200, gzip.compress(data, mtime=0), content_type="application/gzip")


@asynccontextmanager
async def session_web(*, expire_after: int | None = None, logins_fail: bool = False,
                      gated_always: bool = False) -> AsyncIterator[SessionWeb]:
    """The web served on a free loopback port until the block ends."""
    web = SessionWeb(expire_after, logins_fail, gated_always)
    async with trio.open_nursery() as nursery:
        await web.serve(nursery)
        yield web
        nursery.cancel_scope.cancel()
