"""Tests for the demo web's modern site (spec.modern): its pages, answers and truth."""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

from demoweb import DemoWeb, WebSpec
from demoweb.modern import (
    APP_ROUTES,
    ARTICLES,
    ITEM_PAGES,
    ITEMS_PER_PAGE,
    MODERN_PAGES,
    MODERN_REQUESTS,
    VIDEO_SOURCES,
)

AGENT = "archiver/0.1 (+http://archiver.test/)"
SPEC = WebSpec(sites=3, pages_per_site=8, port=8080, modern=True)
WEB = DemoWeb(SPEC)
MODERN = WEB.origin("modern.demo")
ASSETS = WEB.origin("assets.demo")


def get(url: str) -> tuple[int, str, bytes]:
    parts = urlsplit(url)
    reply = WEB.respond(parts.hostname or "", parts.path + ("?" + parts.query if parts.query else ""))
    return reply.status, dict(reply.headers).get("Content-Type", ""), reply.body


def test_the_flag_adds_the_two_hosts_and_nothing_else():
    plain = DemoWeb(WebSpec(sites=3, pages_per_site=8, port=8080))
    assert set(WEB.hosts) - set(plain.hosts) == {"modern.demo", "assets.demo"}
    assert plain.modern_pages() == [] and plain.modern_static_pages() == []
    home = WEB.origin(WEB.hosts[0]) + "/"
    linked = {link.url for link in WEB.page_links(home)}
    assert MODERN + "/" in linked and ASSETS + "/" not in linked
    assert MODERN + "/" not in {link.url for link in plain.page_links(home)}
    # Every URL of the web without the flag answers the same bytes with it, but site 0's "/".
    for url in plain.expected(AGENT) | plain.disallowed(AGENT):
        parts = urlsplit(url)
        target = parts.path + ("?" + parts.query if parts.query else "")
        host = parts.hostname or ""
        if url != home:
            assert WEB.respond(host, target) == plain.respond(host, target), url


def test_home_links_every_page_statically():
    status, ctype, body = get(MODERN + "/")
    assert (status, ctype) == (200, "text/html; charset=utf-8")
    assert b"<script" not in body
    linked = [link.url for link in WEB.page_links(MODERN + "/")]
    assert linked == [MODERN + "/about.html", *(MODERN + p for p in MODERN_PAGES)]
    assert WEB.modern_pages() == [MODERN + p for p in MODERN_PAGES]


def test_script_pages_have_scripts_and_static_pages_show_text_without():
    for url in WEB.modern_pages():
        status, _, body = get(url)
        assert status == 200 and b"<script" in body, url
    statics = WEB.modern_static_pages()
    assert MODERN + "/about.html" in statics and ASSETS + "/" in statics
    assert {MODERN + f"/items/{n}.html" for n in range(1, ITEM_PAGES * ITEMS_PER_PAGE + 1)} <= set(statics)
    assert not set(statics) & set(WEB.modern_pages())
    for url in statics:
        status, ctype, body = get(url)
        assert (status, ctype) == (200, "text/html; charset=utf-8"), url
        assert b"<p>" in body and b"fetch(" not in body, url


def test_every_request_a_page_is_built_to_make_is_answered():
    for page, targets in MODERN_REQUESTS.items():
        for target in targets:
            origin = ASSETS if target.startswith("//assets") else MODERN
            target = target.removeprefix("//assets")
            status, ctype, body = get(origin + target.replace("*", "1764241000000"))
            assert status == 200 and body, (page, target)
            assert not ctype.startswith("text/html"), (page, target)
    for path, ctype in VIDEO_SOURCES.items():
        assert get(MODERN + path)[:2] == (200, ctype)
    for width in (480, 800, 1200):
        assert get(MODERN + f"/img/s-{width}.png")[:2] == (200, "image/png")


def test_json_answers_lead_to_real_pages():
    data = json.loads(get(MODERN + "/api/content.json")[2])
    assert [link["href"] for link in data["links"]] == [f"/articles/{n}.html" for n in range(1, ARTICLES + 1)]
    pages, seen = 0, []
    for n in range(1, ITEM_PAGES + 2):
        status, _, body = get(MODERN + f"/api/items?page={n}")
        if status != 200:
            break
        chunk = json.loads(body)
        pages += 1
        seen += [item["n"] for item in chunk["items"]]
        assert chunk["next"] == (n + 1 if n < ITEM_PAGES else None)
    assert pages == ITEM_PAGES and seen == list(range(1, ITEM_PAGES * ITEMS_PER_PAGE + 1))
    for n in seen:
        assert get(MODERN + f"/items/{n}.html")[0] == 200
    menu = json.loads(get(MODERN + "/api/menu.json")[2])
    assert [entry["route"] for entry in menu["routes"]] == list(APP_ROUTES)
    shell = get(MODERN + "/app/")[2]
    for route in APP_ROUTES:
        assert get(MODERN + f"/app/{route}")[2] == shell
        assert get(MODERN + f"/api/pages/{route}.json")[0] == 200
    assert re.search(rb'<div id="app"></div>', shell)


def test_jsonp_calls_the_callback_it_was_given():
    status, ctype, body = get(MODERN + "/api/jsonp.js?_=2&callback=jQuery3600_1764241000000")
    assert (status, ctype) == (200, "text/javascript")
    assert body.startswith(b"jQuery3600_1764241000000({")
    assert get(MODERN + "/api/jsonp.js?callback=alert(1)")[0] == 404
    assert get(MODERN + "/api/jsonp.js")[0] == 404


def test_robots_and_truth():
    assert not WEB.allowed(AGENT, MODERN + "/private/tracker.js")
    assert WEB.allowed(AGENT, MODERN + "/js/render.js") and WEB.allowed(AGENT, ASSETS + "/lib/widget.js")
    assert b"Disallow: /private/" in get(MODERN + "/robots.txt")[2]
    expected = {url for url in WEB.expected(AGENT) if url.startswith((MODERN, ASSETS))}
    assert expected == {
        MODERN + "/robots.txt",
        MODERN + "/",
        MODERN + "/about.html",
        *WEB.modern_pages(),
        MODERN + "/img/lazy-1.png",
        MODERN + "/img/lazy-2.png",
        MODERN + "/js/render.js",
        ASSETS + "/robots.txt",
        ASSETS + "/",
        ASSETS + "/lib/widget.js",
        ASSETS + "/lib/widget.css",
    }
    disallowed = {url for url in WEB.disallowed(AGENT) if url.startswith((MODERN, ASSETS))}
    assert disallowed == {MODERN + "/private/tracker.js"}
    # Seeded from site 0 alone, the crawl reaches both hosts too.
    assert expected <= WEB.expected(AGENT, all_sites=False)


def test_pages_name_no_host_outside_the_web():
    for url in WEB.modern_pages() + WEB.modern_static_pages():
        for found in re.findall(rb"https?://[^\s\"'<>]+", get(url)[2]):
            assert found.decode().startswith((MODERN + "/", ASSETS + "/")), (url, found)
