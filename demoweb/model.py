"""The demo web as a pure, deterministic function of a WebSpec (no I/O).

Normal sites `site-NNN.<domain>` each have numbered HTML pages (page 0 is "/"), a fixed set of
feature pages, assets, redirects and 404 links, and one of seven robots.txt kinds (ROBOTS_KINDS,
by site index). Site 7 is "lean" and asks for Crawl-delay: 1: a few pages and no assets, so that
it costs a polite crawler seconds, not minutes. Site 0 links to the special sites. With three or
more sites, the last one is an orphan that no other site links to.

With the trap on (spec.trap), normal site 1 (CALENDAR_SITE) also has an events calendar: its home
page links `/events/2026/11/`, and each month links the previous and the next month, "/" and the
About page. Month pages are served but never in `expected`: a sideways trap on a site whose real
pages must all be captured.

Truth for the special sites, as `expected` computes it:
- trap.<domain> (spec.trap): robots.txt (allow all), "/" and "/about.html". "/" also links the
  infinite parts `/cal/YYYY/MM/` (each month links the next and previous one) and `/a/a/.../`
  (each depth links the next); they are served but never in `expected`.
- robots500.<domain>: only "/robots.txt", which answers 500, so every other URL there is
  disallowed (RFC 9309 §2.3.1.4) even though the server would answer it.
- hostile.<domain> (spec.hostile): robots.txt (allow all), "/", "/ok-1.html", "/ok-2.html".
  The HOSTILE_PATHS linked from "/" are requested by a correct crawler but cannot be captured
  whole, so they are in neither `expected` nor `disallowed`.
- odd.<domain> (spec.odd): robots.txt (allow all), "/", "/about.html", and every page ODD_LINKS
  leads to. "/" links to every kind of odd URL (ODD_LINKS): spaces, non-ASCII in path and query,
  queries holding URLs, `%` garbage, tabs and newlines inside href, IDN and percent-encoded
  hosts, userinfo, upper case, a trailing host dot, backslashes, RFC 3986-illegal characters,
  a redirect whose Location holds a space; links a crawler must not fetch (other schemes, ports
  out of range, broken hosts) have the url ""; an IDN host and an IPv6 literal lead to hosts
  outside the web, which `expected` leaves out. The server finds an odd page by its fully
  percent-decoded path and query, as a file server would, so any correct encoding reaches it.

A topical web (spec.topical: the focused crawl's test web) writes each normal site's prose on
one of content.TOPICS: a third of the sites (1, 4, 7...: RELEVANT_EVERY) on the first
("astronomy", RELEVANT_TOPIC), the others on the second, so the seed site 0 is off the topic, as
most of a real web is. Its sites are bare: pages only (no assets, feature pages, redirects or
Crawl-delay site). Each public page links TOPIC_LINKS other sites' "/", each of its own topic
nine times in ten (TOPIC_AFFINITY), so relevant sites are linked mostly from relevant pages;
the chain links join the sites of each topic (site n to site n+3), so every site is reached
from sites 0 and 1. `page_topic(url)` is the truth a harvest rate counts against: the topic of
a numbered page, None for anything else.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import random
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from demoweb import content, modern

ROBOTS_KINDS = (
    "allow-all",
    "private",
    "agent-group",
    "allow-override",
    "wildcards",
    "missing",
    "redirect",
)
CRAWL_DELAY_SITE = 7
CALENDAR_SITE = 1
LEAN_PAGES = 3
HOSTILE_PATHS = (
    "/drip",
    "/hang",
    "/endless",
    "/bigheaders",
    "/badstatus",
    "/reset",
    "/bomb",
    "/lie",
)
# The odd site's links: (raw href, the normalised path and query a correct crawler fetches, or
# "" if it must not fetch it). "{origin}" and "{port}" are the site's own; "{ORIGIN}" its origin
# in upper case. Local targets are served as small pages (found by their decoded form).
ODD_LINKS: tuple[tuple[str, str], ...] = (
    ("/q?http://example.org/é", "/q?http://example.org/%C3%A9"),
    ("/p?http://example.org/a b", "/p?http://example.org/a%20b"),
    ("/a b/c d.html", "/a%20b/c%20d.html"),
    ("café/menü.html", "/caf%C3%A9/men%C3%BC.html"),
    ("/search?q=ü ß&x=1", "/search?q=%C3%BC%20%C3%9F&x=1"),
    ("/bad%zzescape.html", "/bad%25zzescape.html"),
    ("/100%.html", "/100%25.html"),
    ("/%%41.html", "/%25A.html"),
    ("/lower%c3%a9.html", "/lower%C3%A9.html"),
    ("/tab\tbed/new\nline.html", "/tabbed/newline.html"),
    (" \n /spaced.html \t", "/spaced.html"),
    ("/share?u=https://example.org/x?y=1&z=2", "/share?u=https://example.org/x?y=1&z=2"),
    ("/login?next=/account/settings?tab=1", "/login?next=/account/settings?tab=1"),
    ("/redir?to=http%3A%2F%2Fexample.org%2F", "/redir?to=http%3A%2F%2Fexample.org%2F"),
    ("/%7Euser/%41bc.html", "/~user/Abc.html"),
    ("/dot/./seg/../x.html", "/dot/x.html"),
    ("\\back\\slash.html", "/back/slash.html"),
    ("/pipe|caret^brace{}.html", "/pipe%7Ccaret%5Ebrace%7B%7D.html"),
    ('/quote"lt<gt>.html', "/quote%22lt%3Cgt%3E.html"),
    ("/emoji/😀.html", "/emoji/%F0%9F%98%80.html"),
    ("/q2?name=o'brien&tick=`", "/q2?name=o'brien&tick=%60"),
    ("/empty-query?", "/empty-query?"),
    ("/moved page", "/moved%20page"),
    ("{ORIGIN}/Upper.html", "/Upper.html"),
    ("http://user:secret@{host}{port}/userinfo.html", "/userinfo.html"),
    ("http://{host}.{port}/dot-host.html", "/dot-host.html"),
    ("http://\uff4f\uff44\uff44.{domain}{port}/fullwidth.html", "/fullwidth.html"),
    ("http://%6Fdd.{domain}{port}/pct-host.html", "/pct-host.html"),
    ("http:\\\\{host}{port}\\backslash-host.html", "/backslash-host.html"),
    ("javascript:alert('odd')", ""),
    ("data:text/html,<b>odd</b>", ""),
    ("mailto:odd@example.org", ""),
    ("tel:+15550100", ""),
    ("ftp://{host}/file.txt", ""),
    ("http://{host}:99999/port.html", ""),
    ("http://{host}:0/zero.html", ""),
    ("http://[::1/broken.html", ""),
    ("http://exa mple.{domain}/space-host.html", ""),
    ("http://a..b.{domain}/empty-label.html", ""),
)
# Links to hosts outside the web: (raw href, normalised URL); spooled, never crawled here.
ODD_EXTERNAL = (
    ("http://bücher.example/", "http://xn--bcher-kva.example/"),
    ("http://[::1]{port}/v6.html", "http://[::1]{port}/v6.html"),
)
# The odd site's redirect: its Location holds a raw space.
ODD_REDIRECT = ("/moved page", "/landing page.html", "/landing%20page.html")
RELEVANT_TOPIC = content.TOPICS[0]
RELEVANT_EVERY = 3  # sites 1, 4, 7... are on the relevant topic
TOPIC_AFFINITY = 0.9  # the chance that a topical page's link to another site is to its topic
TOPIC_LINKS = 2  # links to other sites on each public page of a topical web


@dataclass(frozen=True)
class WebSpec:
    """Parameters of the synthetic web; equal specs give byte-identical webs."""

    sites: int = 12
    pages_per_site: int = 30
    port: int = 8080
    seed: int = 1
    domain: str = "demo"
    trap: bool = True
    hostile: bool = False
    odd: bool = False
    # Version 1 and later (the web changed, for recrawl and revisit tests): every third page's
    # text edited, /news/v<N>.html added, each site's last page removed and its version-0 bytes
    # served beside it at <name>-moved.html, linked from the home page, and robots.txt given a
    # group for another crawler.
    version: int = 0
    # Sites on two topics, pages only (see the module docstring).
    topical: bool = False
    # The modern site (pages built by scripts) and its assets host (see demoweb.modern).
    modern: bool = False


@dataclass(frozen=True)
class Reply:
    """What the server sends; `behaviour` tells it how (hostile names are acted out)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    behaviour: str = "normal"  # "normal", "chunked", "gzip", or a HOSTILE_PATHS name


