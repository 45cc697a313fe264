"""Revisits: the daemon comes back to a finished site when its revisit is due, walks every URL it
had again, asks conditionally, stores what did not change as revisit records (a page moved to a
new URL too, with crawl.dedupe = "digest"), records what is gone, counts the pages that changed
since their last capture, and schedules the next visit by the change-rate estimate
(archiver.queues.revisits); replay shows each date's page."""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import trio

from archiver.config import Config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.models import SiteRow
from archiver.queues.revisits import LOOK_BACK, RevisitSchedule
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from archiver.web.timestamps import from_datetime, to_datetime
from demoweb import DemoWeb, WebSpec, start_demo
from tests.support.crawls import load, write_config
from tests.support.rawhttp import get
from tests.support.replayarchive import serving
from tests.support.repo import ARCHIVER, archiver_here

GUARD = 90  # seconds: a daemon that never revisits fails the test instead of hanging it
# The next visit after the revisit comes at least 3 s after it: after the test has stopped.
REVISITS = {"revisit_interval": 3.0, "revisit_min": 3.0, "revisit_max": 60.0, "dedupe": "digest"}


async def until(queue: SiteQueue, sites: list[str], ready: Callable[[SiteRow], bool]) -> None:
    """Poll the site queue (as `archiver status --sites` reads it) until every site is ready."""
    while True:
        rows = {row.origin: row for row in queue.rows()}
        if all(ready(rows[site]) for site in sites):
            return
        await trio.sleep(0.05)


def changed(web0: DemoWeb, web1: DemoWeb, url: str) -> bool:
    """Whether the demo web answers ``url`` differently in its two versions (status or body)."""
    before, after = web0.respond(*target(url)), web1.respond(*target(url))
    return (before.status, before.body) != (after.status, after.body)


