"""The modern demo site crawled with crawl.capture = "browser", replayed in Chromium: each page,
loaded through replay (the bannerless frame-mode ``if_`` URL) as tests/support/plainchromium.py
loads it live (same viewport, media played, scrolled to the end and back, same settle rule), looks
like the live load and like the crawl's own screenshot of the page (pixel comparisons), and the
replay makes no request outside the archive: the demo server is stopped (its log stays as the
crawl left it) and Chromium's NetLog shows no request outside the replay's origins.

/app/ picks its route from ``location.pathname``, which replay's script rewriting gives as the
archived URL's (archiver.replay.scripts); /xhr.html asks for a new cache buster and JSONP callback
name each load, which fuzzy matching and the JSONP rename answer."""

from __future__ import annotations

import base64
import json

import pytest
import trio
import trio.testing

from archiver.store.embedded.catalog import Catalog
from demoweb import DemoWeb
from demoweb.modern import MODERN_PAGES
from tests.support import chromium
from tests.support.browsercrawls import BrowserCrawl
from tests.support.chromium import ERR_NAME_NOT_RESOLVED, NetLog, read_netlog
from tests.support.crawls import records
from tests.support.plainchromium import PlainLoad, load, resolver_rules
from tests.support.replayarchive import serving

TOLERANCE = 16  # a pixel is alike when no RGB channel differs by more than this
# The share of pixels of two same-sized PNG screenshots (base64) alike within TOLERANCE, counted
# by Chromium itself (decoded into a canvas), or -1 when their sizes differ.
_ALIKE = """(async (first, second, tolerance) => {
  async function pixels(png) {
    const image = new Image();
    image.src = "data:image/png;base64," + png;
    await image.decode();
    const canvas = new OffscreenCanvas(image.width, image.height);
    const context = canvas.getContext("2d");
    context.drawImage(image, 0, 0);
    return context.getImageData(0, 0, image.width, image.height);
  }
  const a = await pixels(first), b = await pixels(second);
  if (a.width !== b.width || a.height !== b.height) return -1;
  let alike = 0;
  for (let i = 0; i < a.data.length; i += 4) {
    if (Math.abs(a.data[i] - b.data[i]) <= tolerance && Math.abs(a.data[i + 1] - b.data[i + 1]) <= tolerance
        && Math.abs(a.data[i + 2] - b.data[i + 2]) <= tolerance) alike++;
  }
  return alike / (a.width * a.height);
})"""
ALIKE = 0.999  # the share of alike pixels a replayed page must reach (a missing paragraph: 0.5 %)


class Replayed:
    """Each modern page loaded live in plain Chromium and through replay, and the replay's NetLog."""

    live: dict[str, PlainLoad]
    replayed: dict[str, PlainLoad]
    net: NetLog
    origins: tuple[str, str]
    logged: tuple[int, int]  # the crawl's demo server log: its length after the crawl, after replay
    jsonp: str  # the text the captured JSONP script hands its callback
    crawled: dict[str, bytes]  # each page's screenshot taken by the crawl (urn:screenshot:)
    alike: dict[tuple[str, str], float]  # (judge "live" or "crawl", page) -> share of pixels alike
    web: DemoWeb  # the crawled demo web


