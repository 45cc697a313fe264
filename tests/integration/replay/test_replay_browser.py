"""Headless Chromium reads the archive through the replay service and follows a link inside it,
while the crawled demo web keeps running: neither its request log nor Chromium's own NetLog may
show a request that left the replay's content origin. And a hostile archived page, replayed in
Chromium, can read neither the replay's own pages (/metrics) nor another archived site's storage.

Chromium is Debian's package (.ci/run installs it), driven over the DevTools protocol
(tests/support/chromium.py).
"""

from __future__ import annotations

import html
import json
import re
from urllib.parse import urlsplit

import trio
import trio.testing

from archiver.config import Config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from demoweb import DemoWeb, WebSpec, start_demo
from tests.support import chromium
from tests.support.chromium import ERR_NAME_NOT_RESOLVED, read_netlog
from tests.support.crawls import load, write_config
from tests.support.replayarchive import serving, write_archive

SPEC = WebSpec(sites=1, pages_per_site=4, port=0, trap=False)
STEP = 10.0  # seconds allowed for one page to load (it takes well under one here)


def resolver_rules(web: DemoWeb) -> str:
    """Chromium's resolver: the demo names go to 127.0.0.1 (the demo server, as the crawler's hosts
    file sends them), so a page that leaked to the live web would show in the demo server's log;
    every other name fails to resolve inside Chromium, so nothing can leave the machine (Chromium
    tries Google hosts on its own even with background networking off)."""
    return f"MAP *.{web.spec.domain} 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def title_and_text(web: DemoWeb, url: str) -> tuple[str, str]:
    """What the demo web serves at ``url``: its title, and its first paragraph as plain text."""
    parts = urlsplit(url)
    body = web.respond(parts.hostname or "", parts.path or "/").body.decode()
    title = re.search(r"<title>(.*?)</title>", body, re.S)
    paragraph = re.search(r"<p>(.*?)</p>", body, re.S)
    assert title and paragraph, url
    return html.unescape(title[1]), html.unescape(re.sub(r"<[^>]+>", "", paragraph[1])).strip()


async def crawl(config: Config, web: DemoWeb) -> dict[str, Capture]:
    """Crawl ``web`` (its server already running); the captures by URL."""
    enqueue_seeds(config, 0, [origin + "/" for origin in web.origins()])
    await Crawler(config, until_idle=True).run()
    with Catalog(config.root / "catalog", config.catalog.shards, readonly=True) as catalog:
        return {capture.url: capture for capture in catalog.iter_all()}


async def test_chromium_follows_a_link_inside_the_archive_and_never_the_live_web(tmp_path):
    async with trio.open_nursery() as nursery:
        web, server = await start_demo(nursery, SPEC)
        config = load(write_config(tmp_path, web, min_rest=0.0))
        captured = await crawl(config, web)
        home = web.origin(web.hosts[0]) + "/"
        pages = {web.origin(web.hosts[0]) + path for path in web.pages(web.hosts[0])}
        link = next(
            link
            for link in web.page_links(home)
            if link.kind == "a/href" and link.url in pages - {home} and captured[link.url].status == 200
        )
        root, target = captured[home], captured[link.url]
        netlog = tmp_path / "netlog.json"

        async with serving(config) as replay:
            origin = replay.content
            before = len(server.log)
            async with (
                chromium.chromium(
                    tmp_path / "chromium", resolver_rules(web), [f"--log-net-log={netlog}"]
                ) as browser,
                chromium.connect(browser.port, browser.path) as devtools,
            ):
                assert browser.active_port() == (browser.port, browser.path)
                page = await devtools.open_page()
                await page.enable()
                start = f"{origin}/web/{root.timestamp}/{home}"
                with trio.fail_after(STEP):
                    await page.goto(start)

                title, text = title_and_text(web, home)
                assert await page.evaluate("location.href") == start
                assert await page.evaluate("document.title") == title
                shown = await page.evaluate("document.body.innerText")
                assert text[:120] in shown
                assert await page.evaluate("!!document.getElementById('archiver-banner')")
                # The banner's links show where the keyboard focus is, whatever the page's styles.
                outline = await page.evaluate(
                    "(() => { const a = document.querySelector('#archiver-banner a'); a.focus(); "
                    "return document.activeElement === a && getComputedStyle(a).outlineStyle; })()"
                )
                assert outline not in (False, "none"), outline
                anchor = (
                    f"[...document.querySelectorAll('a')].find(a => a.href.endsWith({json.dumps(link.url)}))"
                )
                # Links are rewritten to the page's own date; the replay redirects to the capture.
                href = f"{origin}/web/{root.timestamp}/{link.url}"
                assert await page.evaluate(f"{anchor}.href") == href

                since = devtools.mark()
                await page.click(anchor)
                with trio.fail_after(STEP):
                    landed = await page.next_document(since)

                title, text = title_and_text(web, link.url)
                assert landed == f"{origin}/web/{target.timestamp}/{link.url}"
                assert await page.evaluate("location.href") == landed
                assert await page.evaluate("document.title") == title
                assert text[:120] in await page.evaluate("document.body.innerText")

                requested = page.requests()
                assert start in requested and href in requested
                assert len(requested) > 5  # the pages' stylesheets, scripts and images came too
                assert [url for url in requested if not url.startswith(origin + "/")] == []
                await browser.quit(devtools)

            await trio.testing.wait_all_tasks_blocked()  # anything that reached the demo web is logged
            assert server.log[before:] == []

        net = read_netlog(netlog)
        assert net.tcp_peers == {"127.0.0.1"}
        assert net.udp_sends == 0
        assert start in net.requests and net.requests[start] == 0
        elsewhere = {url: error for url, error in net.requests.items() if not url.startswith(origin + "/")}
        assert all(error == ERR_NAME_NOT_RESOLVED for error in elsewhere.values()), elsewhere
        nursery.cancel_scope.cancel()


