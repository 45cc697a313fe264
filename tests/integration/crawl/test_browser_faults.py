"""Browser-assisted capture when it decides, and when the browser fails: crawl.capture = "auto"
renders the pages that need scripts and no other; a browser killed mid-page costs that page's
render only (it keeps its HTTP capture, labelled) and the site finishes with a new browser; a
browser that cannot start leaves every page captured over HTTP."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter

import pytest
import trio

from archiver.store.warcindex import labels_of
from demoweb.modern import MODERN_PAGES
from tests.support.browsercrawls import BrowserCrawl
from tests.support.crawls import captures, records

FAST_REST = 0.02  # these tests judge what is rendered, not the rests (test_browser_capture does)
FETCH_PAGE = "/fetch.html"  # its script asks for /api/content.json: the browser is mid-page then


def rendered(crawl: BrowserCrawl) -> set[str]:
    """The pages with a rendered text record, as paths of the modern host."""
    return {crawl.short(r.rec_headers.get_header("WARC-Target-URI").removeprefix("urn:text:"))
            for r, _ in records(crawl.root, "resource")
            if r.rec_headers.get_header("WARC-Target-URI").startswith("urn:text:")}


def labels(crawl: BrowserCrawl) -> dict[str, dict[str, str]]:
    """Each labelled response's labels, by path of the modern host."""
    ids = {r.rec_headers.get_header("WARC-Record-ID"): r.rec_headers.get_header("WARC-Target-URI")
           for r, _ in records(crawl.root)}
    found = {}
    for record, body in records(crawl.root, "metadata"):
        if (labelled := labels_of(record, body)) is not None and labelled[0] in ids:
            found[crawl.short(ids[labelled[0]])] = labelled[1]
    return found


@pytest.fixture(scope="module")
def auto_crawl(tmp_path_factory) -> BrowserCrawl:
    crawl = BrowserCrawl(tmp_path_factory.mktemp("auto"), "auto", min_rest=FAST_REST)
    trio.run(crawl.run)
    return crawl


def test_auto_renders_the_pages_that_need_scripts_and_no_other(auto_crawl):
    pages = {auto_crawl.short(url) for url in captures(auto_crawl.root)}
    app_routes = {page for page in pages if page.startswith("/app/")}  # each the app's shell
    assert app_routes > {"/app/"}
    assert rendered(auto_crawl) == set(MODERN_PAGES) | app_routes
    assert {"/", "/about.html", "/articles/1.html"} <= pages - rendered(auto_crawl)
    found = labels(auto_crawl)
    assert found["/app/"]["rendered"] == "auto: empty app root #app"
    assert "/about.html" not in found


async def kill_browser_mid_page(crawl: BrowserCrawl) -> None:
    """Kill the browser (its whole process group) while archiver fetches the JSON the page
    FETCH_PAGE asked for: the answer then finds the browser gone."""
    while not any(b" /api/content.json " in line for line in crawl.server.request_lines):
        await trio.sleep(0.001)  # the demo server signals nothing: its request lines are watched
    browsers = crawl.crawler.ctx.browsers
    assert browsers is not None
    pid = browsers.supervisor.pid()
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def killed_crawl(tmp_path_factory) -> BrowserCrawl:
    # No answer kept in memory either: what a later page asks again is read from the archive.
    crawl = BrowserCrawl(tmp_path_factory.mktemp("killed"), "browser", browser="kept_answers = 0\n",
                         min_rest=FAST_REST, tabs=1, beside=kill_browser_mid_page)
    trio.run(crawl.run)
    return crawl


def test_a_browser_killed_mid_page_costs_that_render_and_the_site_finishes(killed_crawl):
    browsers = killed_crawl.crawler.ctx.browsers
    assert browsers is not None and browsers.supervisor.starts >= 2
    stats = killed_crawl.crawler.stats
    assert stats.faults["browser-crashed"] == 1 and stats.errors["render"] == 1
    found = labels(killed_crawl)
    assert found[FETCH_PAGE]["render-failed"].startswith("browser crashed")
    assert "rendered" not in found[FETCH_PAGE]
    pages = {killed_crawl.short(url) for url in captures(killed_crawl.root)}
    assert FETCH_PAGE in pages  # its HTTP capture stays
    # Every other page was rendered by the next browser, to the end of the site.
    assert set(MODERN_PAGES) - {FETCH_PAGE} <= rendered(killed_crawl)
    assert {"/app/intro", "/app/faq"} <= rendered(killed_crawl)


def test_what_a_later_page_asks_again_is_read_from_the_archive_not_fetched(killed_crawl):
    requests = Counter(r.target for r in killed_crawl.server.log if r.host == "modern.demo")
    assert requests["/api/menu.json"] == 1  # asked by the app and by each of its routes
    assert [target for target, n in requests.items() if n > 1] == []
    texts = {r.rec_headers.get_header("WARC-Target-URI"): body
             for r, body in records(killed_crawl.root, "resource")}
    titles = [r["title"] for r in json.loads(
        killed_crawl.web.respond("modern.demo", "/api/menu.json").body)["routes"]]
    for route in ("/app/intro", "/app/faq"):  # their menus were built from the archived answer
        text = texts[f"urn:text:{killed_crawl.modern}{route}"]
        assert all(title.encode() in text for title in titles), route


def test_without_a_browser_every_page_is_captured_over_http(tmp_path):
    crawl = BrowserCrawl(tmp_path, "browser", min_rest=FAST_REST,
                         browser='executable = "no-such-chromium"\n')
    trio.run(crawl.run)
    pages = {crawl.short(url) for url in captures(crawl.root)}
    assert set(MODERN_PAGES) <= pages and not rendered(crawl)
    stats = crawl.crawler.stats
    assert stats.faults["browser-unavailable"] == 1  # tried once, not once per page
    assert stats.errors["render"] == len([p for p in pages if p.endswith((".html", "/"))])
    assert labels(crawl)["/"]["render-failed"].startswith("browser did not start")