@dataclass(frozen=True)
class Link:
    """One reference in a document: `kind` is "tag/attribute" ("a/href", "img/srcset",
    "meta/refresh"...), "css/url" and "css/import" in stylesheets, "style/url" in <style>
    blocks (@import too), "style-attr/url" in style= attributes, or "redirect" (Location).
    `raw` is the reference as a parser hands it over (entities decoded); `url` is absolute and
    normalised (RFC 3986 §6.2.2: case, unreserved escapes, dot segments; no fragment, no
    default port), or `raw` itself for mailto: and javascript: links."""

    kind: str
    raw: str
    url: str


@dataclass(frozen=True)
class RobotsGroup:
    """One robots.txt group: lower-case agent tokens, (allow, pattern) rules, Crawl-delay."""

    agents: tuple[str, ...]
    rules: tuple[tuple[bool, str], ...] = ()
    crawl_delay: int | None = None


_PRIVATE = RobotsGroup(("*",), ((False, "/private/"),))
_KIND_GROUPS: dict[str, tuple[RobotsGroup, ...]] = {
    "allow-all": (RobotsGroup(("*",)),),
    "private": (_PRIVATE,),
    # RFC 9309 §2.2.1: a crawler obeys only the group naming it, so "archiver" may enter
    # /private/ but not /nocrawl/, and every other agent the reverse.
    "agent-group": (
        _PRIVATE,
        RobotsGroup(("archiver", "otherbot"), ((False, "/nocrawl/"), (True, "/"))),
    ),
    # RFC 9309 §2.2.2: the longest match wins, so the Allow reopens /private/open/.
    "allow-override": (RobotsGroup(("*",), ((False, "/private/"), (True, "/private/open/"))),),
    "wildcards": (
        RobotsGroup(("*",), ((False, "/*.pdf$"), (False, "/*session="), (False, "/*/drafts/"))),
    ),
    "missing": (),  # robots.txt answers 404: allow all (RFC 9309 §2.3.1.3)
    "redirect": (_PRIVATE,),  # served at /robots-main.txt behind a 301 from /robots.txt
}
# Every fifth page from page 2 lies in a zone some robots kind closes; each site's own rules
# come first in its zone order, so even a small site has pages its robots.txt keeps out.
_ZONES = ("/private/", "/private/open/", "/nocrawl/", "/blog/drafts/")
_ZONE_ORDER = {
    "agent-group": ("/private/", "/nocrawl/", "/private/open/", "/blog/drafts/"),
    "wildcards": ("/blog/drafts/", "/private/", "/private/open/", "/nocrawl/"),
}

_HTML = "text/html; charset=utf-8"
_IMAGES = {  # name: (width, height)
    "logo": (40, 20),
    "bg": (24, 24),
    "hero": (48, 32),
    "badge": (16, 16),
    "print-logo": (40, 20),
    "theme-bg": (24, 24),
    "paper": (32, 32),
    "table": (32, 16),
    "cell": (16, 16),
    "photo": (40, 40),
    "photo-2x": (48, 48),
    "low": (20, 20),
    "submit": (24, 12),
}
_BINARIES = {  # path: (content type, magic, size)
    "/fonts/body.woff2": ("font/woff2", b"wOF2", 6000),
    "/applets/Demo.class": ("application/java-vm", b"\xca\xfe\xba\xbe", 2500),
    "/media/clip.swf": ("application/x-shockwave-flash", b"FWS", 5000),
    "/media/anim.swf": ("application/x-shockwave-flash", b"FWS", 3500),
    "/files/report.pdf": ("application/pdf", b"%PDF-1.4\n", 8000),
    "/files/report.pdf?download=1": ("application/pdf", b"%PDF-1.4\n", 8000),
}
_STATIC: dict[str, tuple] = {
    "/frames.html": ("html", "frames"),
    "/frames/nav.html": ("html", "frame-nav"),
    "/frames/content.html": ("html", "frame-content"),
    "/embed/widget.html": ("html", "widget"),
    "/legacy.html": ("html", "legacy"),
    "/maps/north.html": ("html", "plain"),
    "/base/index.html": ("html", "base"),
    "/docs/based.html": ("html", "plain"),
    "/refresh.html": ("html", "refresh"),
    "/refreshed.html": ("html", "plain"),
    "/~staff/index.html": ("html", "plain"),
    "/search?q=demo&session=abc123": ("html", "search"),
    "/moved/here.html": ("html", "plain"),
    "/css/site.css": ("css", "site"),
    "/css/print.css": ("css", "print"),
    "/css/theme.css": ("css", "theme"),
    "/js/app.js": ("js",),
    "/favicon.ico": ("ico",),
    "/old": ("redirect", 301, "{origin}/moved/", "/moved/"),
    "/moved/": ("redirect", 302, "here.html", "/moved/here.html"),  # relative, RFC 9110 §10.2.2
    "/loop-a": ("redirect", 302, "/loop-b", "/loop-b"),
    "/loop-b": ("redirect", 302, "{origin}/loop-a", "/loop-a"),
    **{f"/img/{name}.png": ("png", name) for name in _IMAGES},
    **{path: ("binary", path) for path in _BINARIES},
}
_BEHAVIOUR = {"/legacy.html": "chunked", "/css/site.css": "chunked", "/js/app.js": "gzip"}
_CAL = re.compile(r"/cal/(\d{4})/(\d\d)/\Z")
_EVENTS = re.compile(r"/events/(\d{4})/(\d\d)/\Z")
_MONTH = re.compile(r"/(cal|events)/(\d{4})/(\d\d)/\Z")
_DEEP = re.compile(r"/(?:a/)+\Z")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_TOKEN = re.compile(r"[A-Za-z_-]*")