async def test_the_resolver_rules_send_demo_names_to_the_demo_server_and_no_other(tmp_path):
    """The control for the test above: a page that did reach the live demo web shows in its log."""
    async with trio.open_nursery() as nursery:
        web, server = await start_demo(nursery, SPEC)
        home = web.origin(web.hosts[0]) + "/"
        async with (
            chromium.chromium(tmp_path / "chromium", resolver_rules(web)) as browser,
            chromium.connect(browser.port, browser.path) as devtools,
        ):
            page = await devtools.open_page()
            await page.enable()
            with trio.fail_after(STEP):
                await page.goto(home)
            assert await page.evaluate("document.title") == title_and_text(web, home)[0]
            reply = await page.send("Page.navigate", url="http://example.com/")
            assert reply.get("errorText") == "net::ERR_NAME_NOT_RESOLVED"
            await browser.quit(devtools)
        await trio.testing.wait_all_tasks_blocked()
        assert (web.hosts[0], "/") in [(entry.host, entry.target) for entry in server.log]
        assert {entry.host for entry in server.log} == {web.hosts[0]}
        nursery.cancel_scope.cancel()


# An archived page that keeps a secret in its site's storage, and a hostile archived page of
# another site that tries to read it, and to read the replay's /metrics (whose address it takes
# from the banner, as a real page could).
VICTIM = b"""<!DOCTYPE html><html><head><title>victim</title><script>
window.stored = (() => {
  try {
    document.cookie = "secret=victim-token";
    localStorage.setItem("secret", "victim-token");
    return "stored";
  }
  catch (e) { return "refused: " + e.name; }
})();
</script></head><body><p>The victim site.</p></body></html>"""
HOSTILE = b"""<!DOCTYPE html><html><head><title>hostile</title><script>
async function attempt(what) {
  try { return {ok: true, value: String(await what())}; } catch (e) { return {ok: false, value: e.name}; }
}
async function read(url) {
  const answer = await fetch(url, {credentials: "include"});
  return answer.status + " " + (await answer.text()).slice(0, 200);
}
window.probe = (async () => ({
  appMetrics: await attempt(() => read(document.querySelector("#archiver-banner a").href + "metrics")),
  ownMetrics: await attempt(() => read("/metrics")),
  storage: await attempt(() => localStorage.getItem("secret")),
  cookie: await attempt(() => document.cookie),
}))();
</script></head><body><p>The hostile site.</p></body></html>"""
STAMP = "20260101000000"


async def test_a_hostile_archived_page_reads_neither_the_replay_nor_other_sites(tmp_path):
    (tmp_path / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    config = load(tmp_path / "archiver.toml")
    victim, hostile = "http://victim.test/", "http://hostile.test/"
    write_archive(config, STAMP, {victim: VICTIM, hostile: HOSTILE})
    rules = "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
    async with (
        serving(config) as replay,
        chromium.chromium(tmp_path / "chromium", rules) as browser,
        chromium.connect(browser.port, browser.path) as devtools,
    ):
        page = await devtools.open_page()
        await page.enable()
        # The control: the replay's metrics are there for a visitor of the replay's own pages.
        with trio.fail_after(STEP):
            await page.goto(f"{replay.app}/metrics")
        assert "archiver_pages_total" in await page.evaluate("document.body.innerText")

        with trio.fail_after(STEP):
            await page.goto(f"{replay.content}/web/{STAMP}/{victim}")
        # The victim stores into its document's own stand-ins (the client script's).
        assert await page.evaluate("window.stored") == "stored"
        start = f"{replay.content}/web/{STAMP}/{hostile}"
        with trio.fail_after(STEP):
            await page.goto(start)
            probe = await page.evaluate("window.probe")
        assert await page.evaluate("document.querySelector('#archiver-banner a').href") == replay.app + "/"
        assert probe["appMetrics"] == {"ok": False, "value": "TypeError"}, probe  # a CORS failure
        # The client script sends a page's fetch("/metrics") to its own site in the archive.
        assert probe["ownMetrics"]["ok"] and probe["ownMetrics"]["value"].startswith("404 "), probe
        assert "archiver_pages_total" not in probe["ownMetrics"]["value"]
        # Storage is each document's own too: the victim's secret is not here.
        assert probe["storage"] == {"ok": True, "value": "null"}, probe
        # Cookies live in each document's own jar (the client script's): the victim's are not here.
        assert probe["cookie"] == {"ok": True, "value": ""}, probe
        await browser.quit(devtools)