async def test_the_daemon_revisits_a_changed_site_and_schedules_by_what_changed(tmp_path, nursery):
    web0, server = await start_demo(nursery, WebSpec(sites=2, pages_per_site=8, port=0, trap=False))
    config = load(write_config(tmp_path, web0, **REVISITS))
    sites = [web0.origin(host) for host in web0.normal_hosts]
    enqueue_seeds(config, 0, [site + "/" for site in sites])
    web1 = DemoWeb(dataclasses.replace(web0.spec, version=1))
    with SiteQueue(queue_path(config.root, 0), recover=False) as queue, trio.fail_after(GUARD):
        # --until-idle ends after the first visits, without waiting for their revisits.
        await Crawler(config, until_idle=True).run()
        first = {row.origin: row for row in queue.rows()}
        assert all(first[site].state == "revisit" for site in sites)
        server.change(web1)                                     # pages edited, one removed, one new
        changed_at = time.time()
        daemon = Crawler(config)                                # no --until-idle
        async with trio.open_nursery() as crawl:
            crawl.start_soon(daemon.run)
            await until(queue, sites, lambda row: row.state == "revisit"
                        and row.visits > first[row.origin].visits)
            daemon.service.stop("the test has seen every site revisited")
        after = {row.origin: row for row in queue.rows()}
    with Catalog(config.root / "catalog", config.catalog.shards, readonly=True) as catalog:
        captures = list(catalog.iter_all())

    def when(capture: Capture) -> float:
        return to_datetime(capture.timestamp).timestamp()

    earlier = {c.url for c in captures if when(c) <= changed_at}
    later = [c for c in captures if when(c) > changed_at]
    schedule = RevisitSchedule(**{"interval": 3.0, "shortest": 3.0, "longest": 60.0})
    for site in sites:
        ours = [c for c in later if c.url.startswith(site + "/")]
        # The revisit walked every URL of the first visit again, and found the new page.
        assert {c.url for c in captures if c.url.startswith(site + "/") and when(c) <= changed_at
                } <= {c.url for c in ours}
        assert any(c.url.endswith("/news/v1.html") for c in ours)
        # It compared each page it had with its last capture, and counted those that changed as
        # the demo web says they did.
        compared = [c.url for c in ours if c.url in earlier]
        history = after[site].history
        assert history.compared == len(compared) > 0
        assert history.changed == sum(changed(web0, web1, url) for url in compared)
        assert 0 < history.changed < history.compared
        # Unchanged pages are revisit records, changed ones new responses.
        for c in ours:
            if c.url in earlier and c.status == 200:
                assert c.rectype == ("response" if changed(web0, web1, c.url) else "revisit"), c.url
        # The next visit: the change-rate estimate's delay after the revisit ended.
        ended = max(when(c) for c in ours)
        delay = schedule.delay(history)
        assert delay is not None and 3.0 <= delay <= 60.0
        assert ended + delay - 1 <= after[site].next_visit <= ended + delay + 5
        assert after[site].due == after[site].next_visit
    # `archiver status --sites` shows each site's next visit and change rate.
    listed = subprocess.run([*ARCHIVER, "status", "--sites", "--json", "--config", str(config.path)],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    shown = {site["origin"]: site for site in map(json.loads, listed.splitlines())}
    for site in sites:
        rate = after[site].history.rate()
        assert rate is not None
        assert shown[site]["state"] == "revisit" and shown[site]["visits"] == after[site].visits
        assert shown[site]["change_rate_per_day"] == round(rate * 86400, 4) > 0
        assert to_datetime("".join(ch for ch in shown[site]["next_visit"] if ch.isdigit())
                           ).timestamp() == int(after[site].next_visit)
    # The daemon counted what the revisit records spared, and the 304s.
    assert daemon.stats.not_modified > 0 and daemon.stats.bytes_saved > 0
    assert daemon.stats.revisits == sum(c.rectype == "revisit" for c in later)
    by_url: dict[str, list[Capture]] = {}
    for c in captures:
        by_url.setdefault(c.url, []).append(c)
    for site in sites:
        host = urlsplit(site).hostname
        removed = site + web0.pages(host)[-1]
        # Gone is recorded: the removed page answered 404, a capture of its own.
        [gone] = [c for c in later if c.url == removed]
        assert (gone.status, gone.rectype) == (404, "response")
        # The page moved to a new URL with the same bytes is a revisit naming the old capture.
        [moved] = [c for c in later if c.url == removed.removesuffix(".html") + "-moved.html"]
        [old] = [c for c in by_url[removed] if c.status == 200]
        assert (moved.rectype, moved.status, moved.digest) == ("revisit", 200, old.digest)
    await check_replay(config, sites, web0, web1, by_url, changed_at)
    check_robots(config, sites[0], web0, web1, changed_at)


async def test_a_revisit_reads_a_bounded_history_of_a_long_revisited_url(tmp_path, nursery):
    """A page revisited unchanged many times: a revisit reads its last capture and the response
    that capture's payload stands for (one query), not every capture; it stays a revisit."""
    web, _ = await start_demo(nursery, WebSpec(sites=1, pages_per_site=4, port=0, trap=False))
    # "url": a payload is looked for among its own URL's captures only.
    config = load(write_config(tmp_path, web, **{**REVISITS, "dedupe": "url"}))
    site = web.origins()[0]
    home = site + "/"
    enqueue_seeds(config, 0, [home])
    with trio.fail_after(GUARD):
        await Crawler(config, until_idle=True).run()
    with Catalog(config.root / "catalog", config.catalog.shards) as catalog:
        [response] = catalog.captures(home)
        # Revisits of the home page standing for it, dated later (2099: they come first).
        later = [dataclasses.replace(response, rectype="revisit", mime="warc/revisit",
                                     timestamp=from_datetime(datetime(2099, 1, 1, tzinfo=UTC)
                                                             + timedelta(seconds=n)))
                 for n in range(3 * LOOK_BACK)]
        catalog.add(later)
    crawler = Crawler(config, until_idle=True)
    assert await crawler.ctx.dedupe.earlier(home) == [response, later[-1]]  # not all 301
    enqueue_seeds(config, 0, [home], recrawl=True)
    with trio.fail_after(GUARD):
        await crawler.run()
    assert crawler.stats.errors["internal"] == 0
    with Catalog(config.root / "catalog", config.catalog.shards, readonly=True) as catalog:
        home_now = [c for c in catalog.captures(home) if c.timestamp < "2099"][-1]
    # Asked conditionally from the response its last capture stands for: still a revisit.
    assert home_now.rectype == "revisit" and home_now.digest == response.digest
    assert (home_now.filename, home_now.offset) != (response.filename, response.offset)


def check_robots(config: Config, site: str, web0: DemoWeb, web1: DemoWeb, changed_at: float) -> None:
    """`archiver robots HOST`: the robots.txt of each date, and its change, from the captures."""
    host = urlsplit(site).netloc

    def robots(*at: str) -> dict:
        """The JSON form, run in this process; the text form below is run as a child."""
        done = archiver_here("robots", host, *at, "--json", "--config", str(config.path))
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    before = time.strftime("%Y%m%d%H%M%S", time.gmtime(changed_at))
    first, now = robots("--at", before), robots()
    assert first["in_force"]["text"].encode() == web0.respond(*target(site + "/robots.txt")).body
    assert now["in_force"]["text"].encode() == web1.respond(*target(site + "/robots.txt")).body
    assert "badbot" in now["in_force"]["text"] and "badbot" not in first["in_force"]["text"]
    assert [c["timestamp"] for c in now["changes"]] == [first["in_force"]["timestamp"],
                                                      now["in_force"]["timestamp"]]
    assert now["captures"] >= 2
    text = subprocess.run([*ARCHIVER, "robots", host, "--config", str(config.path)],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    assert text.startswith("in force at ") and "User-agent: badbot" in text
    assert f"2 versions in {now['captures']} captures:" in text


async def check_replay(config: Config, sites: list[str], web0: DemoWeb, web1: DemoWeb,
                       by_url: dict[str, list[Capture]], changed_at: float) -> None:
    """Replay at the first date shows the old page, at the revisit's the new one, a 304 and a
    moved page the payload they stand for."""
    async with serving(config) as running:
        checked = {"changed": 0, "not-modified": 0, "moved": 0}
        for url, found in by_url.items():
            if not url.startswith(tuple(site + "/" for site in sites)) or url.endswith("robots.txt"):
                continue
            for c in found:
                web = web1 if to_datetime(c.timestamp).timestamp() > changed_at else web0
                reply = web.respond(*target(url))
                if reply.status != 200:
                    continue
                status, _, body = await get(running.content_at, f"/web/{c.timestamp}id_/{url}")
                assert (status, gunzipped(body)) == (200, reply.body), (url, c.timestamp)
                if c.status == 304:
                    checked["not-modified"] += 1
                elif url.endswith("-moved.html"):
                    checked["moved"] += 1
                elif len(found) > 1 and changed(web0, web1, url):
                    checked["changed"] += 1
        assert all(checked.values()), checked
        # The banner links to the robots.txt in force at the capture's date, which replay shows.
        home = sites[0] + "/"
        stamp = by_url[home][0].timestamp
        status, _, page = await get(running.content_at, f"/web/{stamp}/{home}")
        host = urlsplit(home).netloc
        assert status == 200 and f"/robots/{host}?at={stamp}".encode() in page
        status, _, body = await get(running.app_at, f"/robots/{host}?at={stamp}&format=json")
        shown = json.loads(body)
        assert status == 200 and shown["in_force"]["text"].encode() == web0.respond(
            *target(sites[0] + "/robots.txt")).body
        assert len(shown["changes"]) == 2
        status, _, html = await get(running.app_at, f"/robots/{host}")
        assert status == 200 and b"badbot" in html and b"2 versions in" in html


def target(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else "")


def gunzipped(body: bytes) -> bytes:
    """A body as the demo web's model holds it (some pages are served gzipped, and replayed so)."""
    return gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body