@dataclass(frozen=True)
class _Site:
    host: str
    kind: str  # a ROBOTS_KINDS entry, or "trap", "robots500", "hostile", "odd"
    groups: tuple[RobotsGroup, ...]
    table: dict[str, tuple]  # canonical path+query -> resource
    pages: tuple[str, ...] = ()
    children: tuple[tuple[int, ...], ...] = ()
    chain_page: int = -1  # the page that links the next site
    next_host: str = ""
    others: tuple[str, ...] = ()  # hosts its pages may link to
    lean: bool = False
    calendar: bool = False  # has the endless /events/YYYY/MM/ calendar
    topic: str = ""  # a content.TOPICS entry on a topical web, else ""

    @property
    def bare(self) -> bool:
        """Pages only: no assets, feature pages or redirects."""
        return self.lean or bool(self.topic)

    @property
    def robots_status(self) -> int:
        return {"missing": 404, "robots500": 500}.get(self.kind, 200)


def _public_path(i: int) -> str:
    return (
        f"/p{i}.html",
        f"/articles/{i:04d}.html",
        f"/docs/s{i % 3}/page-{i}.html",
        f"/blog/2025/{i % 12 + 1:02d}/post-{i}/",
        f"/list?page={i}&sort=asc",
        f"/docs/s{i % 3}/deep/topic-{i}.html",
    )[i % 6]


def _unescape(match: re.Match[str]) -> str:
    char = chr(int(match[1], 16))
    return char if char in _UNRESERVED else "%" + match[1].upper()


def _remove_dot_segments(path: str) -> str:
    segments = path.split("/")[1:]
    out: list[str] = []
    for n, seg in enumerate(segments):
        if seg in (".", ".."):
            if seg == ".." and out:
                out.pop()
            if n == len(segments) - 1:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def canonical_target(target: str) -> str:
    """Normalise a request target (path+query, or absolute form) as a web server would."""
    target = target.partition("#")[0]
    if not target.startswith("/"):
        parts = urlsplit(target)
        target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    path, sep, query = target.partition("?")
    path = _remove_dot_segments(_ESCAPE.sub(_unescape, path) or "/")
    return path + sep + _ESCAPE.sub(_unescape, query)


def _decoded(target: str) -> str:
    """A path and query fully percent-decoded (UTF-8, errors replaced), as a file server finds
    a resource; the odd site's pages are keyed by it."""
    path, sep, query = target.partition("?")
    return unquote(path, errors="replace") + sep + unquote(query, errors="replace")


def _relative(base: str, target: str) -> str:
    """A relative reference from document path `base` to path+query `target` (with ../)."""
    path, sep, query = target.partition("?")
    base_dir = base.partition("?")[0].split("/")[1:-1]
    segments = path.split("/")[1:]
    common = 0
    while (
        common < len(base_dir)
        and common < len(segments) - 1
        and base_dir[common] == segments[common]
    ):
        common += 1
    rel = "../" * (len(base_dir) - common) + "/".join(segments[common:])
    return (rel or "./") + sep + query


@functools.cache
def _rule_regex(pattern: str) -> re.Pattern[str]:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    return re.compile(".*".join(map(re.escape, body.split("*"))) + ("\\Z" if anchored else ""))


def rules_allow(groups: tuple[RobotsGroup, ...], agent: str, target: str) -> bool:
    """RFC 9309 matching: the groups naming the agent's product token (else "*"); the longest
    matching pattern wins, Allow on a tie; no match means allowed."""
    token = _TOKEN.match(agent)[0].lower()  # the product token: [A-Za-z_-]* at the start
    chosen = [g for g in groups if token in g.agents] or [g for g in groups if "*" in g.agents]
    best, allow = -1, True
    for group in chosen:
        for rule_allows, pattern in group.rules:
            longer = len(pattern) > best or (len(pattern) == best and rule_allows)
            if pattern and longer and _rule_regex(pattern).match(target):
                best, allow = len(pattern), rule_allows
    return allow


def render_robots(groups: tuple[RobotsGroup, ...], title: str) -> str:
    """robots.txt text for structured groups (field names in varied case, as found online)."""
    lines = [f"# robots.txt for {title}"]
    for n, group in enumerate(groups):
        field = "user-agent" if n % 2 else "User-agent"
        lines += [f"{field}: {agent}" for agent in group.agents]
        if group.crawl_delay is not None:
            lines.append(f"Crawl-delay: {group.crawl_delay}")
        lines += [f"{'Allow' if a else 'Disallow'}: {p}" for a, p in group.rules]
        if not group.rules:
            lines.append("Disallow:")
        lines.append("")
    return "\n".join(lines) + "\n"


class _Doc:
    """A document being written, with the links it carries, in the order written."""

    def __init__(self, web: DemoWeb, site: _Site, path: str, text: bool):
        self.web, self.site, self.path, self.text = web, site, path, text
        self.origin = web.origin(site.host)
        self.parts: list[str] = []
        self.links: list[Link] = []
        self.rng = random.Random(f"{web.spec.seed}:{site.host}:{path}:links")

    def url(self, path: str, host: str = "") -> str:
        return (self.web.origin(host) if host else self.origin) + path

    def ref(self, kind: str, target: str, raw: str | None = None) -> str:
        """Record a link to `target` written as `raw` (a varied form if None); HTML-escaped."""
        if raw is None:
            raw = self._variant(target)
        self.links.append(Link(kind, raw, target))
        return html.escape(raw)

    def _variant(self, target: str) -> str:
        roll = self.rng.randrange(10)
        if not target.startswith(self.origin + "/"):
            return self._shout(target) if roll == 0 else target
        path = target[len(self.origin) :]
        if roll < 3:
            return path
        if roll < 6:
            return _relative(self.path, path)
        if roll == 6:
            return target
        if roll == 7:
            return self._shout(target)
        if roll == 8:
            return f"{path}#part-{self.rng.randrange(1, 9)}"
        return "/docs/.." + path

    def _shout(self, url: str) -> str:
        """The same URL with upper-case scheme and host (RFC 3986 §6.2.2.1)."""
        scheme, rest = url.split("://", 1)
        host, _, path = rest.partition("/")
        return f"{scheme.upper()}://{host.upper()}/{path}"

    def prose(self, seed: str, size: int) -> list[str]:
        """Paragraphs from the web's pool totalling about `size` characters (none if text off)."""
        if not self.text:
            return []
        rng = random.Random(f"{self.web.spec.seed}:{seed}")
        if self.site.topic:
            pool = content.topic_paragraphs(self.web.spec.seed, self.site.topic)
        else:
            pool = content.paragraphs(self.web.spec.seed)
        chosen: list[str] = []
        total = 0
        while total < size:
            chosen.append(pool[rng.randrange(len(pool))])
            total += len(chosen[-1]) + 8
        return chosen

    def head(self, title: str, extra: str = "") -> None:
        self.parts.append(
            f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(title)}</title>\n{extra}"
        )

    def small(self, title: str, anchors: list[tuple[str, str]], size: int = 1500) -> None:
        """A short page: a title, some prose and anchors given as (escaped href, text)."""
        self.head(title)
        self.parts.append(f"</head>\n<body>\n<h1>{html.escape(title)}</h1>\n")
        self.parts += [f"<p>{p}</p>\n" for p in self.prose(f"{self.site.host}{self.path}", size)]
        self.parts += [f'<p><a href="{href}">{text}</a></p>\n' for href, text in anchors]
        self.parts.append("</body>\n</html>\n")

    def body(self) -> bytes:
        return "".join(self.parts).encode()


