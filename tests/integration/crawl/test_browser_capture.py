"""A crawl of the modern demo site with crawl.capture = "browser" (real Chromium), held to what
plain Chromium loading the same pages asks the demo server for (tests/support/plainchromium.py),
and to the server's log of the crawl itself: robots.txt and rests hold for every request the
browser made, and the WARC holds archiver's own exchanges plus each page's screenshot and text."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

import pytest

from archiver.stores import open_stores
from demoweb import DemoWeb
from demoweb.modern import MODERN_PAGES
from tests.support.browsercrawls import EMBED_REST, MIN_REST, BrowserCrawl
from tests.support.crawls import captures, records, warc_files, warcio_check
from tests.support.plainchromium import PlainLoad

SLACK = 0.01  # the demo server logs when a request's head arrived, to the millisecond


@pytest.fixture
def browser_crawl(modern_browser_crawl: BrowserCrawl) -> BrowserCrawl:
    return modern_browser_crawl


@pytest.fixture
def plain(modern_plain_loads: tuple[DemoWeb, dict[str, PlainLoad]]) -> dict[str, list[str]]:
    """Each modern page's requests in plain Chromium, as MODERN_REQUESTS writes them."""
    web, loads = modern_plain_loads
    origin, assets = web.origin("modern.demo"), web.origin("assets.demo")
    return {page: [seen.replace(assets, "//assets").removeprefix(origin) for seen in load.requests]
            for page, load in loads.items()}


def test_everything_plain_chromium_asks_for_is_captured_but_what_robots_txt_forbids(
        browser_crawl, plain):
    captured = {browser_crawl.short(url) for url in captures(browser_crawl.root)}
    missing = {}
    for page, requested in plain.items():
        # Cache busters differ from load to load: compared without their value.
        wanted = {target.split("=")[0] if "?_=" in target or "callback=" in target else target
                  for target in requested if not target.startswith("/private/")}
        have = {target.split("=")[0] if "?_=" in target or "callback=" in target else target
                for target in captured}
        if wanted - have:
            missing[page] = sorted(wanted - have)
    assert not missing
    assert "/private/tracker.js" in plain["/blocked.html"]  # the judge asks for it...
    assert "/private/tracker.js" not in captured  # ...archiver never does


def test_no_request_robots_txt_disallows_and_every_host_rests(browser_crawl):
    log = browser_crawl.server.log
    requested = {browser_crawl.web.origin(r.host) + r.target for r in log}
    assert not requested & browser_crawl.web.disallowed("archiver")
    assert not any(r.target.startswith("/private/") for r in log)
    by_host = defaultdict(list)
    for r in log:
        by_host[r.host].append(r)
    assert set(by_host) == {"modern.demo", "assets.demo"}
    for host, requests in by_host.items():
        requests.sort(key=lambda r: r.start)
        rest = EMBED_REST if host == "modern.demo" else MIN_REST
        for earlier, later in itertools.pairwise(requests):
            # One request at a time (one connection per host), and the rest between them.
            assert later.start - earlier.end >= rest - SLACK, (host, earlier, later)
    assert by_host["assets.demo"][0].target == "/robots.txt"  # its own robots.txt, first
    # What several pages ask for (the app's menu, by the app and each of its routes) is fetched
    # once: later pages are answered from memory.
    asked = Counter((r.host, r.target) for r in log)
    assert asked["modern.demo", "/api/menu.json"] == 1 and set(asked.values()) == {1}


def test_each_rendered_page_has_its_screenshot_and_text_after_its_response(browser_crawl):
    responses = {r.rec_headers.get_header("WARC-Target-URI"): r.rec_headers.get_header(
        "WARC-Record-ID") for r, _ in records(browser_crawl.root)}
    resources = {r.rec_headers.get_header("WARC-Target-URI"): (
        r.rec_headers.get_header("WARC-Refers-To"), r.rec_headers.get_header("Content-Type"), body)
        for r, body in records(browser_crawl.root, "resource")}
    for path in MODERN_PAGES:
        url = browser_crawl.modern + path
        refers_to, kind, png = resources[f"urn:screenshot:{url}"]
        assert refers_to == responses[url] and kind == "image/png"
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        refers_to, kind, _text = resources[f"urn:text:{url}"]
        assert refers_to == responses[url] and kind.startswith("text/plain")
    # The page whose first script robots.txt refused still rendered, by its second one.
    text = resources[f"urn:text:{browser_crawl.modern}/blocked.html"][2].decode()
    assert "This text was written by an allowed script" in text
    assert warcio_check(warc_files(browser_crawl.root)).returncode == 0


def test_what_scripts_built_is_crawled(browser_crawl):
    captured = {browser_crawl.short(url) for url in captures(browser_crawl.root)}
    # Links that only the JSON-built content and the app's pushState routes hold.
    assert {"/articles/1.html", "/articles/2.html", "/articles/3.html"} <= captured
    assert {"/app/intro", "/app/guide", "/app/faq"} <= captured
    # Linked from the infinite list's last chunk only, and kept out by the scope rule.
    queues = open_stores(browser_crawl.config).crawl_queues()
    last_item = browser_crawl.modern + "/items/50.html"
    assert [d.kind for d in queues.decisions(browser_crawl.modern, last_item)] == ["scope"]
    # Every HTML page was rendered ("browser"), and nothing else.
    pages = {r.rec_headers.get_header("WARC-Target-URI") for r, _ in records(browser_crawl.root)
             if r.http_headers.get_statuscode() == "200"
             and r.http_headers.get_header("Content-Type", "").startswith("text/html")}
    texts = {r.rec_headers.get_header("WARC-Target-URI")
             for r, _ in records(browser_crawl.root, "resource")} - {f"urn:screenshot:{u}" for u in pages}
    assert texts == {f"urn:text:{u}" for u in pages}
    stats = browser_crawl.crawler.stats
    assert stats.rendered == len(pages) > len(MODERN_PAGES) and not stats.errors.get("render")
