"""Tests for demoweb: the model's truth."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

from demoweb import (
    HOSTILE_PATHS,
    DemoWeb,
    RobotsGroup,
    WebSpec,
)
from demoweb.content import gzip_bomb
from demoweb.model import ROBOTS_KINDS, canonical_target

SPEC = WebSpec(sites=8, pages_per_site=12, port=8080, hostile=True)
AGENT = "archiver/0.1 (+http://archiver.test/)"


def split(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.path + ("?" + parts.query if parts.query else "")


def site_of_kind(web: DemoWeb, kind: str) -> str:
    return web.normal_hosts[ROBOTS_KINDS.index(kind)]


# -- the model -------------------------------------------------------------------------------


def test_model_is_deterministic():
    a, b, other = DemoWeb(SPEC), DemoWeb(SPEC), DemoWeb(WebSpec(**{**vars(SPEC), "seed": 2}))
    urls = sorted(a.expected(AGENT))
    assert urls == sorted(b.expected(AGENT))
    assert all(a.respond(*split(u)) == b.respond(*split(u)) for u in urls)
    differ = [u for u in urls if a.respond(*split(u)).body != other.respond(*split(u)).body]
    assert len(differ) > len(urls) // 2
    moved = DemoWeb(WebSpec(**{**vars(SPEC), "port": 9999}))  # the port shows only in links
    page = a.respond("site-001.demo", "/p6.html").body
    assert page.replace(b":8080/", b":9999/") == moved.respond("site-001.demo", "/p6.html").body


def test_hosts_origins_seeds_and_hosts_file():
    web = DemoWeb(SPEC)
    assert web.hosts[:2] == ["site-000.demo", "site-001.demo"]
    assert web.hosts[-3:] == ["trap.demo", "robots500.demo", "hostile.demo"]
    assert web.origins()[0] == "http://site-000.demo:8080"
    assert web.seeds() == ["http://site-000.demo:8080/"]
    lines = [line for line in web.hosts_file("127.0.0.2").splitlines() if line[:1] != "#"]
    assert lines == [f"127.0.0.2\t{host}" for host in web.hosts]
    assert DemoWeb(WebSpec(port=80)).origins()[0] == "http://site-000.demo"


def test_canonical_target():
    assert canonical_target("/%7estaff/./index.html#x") == "/~staff/index.html"
    assert canonical_target("/docs/../a%2fb?q=%7E%3d") == "/a%2Fb?q=~%3D"
    assert canonical_target("http://h:1/x/..") == "/"


def test_content_sizes_and_types():
    web = DemoWeb(SPEC)
    kinds: Counter[str] = Counter()
    for url in web.expected(AGENT):
        reply = web.respond(*split(url))
        ctype = dict(reply.headers).get("Content-Type", "")
        if "/robots" in url or reply.status != 200:
            continue
        kinds[ctype.split(";")[0]] += 1
        if ctype.startswith("image/png"):
            assert reply.body.startswith(b"\x89PNG\r\n\x1a\n") and 500 < len(reply.body) < 10_000
        if re.search(r"/(p\d+\.html|articles/\d+\.html|list\?.*|docs/s\d/.*)$", url):
            assert 5_000 <= len(reply.body) <= 30_000, url
    assert {"text/html", "text/css", "text/javascript", "image/png", "application/pdf"} <= set(
        kinds
    )


def test_gzip_bomb_inflates_to_zeros():
    small = gzip_bomb(8 << 20)
    assert gzip.decompress(small) == bytes(8 << 20)
    big = gzip_bomb()
    assert len(big) < 2 << 20 and int.from_bytes(big[-4:], "little") == (1 << 30) % (1 << 32)


# An extractor written independently of the model, to check that the links the model declares
# are the links a parser finds in what it serves.
_ATTRS = {
    "a": ("href",),
    "area": ("href",),
    "link": ("href",),
    "img": ("src", "lowsrc", "srcset"),
    "script": ("src",),
    "frame": ("src",),
    "iframe": ("src",),
    "embed": ("src",),
    "input": ("src",),
    "body": ("background",),
    "table": ("background",),
    "td": ("background",),
    "applet": ("code",),
    "object": ("data",),
}
_CSS = re.compile(r"""@import\s+(?:url\()?\s*["']?([^"')\s;]+)|url\(\s*["']?([^"')\s]+)""")


def _css_links(text: str, prefix: str, base: str) -> list[tuple[str, str]]:
    """Links of CSS text; only stylesheets tell imports ("css/import") from other urls."""
    return [
        (f"{prefix}/{'import' if imp and prefix == 'css' else 'url'}", urljoin(base, imp or url))
        for imp, url in _CSS.findall(text)
    ]


def _extract(url: str, body: bytes, is_css: bool) -> set[tuple[str, str]]:
    if is_css:
        found = _css_links(body.decode(), "css", url)
    else:
        tree = LexborHTMLParser(body.decode())
        base_node = tree.css_first("base[href]")
        base = urljoin(url, base_node.attributes["href"]) if base_node else url
        found = []
        for tag, attrs in _ATTRS.items():
            for node in tree.css(tag):
                for attr in attrs:
                    value = node.attributes.get(attr)
                    if value is None:
                        continue
                    refs = [c.split()[0] for c in value.split(",")] if attr == "srcset" else [value]
                    refs = [ref for ref in refs if not ref.startswith("#")]
                    found += [(f"{tag}/{attr}", urljoin(base, ref)) for ref in refs]
        for node in tree.css("meta[http-equiv]"):
            target = node.attributes["content"].partition("url=")[2]
            found.append(("meta/refresh", urljoin(base, target)))
        for node in tree.css("style"):
            found += _css_links(node.text(), "style", base)
        for node in tree.css("[style]"):
            found += [
                ("style-attr/url", u) for _, u in _css_links(node.attributes["style"], "", base)
            ]
    out = set()
    for kind, link in found:
        if link.lower().startswith("http"):
            host, target = split(link.partition("#")[0])
            port = urlsplit(link).port
            link = f"http://{host}:{port}{canonical_target(target)}"
        out.add((kind, link))
    return out


def test_declared_links_are_the_links_served():
    web = DemoWeb(SPEC)
    kinds: set[str] = set()
    checked = 0
    for url in sorted(web.expected(AGENT)):
        reply = web.respond(*split(url))
        ctype = dict(reply.headers).get("Content-Type", "")
        if reply.status != 200 or not ctype.startswith(("text/html", "text/css")):
            continue
        declared = {(link.kind, link.url) for link in web.page_links(url)}
        assert _extract(url, reply.body, ctype.startswith("text/css")) == declared, url
        kinds |= {kind for kind, _ in declared}
        checked += 1
    assert checked > 150
    assert {f"{tag}/{attr}" for tag, attrs in _ATTRS.items() for attr in attrs} <= kinds
    assert {"meta/refresh", "css/url", "css/import", "style/url"} <= kinds
    assert "style-attr/url" in kinds


def test_link_forms_and_non_http_links():
    web = DemoWeb(SPEC)
    home = web.seeds()[0]
    links = web.page_links(home)
    raws = {link.raw for link in links}
    assert {
        "/%7Estaff/index.html",
        "/%7estaff/index.html",
        "mailto:webmaster@site-000.demo",
    } <= raws
    staff = {link.url for link in links if "staff" in link.raw.lower()}
    assert staff == {"http://site-000.demo:8080/~staff/index.html"}
    assert any(raw.startswith("HTTP://SITE-000.DEMO:8080/") for raw in raws)
    assert any(
        raw.startswith("../")
        for u in web.expected(AGENT)
        for raw in (link.raw for link in web.page_links(u))
    )
    assert not any(u.startswith(("mailto:", "javascript:")) for u in web.expected(AGENT))
    redirect = web.page_links("http://site-000.demo:8080/moved/")
    assert [(r.kind, r.raw, r.url) for r in redirect] == [
        ("redirect", "here.html", "http://site-000.demo:8080/moved/here.html")
    ]


# -- robots ----------------------------------------------------------------------------------


def _parse_robots(text: str) -> list[RobotsGroup]:
    groups: list[dict] = []
    for line in text.splitlines():
        field, _, value = line.partition("#")[0].partition(":")
        field, value = field.strip().lower(), value.strip()
        if field == "user-agent":
            if not groups or groups[-1]["closed"]:
                groups.append({"agents": [], "rules": [], "delay": None, "closed": False})
            groups[-1]["agents"].append(value.lower())
        elif field in ("allow", "disallow", "crawl-delay"):
            group = groups[-1]
            group["closed"] = True
            if field == "crawl-delay":
                group["delay"] = int(value)
            elif value:
                group["rules"].append((field == "allow", value))
    return [RobotsGroup(tuple(g["agents"]), tuple(g["rules"]), g["delay"]) for g in groups]


def test_robots_text_says_what_the_structured_rules_say():
    web = DemoWeb(WebSpec(sites=8, pages_per_site=4))
    statuses = {}
    for host in web.hosts:
        reply = web.respond(host, "/robots.txt")
        if reply.status == 301:
            reply = web.respond(host, dict(reply.headers)["Location"])
        statuses[host] = reply.status
        if reply.status == 200:
            assert _parse_robots(reply.body.decode()) == list(web.robots_groups(host)), host
    assert statuses[site_of_kind(web, "missing")] == 404
    assert statuses["robots500.demo"] == 500
    assert "Crawl-delay: 1" in web.respond("site-007.demo", "/robots.txt").body.decode()


def test_robots_kinds_allow_what_they_should():
    web = DemoWeb(SPEC)

    def ok(agent: str, kind: str, target: str) -> bool:
        return web.allowed(agent, f"http://{site_of_kind(web, kind)}:8080{target}")

    assert ok("otherbot", "allow-all", "/private/doc-1.html")
    assert not ok(AGENT, "private", "/private/open/doc-1.html")
    assert ok(AGENT, "agent-group", "/private/doc-1.html")
    assert not ok(AGENT, "agent-group", "/nocrawl/doc-1.html")
    assert not ok("SomeBot/2", "agent-group", "/private/doc-1.html")
    assert ok("SomeBot/2", "agent-group", "/nocrawl/doc-1.html")
    assert ok(AGENT, "allow-override", "/private/open/doc-1.html")
    assert not ok(AGENT, "allow-override", "/private/doc-1.html")
    assert not ok(AGENT, "wildcards", "/files/report.pdf")
    assert ok(AGENT, "wildcards", "/files/report.pdf?download=1")
    assert not ok(AGENT, "wildcards", "/search?q=demo&session=abc123")
    assert not ok(AGENT, "wildcards", "/blog/drafts/doc-3.html")
    assert ok(AGENT, "missing", "/private/doc-1.html")
    assert not ok(AGENT, "redirect", "/private/doc-1.html")
    assert not web.allowed(AGENT, "http://robots500.demo:8080/")
    assert web.allowed(AGENT, "http://robots500.demo:8080/robots.txt")


def test_expected_honours_robots_agents_and_specials():
    web = DemoWeb(SPEC)
    mine, theirs = web.expected(AGENT), web.expected("SomeBot/2")
    forbidden = web.disallowed(AGENT)
    assert forbidden and not forbidden & mine
    assert not web.disallowed("SomeBot/2") & theirs
    group_site = "http://" + site_of_kind(web, "agent-group")
    assert any(u.startswith(group_site + ":8080/private/") for u in mine - theirs)
    assert not any(u.startswith(group_site + ":8080/private/") for u in theirs)
    assert {u for u in mine if "robots500" in u} == {"http://robots500.demo:8080/robots.txt"}
    assert "http://robots500.demo:8080/" in forbidden
    trap = {u for u in mine if "trap.demo" in u}
    assert trap == {f"http://trap.demo:8080{p}" for p in ("/robots.txt", "/", "/about.html")}
    hostile = {split(u)[1] for u in mine if "hostile.demo" in u}
    assert hostile == {"/robots.txt", "/", "/ok-1.html", "/ok-2.html"}
    linked = {link.url for link in web.page_links("http://hostile.demo:8080/")}
    assert {f"http://hostile.demo:8080{p}" for p in HOSTILE_PATHS} <= linked
    assert "http://site-006.demo:8080/robots-main.txt" in mine
    statuses = Counter(web.respond(*split(u)).status for u in mine)
    assert {200, 301, 302, 404, 500} <= set(statuses)


def test_expected_depth_and_seeds():
    web = DemoWeb(SPEC)
    full = web.expected(AGENT)
    top = web.expected(AGENT, max_depth=0)
    robots = {u for u in top if "/robots" in u}
    assert top - robots == {origin + "/" for origin in web.origins() if "robots500" not in origin}
    one = web.expected(AGENT, max_depth=1)
    assert top < one < full
    assert "http://site-000.demo:8080/moved/here.html" in one  # redirects cost no hop
    from_seeds = web.expected(AGENT, all_sites=False)
    assert {split(u)[0] for u in full - from_seeds} == {web.normal_hosts[-1]}  # the orphan


def test_external_links_reach_every_site_but_the_orphan():
    web = DemoWeb(SPEC)
    links = web.external_links()
    targets = {split(to)[0] for _, to in links}
    assert targets == set(web.hosts) - {web.normal_hosts[-1]}
    assert all(split(to)[1] == "/" for _, to in links)
    assert all(not to.startswith(origin + "/") for origin, to in links)
    fetched_by_all = web.expected(AGENT) & web.expected("SomeBot/2")
    found = {
        (f"http://{split(page)[0]}:8080", link.url)
        for page in fetched_by_all
        for link in web.page_links(page)
        if link.url.startswith("http") and split(link.url)[0] != split(page)[0]
    }
    assert found == links  # every cross-site link sits on a page any agent fetches
    specials = {"trap.demo", "robots500.demo", "hostile.demo"}
    assert {
        split(to)[0] for origin, to in links if origin.endswith("site-000.demo:8080")
    } >= specials


def test_trap_is_infinite():
    web = DemoWeb(SPEC)
    url, seen = "http://trap.demo:8080/a/", set()
    for _ in range(50):
        seen.add(url)
        assert web.respond(*split(url)).status == 200
        url = next(link.url for link in web.page_links(url) if link.raw == "a/")
    assert len(seen) == 50 and url.count("/a") == 51
    cal = {link.url for link in web.page_links("http://trap.demo:8080/cal/2026/12/")}
    assert cal == {"http://trap.demo:8080/cal/2026/11/", "http://trap.demo:8080/cal/2027/01/"}


def test_versions_change_some_pages():
    old, new = DemoWeb(SPEC), DemoWeb(WebSpec(**{**vars(SPEC), "version": 1}))
    host = "site-001.demo"
    pages = old.pages(host)
    bodies = [(old.respond(host, p), new.respond(host, p)) for p in pages]
    changed = [p for p, (a, b) in zip(pages, bodies, strict=True) if a.body != b.body]
    same = [p for p, (a, b) in zip(pages, bodies, strict=True) if a == b]
    assert "/" in changed and same
    assert bodies[-1][0].status == 200 and bodies[-1][1].status == 404
    assert old.respond(host, "/news/v1.html").status == 404
    assert new.respond(host, "/news/v1.html").status == 200
    assert "http://site-001.demo:8080/news/v1.html" in new.expected(AGENT)
    assert old.respond(host, "/img/logo.png") == new.respond(host, "/img/logo.png")