class DemoWeb:
    """The web for one WebSpec: hosts, what each URL answers, and the truth about a crawl."""

    def __init__(self, spec: WebSpec):
        if spec.sites < 1 or spec.pages_per_site < 1:
            raise ValueError("a demo web needs at least one site and one page per site")
        self.spec = spec
        width = max(3, len(str(spec.sites - 1)))
        self.normal_hosts = [f"site-{i:0{width}d}.{spec.domain}" for i in range(spec.sites)]
        special = ["trap"] * spec.trap + ["robots500"] + ["hostile"] * spec.hostile
        special += ["odd"] * spec.odd + ["modern", "assets"] * spec.modern
        self.special_hosts = {name: f"{name}.{spec.domain}" for name in special}
        self.hosts: list[str] = self.normal_hosts + list(self.special_hosts.values())
        self._index = {host: n for n, host in enumerate(self.hosts)}
        self._port = "" if spec.port == 80 else f":{spec.port}"
        self._sites: dict[str, _Site] = {}
        # With three sites or more the last is an orphan: only a crawl seeding it reaches it.
        self._linked = self.normal_hosts[: -1 if spec.sites >= 3 else None]
        self._first: DemoWeb | None = None  # version 0 of this web, for pages that moved

    def first_version(self) -> DemoWeb:
        """This web as version 0 served it (itself, if it is version 0)."""
        if self.spec.version == 0:
            return self
        if self._first is None:
            self._first = DemoWeb(dataclasses.replace(self.spec, version=0))
        return self._first

    # -- addresses -------------------------------------------------------------------------

    def origin(self, host: str) -> str:
        return f"http://{host}{self._port}"

    def origins(self) -> list[str]:
        return [self.origin(host) for host in self.hosts]

    def seeds(self) -> list[str]:
        return [self.origin(self.hosts[0]) + "/"]

    def hosts_file(self, address: str = "127.0.0.1") -> str:
        header = f"# demo web: {self.spec}\n"
        return header + "".join(f"{address}\t{host}\n" for host in self.hosts)

    def topic(self, host: str) -> str:
        """A normal site's topic on a topical web ("" otherwise)."""
        return self._known(host).topic

    def page_topic(self, url: str) -> str | None:
        """The topic of a numbered page of a topical web's site; None for any other URL."""
        site, target = self._split(url)
        if site is None or not site.topic:
            return None
        res = site.table.get(target)
        return site.topic if res is not None and res[0] == "page" else None

    def pages(self, host: str) -> tuple[str, ...]:
        """The numbered pages of a normal site (path+query; page 0 is "/")."""
        return self._known(host).pages

    def modern_pages(self) -> list[str]:
        """URLs of the modern site's HTML pages that need scripts to show their content."""
        if not self.spec.modern:
            return []
        origin = self.origin(self.special_hosts["modern"])
        return [origin + path for path in modern.MODERN_PAGES]

    def modern_static_pages(self) -> list[str]:
        """URLs of the HTML pages of the modern and assets hosts that show their content
        without scripts."""
        if not self.spec.modern:
            return []
        return [
            self.origin(self.special_hosts[kind]) + path
            for kind in ("modern", "assets")
            for path, name in modern.paths(kind).items()
            if name == "page" and modern.is_static(kind, path)
        ]

    def _split(self, url: str) -> tuple[_Site | None, str]:
        parts = urlsplit(url)
        site = self._site((parts.hostname or "").rstrip("."))
        target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        return site, canonical_target(target)

    # -- structure -------------------------------------------------------------------------

    def _site(self, host: str) -> _Site | None:
        if host not in self._sites:
            n = self._index.get(host)
            if n is None:
                return None
            self._sites[host] = self._build(n, host)
        return self._sites[host]

    def _build(self, n: int, host: str) -> _Site:
        if n >= self.spec.sites:
            return self._build_special(host.partition(".")[0], host)
        spec = self.spec
        rng = random.Random(f"{spec.seed}:site:{n}")
        lean = n == CRAWL_DELAY_SITE and not spec.topical
        topic = content.TOPICS[n % RELEVANT_EVERY != 1] if spec.topical else ""
        count = min(spec.pages_per_site, LEAN_PAGES) if lean else spec.pages_per_site
        kind = ROBOTS_KINDS[n % len(ROBOTS_KINDS)]
        groups = _KIND_GROUPS[kind]
        if lean:
            groups = (RobotsGroup(("*",), crawl_delay=1),)
        pages, children, public = ["/"], [[]], [0]
        for i in range(1, count):
            parent = rng.choice(public)
            children[parent].append(i)
            children.append([])
            if 2 <= i < count - 1 and i % 5 == 2:
                zones = _ZONE_ORDER.get(kind, _ZONES)
                pages.append(f"{zones[(i // 5) % len(zones)]}doc-{i}.html")
            else:
                public.append(i)
                pages.append(_public_path(i))
        table: dict[str, tuple] = {} if lean or topic else dict(_STATIC)
        table.update({path: ("page", i) for i, path in enumerate(pages)})
        linked = self._linked
        pos = linked.index(host) if host in linked else -1
        step = RELEVANT_EVERY if topic else 1  # a topical web's chains stay within a topic
        next_host = linked[pos + step] if 0 <= pos < len(linked) - step else ""
        if len(linked) >= 2 and not lean and not topic:
            target = linked[(pos + 1) % len(linked)]
            table["/elsewhere"] = ("redirect", 301, self.origin(target) + "/", None)
        if kind == "redirect":
            table["/robots.txt"] = ("redirect", 301, "/robots-main.txt", "/robots-main.txt")
            table["/robots-main.txt"] = ("robots",)
        elif kind != "missing":
            table["/robots.txt"] = ("robots",)
        if spec.version >= 1:
            table[f"/news/v{spec.version}.html"] = ("html", "news")
            if count >= 3:
                del table[pages[-1]]  # the last page is a leaf: it disappears, links to it stay
                if pages[-1].endswith(".html"):  # and its bytes move beside it (same directory)
                    table[pages[-1].removesuffix(".html") + "-moved.html"] = ("moved", count - 1)
        return _Site(
            host=host,
            kind=kind,
            groups=groups,
            table=table,
            pages=tuple(pages),
            children=tuple(map(tuple, children)),
            chain_page=0 if lean else rng.choice(public),
            next_host=next_host,
            others=tuple(h for h in linked if h != host),
            lean=lean,
            calendar=spec.trap and n == CALENDAR_SITE and not lean and not topic,
            topic=topic,
        )

    def _build_special(self, kind: str, host: str) -> _Site:
        table: dict[str, tuple] = {"/robots.txt": ("robots",), "/": ("html", f"{kind}-home")}
        if kind == "trap":
            table["/about.html"] = ("html", "plain")
        elif kind == "robots500":
            table["/robots.txt"] = ("error", 500)
            table["/secret.html"] = table["/inside.html"] = ("html", "plain")
        elif kind in ("modern", "assets"):
            table.update({path: ("modern", name) for path, name in modern.paths(kind).items()})
        elif kind == "odd":
            table["/about.html"] = ("html", "plain")
            for _, target in ODD_LINKS:
                if target:
                    table[_decoded(target)] = ("html", "plain")
            moved, location, landing = ODD_REDIRECT
            table[moved] = ("redirect", 302, location, landing)
            table[_decoded(landing)] = ("html", "plain")
        else:
            table["/ok-1.html"] = table["/ok-2.html"] = ("html", "plain")
            table.update({path: ("hostile", path[1:]) for path in HOSTILE_PATHS})
        groups = () if kind == "robots500" else (RobotsGroup(("*",)),)
        if kind == "modern":
            groups = (_PRIVATE,)
        return _Site(host=host, kind=kind, groups=groups, table=table)

    def _resource(self, site: _Site, target: str) -> tuple | None:
        if site.kind == "odd":
            target = _decoded(target)
        found = site.table.get(target)
        if found is None and site.kind == "modern" and (name := modern.resource(site.kind, target)):
            found = ("modern", name)
        elif found is None and site.kind == "trap":
            if cal := _CAL.match(target):
                year, month = int(cal[1]), int(cal[2])
                found = ("html", "cal") if year and 1 <= month <= 12 else None
            elif _DEEP.match(target):
                found = ("html", "deep")
        elif found is None and site.calendar and (month := _EVENTS.match(target)):
            year, number = int(month[1]), int(month[2])
            found = ("html", "cal") if year and 1 <= number <= 12 else None
        return found

    # -- robots ----------------------------------------------------------------------------

    def robots_groups(self, host: str) -> tuple[RobotsGroup, ...]:
        """The structured rules behind a host's robots.txt (empty: allow all or, for a 5xx
        robots.txt, disallow all; see `allowed`)."""
        return self._known(host).groups

    def allowed(self, agent: str, url: str) -> bool:
        """May `agent` fetch `url`, per the model's own rules (robots.txt itself always)."""
        site, target = self._split(url)
        if site is None:
            raise KeyError(url)
        if target in ("/robots.txt", "/robots-main.txt"):
            return True
        if site.robots_status >= 500:
            return False  # RFC 9309 §2.3.1.4: unreachable robots.txt, complete disallow
        return rules_allow(site.groups, agent, target)

    # -- documents -------------------------------------------------------------------------

    def page_links(self, url: str) -> tuple[Link, ...]:
        """Every link of the document at `url`, in document order (empty for non-documents)."""
        site, target = self._split(url)
        if site is None:
            return ()
        return tuple(self._links(site, target))

    def _links(self, site: _Site, target: str) -> list[Link]:
        res = self._resource(site, target)
        if res is None:
            return []
        if res[0] == "redirect":
            return [self._redirect_link(site, res)]
        if res[0] == "moved":
            first = self.first_version()
            return first._links(first._known(site.host), site.pages[res[1]])
        if res[0] in ("page", "html", "css"):
            return self._document(site, target, res, text=False).links
        if res[0] == "modern" and res[1] == "page":
            return [Link(*ref) for ref in self._modern_document(site, target)[1]]
        return []

    def _modern_document(self, site: _Site, target: str) -> tuple[str, list[modern.Ref]]:
        assets = self.origin(self.special_hosts["assets"])
        return modern.document(site.kind, target, self.origin(site.host), assets, self.spec.seed)

    def _redirect_link(self, site: _Site, res: tuple) -> Link:
        origin = self.origin(site.host)
        raw = res[2].format(origin=origin)
        return Link("redirect", raw, origin + res[3] if res[3] else raw)

    def _document(self, site: _Site, target: str, res: tuple, text: bool) -> _Doc:
        doc = _Doc(self, site, target, text)
        if res[0] == "page":
            self._page(doc, res[1])
        elif res[0] == "css":
            self._css(doc, res[1])
        else:
            _BUILDERS[res[1]](self, doc)
        return doc

    def _page(self, d: _Doc, i: int) -> None:
        site, spec = d.site, self.spec
        rng = d.rng
        head = ""
        if not site.bare:
            head = (
                f'<link rel="stylesheet" href="{d.ref("link/href", d.url("/css/site.css"))}">\n'
                f'<link rel="icon" href="{d.ref("link/href", d.url("/favicon.ico"))}">\n'
                f'<script src="{d.ref("script/src", d.url("/js/app.js"))}"></script>\n'
            )
            if i == 0:
                theme = d.ref("style/url", d.url("/css/theme.css"), "/css/theme.css")
                hero = d.ref("style/url", d.url("/img/hero.png"), "img/hero.png")
                head += (
                    f'<style>\n@import url("{theme}");\n'
                    f".hero {{ background: url({hero}) no-repeat; min-height: 8em; }}\n</style>\n"
                )
        title = f"{site.host}: page {i}"
        d.head(title, head)
        nav = [(d.ref("a/href", d.url("/")), "Home")]
        if len(site.pages) > 1:
            nav.append((d.ref("a/href", d.url(site.pages[1])), "About"))
        d.parts.append(
            '</head>\n<body id="top">\n<header><nav>'
            + " | ".join(f'<a href="{h}">{t}</a>' for h, t in nav)
            + f'</nav></header>\n<main class="hero">\n<h1>{html.escape(title)}</h1>\n'
        )
        anchors = [(d.ref("a/href", d.url(site.pages[j])), f"page {j}") for j in site.children[i]]
        for j in rng.sample(range(len(site.pages)), min(len(site.pages), rng.randint(3, 8))):
            anchors.append((d.ref("a/href", d.url(site.pages[j])), f"see page {j}"))
        if site.topic:
            for _ in range(TOPIC_LINKS if site.others and not d.path.startswith(_ZONES) else 0):
                other = self._topical_neighbour(site, rng)
                anchors.append((d.ref("a/href", d.url("/", other)), f"friends at {other}"))
        elif not site.lean:
            if rng.random() < 0.25:
                anchors.append((d.ref("a/href", d.url(f"/articles/missing-{i}.html")), "gone"))
            if site.others and not d.path.startswith(_ZONES) and rng.random() < 0.15:
                other = rng.choice(site.others)
                anchors.append((d.ref("a/href", d.url("/", other)), f"friends at {other}"))
        if i == site.chain_page and site.next_host:
            anchors.append((d.ref("a/href", d.url("/", site.next_host)), site.next_host))
        if i == 0:
            anchors += self._home_anchors(d)
        paragraphs = d.prose(
            f"{site.host}{d.path}:text:{spec.version if i % 3 == 0 else 0}",
            random.Random(f"{spec.seed}:{site.host}:{i}:size").randint(5000, 26000),
        ) or [""]
        for n, para in enumerate(paragraphs):
            mine = anchors[n :: len(paragraphs)]
            links = " ".join(f'<a href="{h}">{t}</a>' for h, t in mine)
            d.parts.append(f"<p>{para} {links}</p>\n")
        if not site.bare:
            logo = d.ref("img/src", d.url("/img/logo.png"))
            srcset = ""
            if i % 4 == 0:
                one = d.ref("img/srcset", d.url("/img/photo.png"))
                two = d.ref("img/srcset", d.url("/img/photo-2x.png"))
                srcset = f' srcset="{one} 1x, {two} 2x"'
            d.parts.append(f'<p><img src="{logo}"{srcset} alt="logo" width="40"></p>\n')
            if i % 5 == 0:
                badge = d.ref("style-attr/url", d.url("/img/badge.png"), "/img/badge.png")
                d.parts.append(f"<div style=\"background-image: url('{badge}')\">badge</div>\n")
        d.parts.append('</main>\n<footer><a href="#top">Top</a>')  # same document: no link
        if i % 3 == 0:
            mail = f"mailto:webmaster@{site.host}"
            d.parts.append(f' <a href="{d.ref("a/href", mail, mail)}">Write to us</a>')
        if i % 4 == 1:
            script = "javascript:window.print()"
            d.parts.append(f' <a href="{d.ref("a/href", script, script)}">Print</a>')
        d.parts.append("</footer>\n</body>\n</html>\n")

    def _topical_neighbour(self, site: _Site, rng: random.Random) -> str:
        """Another site for a topical page to link: of its own topic with TOPIC_AFFINITY."""
        same = rng.random() < TOPIC_AFFINITY
        chosen = [h for h in site.others if (self._known(h).topic == site.topic) == same]
        return rng.choice(chosen or list(site.others))

    def _home_anchors(self, d: _Doc) -> list[tuple[str, str]]:
        site = d.site
        targets = []
        if not site.bare:
            targets = [
                "/frames.html",
                "/legacy.html",
                "/base/index.html",
                "/refresh.html",
                "/search?q=demo&session=abc123",
                "/files/report.pdf",
                "/files/report.pdf?download=1",
                "/old",
                "/loop-a",
                "/missing.html",
                "/gone/page.html",
            ]
            if "/elsewhere" in site.table:
                targets.append("/elsewhere")
            if site.calendar:
                targets.append("/events/2026/11/")
        anchors = [(d.ref("a/href", d.url(t)), t) for t in targets]
        if not site.bare:
            staff = d.url("/~staff/index.html")
            for raw in ("/%7Estaff/index.html", "/%7estaff/index.html"):
                anchors.append((d.ref("a/href", staff, raw), "staff"))
            loud = d._shout(d.url("/~staff/./index.html#team"))
            anchors.append((d.ref("a/href", staff, loud), "our team"))
        if self.spec.version >= 1:
            news = d.url(f"/news/v{self.spec.version}.html")
            anchors.append((d.ref("a/href", news), "what is new"))
            for target, res in site.table.items():
                if res[0] == "moved":
                    anchors.append((d.ref("a/href", d.url(target)), "moved here"))
        if site.host == self.hosts[0]:
            for name, host in self.special_hosts.items():
                if name == "assets":  # reached from the modern site's pages
                    continue
                anchors.append((d.ref("a/href", d.url("/", host)), host))
        return anchors

    def _css(self, d: _Doc, name: str) -> None:
        if name == "site":
            imp = d.ref("css/import", d.url("/css/print.css"), "print.css")
            font = d.ref("css/url", d.url("/fonts/body.woff2"), "/fonts/body.woff2")
            bg = d.ref("css/url", d.url("/img/bg.png"), "../img/bg.png")
            logo = d.ref("css/url", d.url("/img/logo.png"), "../img/logo.png")
            d.parts.append(
                f'@import "{imp}";\n'
                f"@font-face {{ font-family: Body; src: url('{font}') format(\"woff2\"); }}\n"
                f"body {{ margin: 0 auto; max-width: 50em; background: #fdfdf8 url({bg}); }}\n"
                f'.logo {{ background-image: url("{logo}"); width: 40px; }}\n'
            )
            d.parts += [
                f".c{n} {{ margin: {n % 7}px; color: #{n * 4099 % 0xFFFFFF:06x}; }}\n"
                for n in range(60)
            ]
        elif name == "print":
            logo = d.ref("css/url", d.url("/img/print-logo.png"), "/img/print-logo.png")
            d.parts.append(f"@media print {{ .logo {{ background: url({logo}); }} }}\n")
        else:
            bg = d.ref("css/url", d.url("/img/theme-bg.png"), "../img/theme-bg.png")
            d.parts.append(f".theme {{ background: url('{bg}') repeat; color: #222; }}\n")

    # -- answers ---------------------------------------------------------------------------

    def respond(self, host: str, target: str) -> Reply:
        """The reply for a request; `host` is the Host header without port."""
        site = self._site(host.lower().rstrip("."))
        if site is None:
            return Reply(400, [("Content-Type", "text/plain")], b"unknown host\n")
        target = canonical_target(target)
        res = self._resource(site, target)
        if res is None:
            body = b"<!DOCTYPE html>\n<title>Not Found</title>\n<h1>Not Found</h1>\n"
            return Reply(404, [("Content-Type", _HTML)], body)
        kind = res[0]
        if kind == "redirect":
            link = self._redirect_link(site, res)
            headers = [("Location", link.raw), ("Content-Type", "text/plain")]
            return Reply(res[1], headers, f"Moved to {link.raw}\n".encode())
        if kind == "page":
            behaviour = {3: "chunked", 5: "gzip"}.get(res[1] % 7, "normal")
            body = self._document(site, target, res, text=True).body()
            return Reply(200, [("Content-Type", _HTML)], body, behaviour)
        if kind in ("html", "css"):
            ctype = _HTML if kind == "html" else "text/css"
            body = self._document(site, target, res, text=True).body()
            return Reply(200, [("Content-Type", ctype)], body, _BEHAVIOUR.get(target, "normal"))
        if kind == "moved":  # the page as version 0 served it at its old URL, byte for byte
            return self.first_version().respond(host, site.pages[res[1]])
        if kind == "robots":
            text = render_robots(site.groups, f"{site.host} ({site.kind})")
            if self.spec.version >= 1:  # a rule for another crawler added: the file changed
                text += f"\n# version {self.spec.version}\nUser-agent: badbot\nDisallow: /\n"
            return Reply(200, [("Content-Type", "text/plain")], text.encode())
        if kind == "error":
            return Reply(res[1], [("Content-Type", "text/plain")], b"Internal Server Error\n")
        if kind == "hostile":
            return self._hostile(res[1])
        if kind == "modern" and res[1] == "page":
            return Reply(200, [("Content-Type", _HTML)], self._modern_document(site, target)[0].encode())
        if kind == "modern":
            ctype, body = modern.reply(site.kind, res[1], target, self.spec.seed)
            return Reply(200, [("Content-Type", ctype)], body)
        return self._asset(site, target, res)

    def _asset(self, site: _Site, target: str, res: tuple) -> Reply:
        seed = f"{self.spec.seed}:{site.host}:{target.partition('?')[0]}"
        if res[0] == "png":
            body = content.png(seed, *_IMAGES[res[1]])
            return Reply(200, [("Content-Type", "image/png")], body)
        if res[0] == "ico":
            return Reply(200, [("Content-Type", "image/x-icon")], content.ico(seed))
        if res[0] == "js":
            lines = (
                f"  panel{n}: function () {{ return toggle('panel{n}', {n}); }}," for n in range(80)
            )
            body = ("var demo = {\n" + "\n".join(lines) + "\n};\n").encode()
            return Reply(200, [("Content-Type", "text/javascript")], body, "gzip")
        ctype, magic, size = _BINARIES[res[1]]
        return Reply(200, [("Content-Type", ctype)], content.binary(seed, magic, size))

    def _hostile(self, name: str) -> Reply:
        if name == "bomb":
            headers = [("Content-Type", _HTML), ("Content-Encoding", "gzip")]
            return Reply(200, headers, content.gzip_bomb(), "bomb")
        # hang and badstatus never send a valid status line
        status = 0 if name in ("hang", "badstatus") else 200
        return Reply(status, [("Content-Type", _HTML)], b"", name)

    # -- the truth about a crawl -----------------------------------------------------------

    def expected(
        self, agent: str, max_depth: int | None = None, all_sites: bool = True
    ) -> set[str]:
        """Every URL a correct crawler must fetch (see the module docstring for special sites).

        Each site is crawled breadth-first from its "/": robots.txt (and its redirect target)
        first, then same-site links allowed for `agent`. Depth counts link hops from "/" (every
        link kind counts one); a redirect target keeps the depth of the redirect, as wget
        counts them. Sites come from seeding every host's "/" (all_sites=True) or from
        seeds() plus every site reached by a cross-site link or redirect from a fetched page
        (all_sites=False, as the external-link batch feeds a crawl); cross-site links always
        point at a site's "/", so both ways start each site from "/" and a site's URLs do not
        depend on how it was reached: filter by host for the truth of a one-site crawl.
        """
        starts = self.hosts if all_sites else [urlsplit(url).hostname for url in self.seeds()]
        queue, seen, found = deque(starts), set(starts), set()
        while queue:
            urls, hosts = self._crawl_site(self._known(queue.popleft()), agent, max_depth)
            found |= urls
            for host in hosts - seen:
                seen.add(host)
                queue.append(host)
        return found

    def _known(self, host: str) -> _Site:
        site = self._site(host)
        if site is None:
            raise KeyError(host)
        return site

    def _crawl_site(
        self, site: _Site, agent: str, max_depth: int | None
    ) -> tuple[set[str], set[str]]:
        origin = self.origin(site.host)
        found = {origin + "/robots.txt"}
        if site.kind == "redirect":
            found.add(origin + "/robots-main.txt")
        if site.robots_status >= 500:
            return found, set()
        depth = {origin + "/": 0}
        queue, done, hosts = deque([origin + "/"]), set(), set()
        while queue:  # 0-1 breadth-first search: redirects cost 0 hops, links 1
            url = queue.popleft()
            if url in done:
                continue
            done.add(url)
            for link in self._links(site, url[len(origin) :]):
                if not link.url.startswith("http"):
                    continue
                if not link.url.startswith(origin + "/"):
                    host = urlsplit(link.url).hostname
                    if self._site(host or "") is not None:  # not the odd site's foreign links
                        hosts.add(host)
                    continue
                target = link.url[len(origin) :]
                hop = 0 if link.kind == "redirect" else 1
                new = depth[url] + hop
                if (
                    (max_depth is not None and new > max_depth)
                    or new >= depth.get(link.url, new + 1)
                    or self._never_expected(site, target)
                    or not rules_allow(site.groups, agent, target)
                ):
                    continue
                depth[link.url] = new
                if hop:
                    queue.append(link.url)
                else:
                    queue.appendleft(link.url)
        return found | set(depth), hosts

    def _never_expected(self, site: _Site, target: str) -> bool:
        if site.kind == "trap" or site.calendar:
            return self._resource(site, target) in (("html", "cal"), ("html", "deep"))
        return site.kind == "hostile" and target in HOSTILE_PATHS

    def in_trap(self, url: str) -> bool:
        """True for a URL of an endless part of the web (the trap site's calendar and depths,
        the calendar of CALENDAR_SITE): served, never expected."""
        site, target = self._split(url)
        return site is not None and (site.kind == "trap" or site.calendar) and self._resource(
            site, target) in (("html", "cal"), ("html", "deep"))

    def _all_links(self) -> list[tuple[_Site, Link]]:
        """Links of every finite document of the web (the trap's infinite part excluded)."""
        out = []
        for host in self.hosts:
            site = self._known(host)
            for target in site.table:
                out += [(site, link) for link in self._links(site, target)]
        return out

    def disallowed(self, agent: str) -> set[str]:
        """Linked URLs robots forbids `agent` (every one on a 5xx-robots site): never request."""
        return {
            link.url
            for _, link in self._all_links()
            if link.url.startswith("http")
            and self._split(link.url)[0] is not None
            and not self.allowed(agent, link.url)
        }

    def external_links(self) -> set[tuple[str, str]]:
        """(from origin, to URL) for each cross-site link or redirect; all of them are on
        pages that robots.txt leaves open to every agent."""
        out = set()
        for site, link in self._all_links():
            origin = self.origin(site.host)
            if link.url.startswith("http") and not link.url.startswith(origin + "/"):
                out.add((origin, link.url))
        return out


