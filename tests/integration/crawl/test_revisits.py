"""Revisits: the daemon comes back to a finished site when its revisit is due, walks every URL it
had again, counts the pages that changed since their last capture, and schedules the next visit
by the change-rate estimate (archiver.queues.revisits)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import trio

from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.queues.revisits import RevisitSchedule
from archiver.queues.sitequeue import SiteQueue, SiteRow, queue_path
from archiver.store.catalog import Capture, Catalog
from archiver.web.timestamps import to_datetime
from demoweb import DemoWeb, WebSpec, start_demo
from tests.support.crawls import load, write_config
from tests.support.repo import ARCHIVER

GUARD = 90  # seconds: a daemon that never revisits fails the test instead of hanging it
# The next visit after the revisit comes at least 3 s after it: after the test has stopped.
REVISITS = {"revisit_interval": 3.0, "revisit_min": 3.0, "revisit_max": 60.0}


async def until(queue: SiteQueue, sites: list[str], ready: Callable[[SiteRow], bool]) -> None:
    """Poll the site queue (as `archiver status --sites` reads it) until every site is ready."""
    while True:
        rows = {row.origin: row for row in queue.rows()}
        if all(ready(rows[site]) for site in sites):
            return
        await trio.sleep(0.05)


def changed(web0: DemoWeb, web1: DemoWeb, url: str) -> bool:
    """Whether the demo web answers ``url`` differently in its two versions (status or body)."""
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    before, after = web0.respond(parts.hostname, target), web1.respond(parts.hostname, target)
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