@pytest.fixture(scope="module")
def replayed(tmp_path_factory, modern_browser_crawl: BrowserCrawl,
             modern_plain_loads: tuple[DemoWeb, dict[str, PlainLoad]]) -> Replayed:
    crawl = modern_browser_crawl  # its demo server was stopped when the crawl returned
    seen = Replayed()
    jsonp = [body for record, body in records(crawl.root)
             if "/api/jsonp.js?callback=" in record.rec_headers.get_header("WARC-Target-URI")]
    assert len(jsonp) == 1
    seen.web = crawl.web
    shots = {record.rec_headers.get_header("WARC-Target-URI"): body
             for record, body in records(crawl.root, "resource")}
    seen.crawled = {path: shots[f"urn:screenshot:{crawl.modern}{path}"] for path in MODERN_PAGES}
    seen.jsonp = json.loads(jsonp[0].decode().partition("(")[2].rpartition(")")[0])["text"]

    async def run() -> None:
        seen.live = modern_plain_loads[1]
        with Catalog(crawl.root / "catalog", crawl.config.catalog.shards, readonly=True) as catalog:
            stamps = {c.url: c.timestamp for c in catalog.iter_all()}
        home = tmp_path_factory.mktemp("replay")
        netlog = home / "netlog.json"
        before = len(crawl.server.log)
        seen.replayed = {}
        async with (
            serving(crawl.config) as replay,
            chromium.chromium(home / "chromium", resolver_rules(crawl.web),
                              [f"--log-net-log={netlog}"]) as browser,
            chromium.connect(browser.port, browser.path) as devtools,
        ):
            seen.origins = (replay.content, replay.app)
            for path in MODERN_PAGES:
                url = crawl.modern + path
                at = f"{replay.content}/web/{stamps[url]}if_/{url}"
                seen.replayed[path] = await load(devtools, crawl.server, at)
            seen.alike = {}
            judge = await devtools.open_page()  # about:blank: compares, loads nothing
            for path in MODERN_PAGES:
                shot = seen.replayed[path].screenshot
                for name, other in (("live", seen.live[path].screenshot), ("crawl", seen.crawled[path])):
                    seen.alike[name, path] = await alike(judge, other, shot)
            await browser.quit(devtools)
        await trio.testing.wait_all_tasks_blocked()
        seen.logged = (before, len(crawl.server.log))
        seen.net = read_netlog(netlog)
        for path in MODERN_PAGES:  # kept beside the NetLog, to look at when a page differs
            name = path.strip("/").replace("/", "-") or "home"
            (home / f"live-{name}.png").write_bytes(seen.live[path].screenshot)
            (home / f"replayed-{name}.png").write_bytes(seen.replayed[path].screenshot)

    trio.run(run)
    return seen


async def alike(page: chromium.Page, first: bytes, second: bytes) -> float:
    """The share of pixels of two same-sized PNG screenshots alike within TOLERANCE."""
    texts = (json.dumps(base64.b64encode(png).decode()) for png in (first, second))
    share = await page.evaluate(f"{_ALIKE}({', '.join(texts)}, {TOLERANCE})")
    assert 0 <= share <= 1, "the screenshots differ in size"
    return share


@pytest.mark.parametrize("path", MODERN_PAGES)
def test_a_replayed_page_looks_like_the_live_one(replayed, path):
    figure = replayed.alike["live", path]
    print(f"{path}: {figure:.4f} of pixels alike the live load")
    assert figure >= ALIKE


@pytest.mark.parametrize("path", MODERN_PAGES)
def test_a_replayed_page_looks_like_the_crawls_screenshot_of_it(replayed, path):
    figure = replayed.alike["crawl", path]
    print(f"{path}: {figure:.4f} of pixels alike the crawl's screenshot")
    assert figure >= ALIKE


def test_the_jsonp_call_fills_the_replayed_page(replayed):
    """/xhr.html asks for its JSONP script with a new callback name (jQuery3600_<now>); the
    capture, found by the jsonp-callback rule, calls the name the crawl's rendering asked for,
    which replay renames: the page shows the captured script's text."""
    assert replayed.jsonp and replayed.jsonp[:100] in replayed.replayed["/xhr.html"].text


def test_replay_makes_no_request_outside_the_archive(replayed):
    before, after = replayed.logged
    assert after == before  # the demo server saw nothing (and it was stopped)
    assert all(load.requests == () for load in replayed.replayed.values())
    net = replayed.net
    assert net.tcp_peers == {"127.0.0.1"} and net.udp_sends == 0
    elsewhere = {url: error for url, error in net.requests.items()
                 if not url.startswith(tuple(origin + "/" for origin in replayed.origins))}
    assert all(error == ERR_NAME_NOT_RESOLVED and ".demo" not in url
               for url, error in elsewhere.items()), elsewhere