# -- fixed documents -------------------------------------------------------------------------


def _frames(web: DemoWeb, d: _Doc) -> None:
    nav = d.ref("frame/src", d.url("/frames/nav.html"), "frames/nav.html")
    main = d.ref("frame/src", d.url("/frames/content.html"), "/frames/content.html")
    d.head("Frames")
    d.parts.append(
        f'</head>\n<frameset cols="25%,75%">\n<frame src="{nav}">\n<frame src="{main}">\n'
        "</frameset>\n</html>\n"
    )


def _frame_nav(web: DemoWeb, d: _Doc) -> None:
    home = d.ref("a/href", d.url("/"), "../")
    main = d.ref("a/href", d.url("/frames/content.html"), "content.html")
    d.small("Navigation", [(home, "Home"), (main, "Contents")], 600)


def _frame_content(web: DemoWeb, d: _Doc) -> None:
    widget = d.ref("iframe/src", d.url("/embed/widget.html"), "../embed/widget.html")
    d.small("Contents", [(d.ref("a/href", d.url("/")), "Home")])
    d.parts.insert(-1, f'<iframe src="{widget}" width="300" height="200"></iframe>\n')


def _legacy(web: DemoWeb, d: _Doc) -> None:
    u = d.url
    paper = d.ref("body/background", u("/img/paper.png"), "img/paper.png")
    table = d.ref("table/background", u("/img/table.png"), "/img/table.png")
    cell = d.ref("td/background", u("/img/cell.png"), "img/cell.png")
    applet = d.ref("applet/code", u("/applets/Demo.class"), "/applets/Demo.class")
    obj = d.ref("object/data", u("/media/clip.swf"), "media/clip.swf")
    embed = d.ref("embed/src", u("/media/anim.swf"), "/media/anim.swf")
    photo = d.ref("img/src", u("/img/photo.png"), "img/photo.png")
    low = d.ref("img/lowsrc", u("/img/low.png"), "/img/low.png")
    area = d.ref("area/href", u("/maps/north.html"), "maps/north.html")
    submit = d.ref("input/src", u("/img/submit.png"), "img/submit.png")
    home = d.ref("a/href", u("/"), "./")
    d.head("Legacy markup")
    d.parts.append(
        f'</head>\n<body background="{paper}">\n<h1>Legacy markup</h1>\n'
        f'<table background="{table}"><tr><td background="{cell}">cell</td></tr></table>\n'
        f'<applet code="{applet}" width="120" height="80"></applet>\n'
        f'<object data="{obj}" type="application/x-shockwave-flash"></object>\n'
        f'<embed src="{embed}" type="application/x-shockwave-flash">\n'
        f'<img src="{photo}" lowsrc="{low}" usemap="#compass" alt="photo">\n'
        f'<map name="compass"><area shape="rect" coords="0,0,20,20" href="{area}"></map>\n'
        f'<form method="get"><input type="image" src="{submit}" alt="Go"></form>\n'
    )
    d.parts += [f"<p>{p}</p>\n" for p in d.prose(f"{d.site.host}{d.path}", 6000)]
    d.parts.append(f'<p><a href="{home}">Home</a></p>\n</body>\n</html>\n')


def _base(web: DemoWeb, d: _Doc) -> None:
    # Relative links resolve against <base href> (HTML §4.2.3), not against this page's URL.
    based = d.ref("a/href", d.url("/docs/based.html"), "based.html")
    logo = d.ref("img/src", d.url("/img/logo.png"), "../img/logo.png")
    home = d.ref("a/href", d.url("/"), "../")
    d.small("Base", [(based, "a page under the base"), (home, "Home")])
    d.parts.insert(1, f'<base href="{html.escape(d.origin)}/docs/">\n')
    d.parts.insert(-1, f'<p><img src="{logo}" alt="logo"></p>\n')


def _refresh(web: DemoWeb, d: _Doc) -> None:
    target = d.ref("meta/refresh", d.url("/refreshed.html"), "/refreshed.html")
    d.small("Refresh", [])
    d.parts.insert(1, f'<meta http-equiv="refresh" content="2; url={target}">\n')


def _search(web: DemoWeb, d: _Doc) -> None:
    first = d.ref("a/href", d.url(d.site.pages[-1] if d.site.pages else "/"))
    d.small("Search results", [(first, "the only result"), (d.ref("a/href", d.url("/")), "Home")])


def _plain(web: DemoWeb, d: _Doc) -> None:
    d.small(f"{d.site.host}{d.path}", [(d.ref("a/href", d.url("/")), "Home")])


def _news(web: DemoWeb, d: _Doc) -> None:
    about = d.url(d.site.pages[1] if len(d.site.pages) > 1 else "/")
    d.small(
        "What is new", [(d.ref("a/href", d.url("/")), "Home"), (d.ref("a/href", about), "About")]
    )


def _trap_home(web: DemoWeb, d: _Doc) -> None:
    anchors = [
        (d.ref("a/href", d.url("/about.html")), "About"),
        (d.ref("a/href", d.url("/cal/2026/11/")), "Calendar"),
        (d.ref("a/href", d.url("/a/")), "Deeper"),
        (d.ref("a/href", web.origin(web.hosts[0]) + "/"), "Back to the start"),
    ]
    d.small("A spider trap", anchors)


def _cal(web: DemoWeb, d: _Doc) -> None:
    found = _MONTH.match(d.path)
    assert found is not None
    name, year, month = found[1], int(found[2]), int(found[3])
    anchors = []
    for y, m, text in ((year, month - 1, "previous"), (year, month + 1, "next")):
        y, m = y + (m - 1) // 12, (m - 1) % 12 + 1
        if 1 <= y <= 9999:
            path = f"/{name}/{y:04d}/{m:02d}/"
            anchors.append((d.ref("a/href", d.url(path), _relative(d.path, path)), text))
    if d.site.calendar:  # an events calendar inside a real site also leads back into it
        anchors.append((d.ref("a/href", d.url("/"), "/"), "Home"))
        if len(d.site.pages) > 1:
            anchors.append((d.ref("a/href", d.url(d.site.pages[1])), "About"))
    d.small(f"Calendar {year:04d}-{month:02d}", anchors, 400)


def _deep(web: DemoWeb, d: _Doc) -> None:
    deeper = d.ref("a/href", d.url(d.path + "a/"), "a/")
    d.small(
        f"Depth {d.path.count('a')}",
        [(deeper, "deeper"), (d.ref("a/href", d.url("/")), "Top")],
        400,
    )


def _robots500_home(web: DemoWeb, d: _Doc) -> None:
    anchors = [(d.ref("a/href", d.url(p)), p) for p in ("/secret.html", "/inside.html")]
    d.small("Robots.txt answers 500 here", anchors)


def _hostile_home(web: DemoWeb, d: _Doc) -> None:
    paths = ("/ok-1.html", *HOSTILE_PATHS, "/ok-2.html")
    d.small("Hostile server", [(d.ref("a/href", d.url(p), p), p[1:]) for p in paths])


def _odd_home(web: DemoWeb, d: _Doc) -> None:
    host = d.site.host
    names = {"{origin}": d.origin, "{ORIGIN}": d.origin.upper(), "{host}": host,
             "{port}": d.origin[len(f"http://{host}") :], "{domain}": web.spec.domain}

    def fill(text: str) -> str:
        for name, value in names.items():
            text = text.replace(name, value)
        return text

    anchors = [(d.ref("a/href", d.url("/about.html")), "About")]
    for raw, target in ODD_LINKS:
        anchors.append((d.ref("a/href", d.url(target) if target else "", fill(raw)), "odd"))
    for raw, url in ODD_EXTERNAL:
        anchors.append((d.ref("a/href", fill(url), fill(raw)), "elsewhere"))
    d.small("Odd links", anchors)


_BUILDERS: dict[str, Callable[[DemoWeb, _Doc], None]] = {
    "frames": _frames,
    "frame-nav": _frame_nav,
    "frame-content": _frame_content,
    "legacy": _legacy,
    "base": _base,
    "refresh": _refresh,
    "search": _search,
    "plain": _plain,
    "widget": _plain,
    "news": _news,
    "trap-home": _trap_home,
    "cal": _cal,
    "deep": _deep,
    "robots500-home": _robots500_home,
    "hostile-home": _hostile_home,
    "odd-home": _odd_home,
}
