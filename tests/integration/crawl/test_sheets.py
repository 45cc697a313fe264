"""Sheets in a real crawl of the demo web, on an injected clock: a site outside its crawl window
gets no request (not even robots.txt) and is due at the opening, then is crawled inside it; a
daily budget of N pages gives exactly N page fetches that day (robots.txt is not counted), across
a crawler restart too, and N more the next day; a sheet's rest and user agent hold; SIGHUP
changes a sheet's budget."""

from __future__ import annotations

import itertools
import os
import signal
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import trio

from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.models import SiteRow
from demoweb import WebSpec, start_demo
from tests.support.crawls import load, write_config

PARIS = ZoneInfo("Europe/Paris")
REST = 0.15  # the budget sheet's min_rest (crawl.min_rest is 0.01)
NIGHT_REST = 0.3  # the window sheet's: its visit is still under way when the test closes it
NIGHT_PAGES = 8  # the window sheet's max_pages (every fetch counts, robots.txt too)
NIGHT_AGENT = "archiver-night/1 (+https://example.org/night)"  # the window sheet's user_agent
GUARD = 60  # seconds: a crawler that never gets there fails the test instead of hanging it


def paris(*fields: int) -> float:
    return datetime(*fields, tzinfo=PARIS).timestamp()


def sheets(night: str, budget: int) -> str:
    return f"""
[[sheets]]
match = ["host:{night}"]
window = "22:00-06:00"
time_zone = "Europe/Paris"
min_rest = {NIGHT_REST}
max_pages = {NIGHT_PAGES}
user_agent = "{NIGHT_AGENT}"
[[sheets]]
match = ["domain:demo"]
daily_pages = {budget}
time_zone = "Europe/Paris"
min_rest = {REST}
"""


async def until(queue: SiteQueue, ready: Callable[[dict[str, SiteRow]], bool]) -> None:
    """Poll the site queue (as `archiver status --sites` reads it) until ``ready`` holds."""
    while not ready({row.origin: row for row in queue.rows()}):
        await trio.sleep(0.05)


async def test_windows_and_daily_budgets_on_an_injected_clock(tmp_path: Path, nursery):
    web, server = await start_demo(nursery, WebSpec(sites=2, pages_per_site=12, port=0, trap=False))
    night_host, day_host = web.normal_hosts
    night, day = web.origin(night_host), web.origin(day_host)
    path = write_config(tmp_path, web)
    crawl_part = path.read_text()
    path.write_text(crawl_part + sheets(night_host, 5))
    config = load(path)
    enqueue_seeds(config, 0, [night + "/", day + "/"])
    now = [paris(2026, 3, 28, 12, 0)]  # a Saturday noon; clocks go forward that night

    def pages(host: str) -> int:
        return sum(e.host.split(":")[0] == host and e.target != "/robots.txt" for e in server.log)

    async def crawl(ready: Callable[[dict[str, SiteRow]], bool]) -> None:
        """A daemon on the injected clock until the site queue is ``ready``."""
        daemon = Crawler(config, clock=lambda: now[0])
        async with trio.open_nursery() as crawling:
            crawling.start_soon(daemon.run)
            await until(queue, ready)
            daemon.service.stop("the test saw what it waited for")

    with SiteQueue(queue_path(config.root, 0), recover=False) as queue, trio.fail_after(GUARD):
        # Noon: the night site waits for its window, untouched. The other starts on its budget
        # of 5 and the crawler is stopped after its first page (a drain: the visit stops after
        # the fetch under way).
        daemon = Crawler(config, clock=lambda: now[0])
        async with trio.open_nursery() as crawling:
            crawling.start_soon(daemon.run)
            while pages(day_host) < 1:
                await trio.sleep(0.05)
            daemon.service.stop("the test saw the first page")
        first = pages(day_host)
        assert 1 <= first < 5
        rows = {row.origin: row for row in queue.rows()}
        assert not any(e.host.split(":")[0] == night_host for e in server.log)
        assert rows[night].state == "waiting" and rows[night].due == paris(2026, 3, 28, 22, 0)
        assert rows[night].note == "window opens 22:00 Europe/Paris"

        # A restart the same day continues the budget where it was: 5 pages that day in all.
        await crawl(lambda rows: rows[day].state == "waiting" and "budget" in rows[day].note)
        assert pages(day_host) == 5
        rows = {row.origin: row for row in queue.rows()}
        assert rows[day].due == paris(2026, 3, 29, 0, 0)
        assert rows[day].note == "daily budget of 5 pages spent until 00:00 Europe/Paris"
        # The sheet's rest between the second visit's fetches (robots.txt and its pages).
        starts = [e.start for e in server.log if e.host.split(":")[0] == day_host][first + 1:]
        assert len(starts) == 5 - first + 1
        assert min(b - a for a, b in itertools.pairwise(starts)) >= REST * 0.9

        # 23:00: the night site's window is open (it has no budget: the first sheet that matches
        # applies, alone, with its own rest and max_pages); the day site is not due before
        # midnight. SIGHUP raises the budget to 6. At 06:00 the night site's window closes in the
        # middle of its visit, which stops before its next fetch; the day site, on a new day,
        # fetches 6 more pages.
        now[0] = paris(2026, 3, 28, 23, 0)
        before = rows[day].visits
        daemon = Crawler(config, clock=lambda: now[0])
        async with trio.open_nursery() as crawling:
            crawling.start_soon(daemon.run)
            while pages(night_host) < 1:  # running, under its signal handlers
                await trio.sleep(0.05)
            path.write_text(crawl_part + sheets(night_host, 6))
            os.kill(os.getpid(), signal.SIGHUP)
            while daemon.config.sheets[1].daily_pages != 6:
                await trio.sleep(0.05)
            assert pages(day_host) == 5 and queue.site(day).visits == before
            now[0] = paris(2026, 3, 29, 6, 0)
            await until(queue, lambda rows: "budget of 6" in rows[day].note
                        and rows[night].note == "window opens 22:00 Europe/Paris"
                        and rows[night].visits == 2 and rows[night].state == "waiting")
            night_pages = pages(night_host)
            assert queue.site(night).due == paris(2026, 3, 29, 22, 0)
            # 22:30: the night site resumes at its cursor, up to its max_pages.
            now[0] = paris(2026, 3, 29, 22, 30)
            await until(queue, lambda rows: rows[night].state in ("revisit", "done"))
            daemon.service.stop("the test saw the night site finished")
        assert 1 <= night_pages < pages(night_host) == NIGHT_PAGES - 2  # two robots.txt
        assert pages(day_host) == 5 + 6
        fetched = Counter(e.target for e in server.log if e.host.split(":")[0] == day_host)
        assert fetched.pop("/robots.txt") == 3  # once a visit: not counted in the budget
        assert set(fetched.values()) == {1}
        fetched = Counter(e.target for e in server.log if e.host.split(":")[0] == night_host)
        assert fetched.pop("/robots.txt") == 2 and set(fetched.values()) == {1}
        rows = {row.origin: row for row in queue.rows()}
        assert rows[day].due == paris(2026, 3, 30, 0, 0)
        # Each site was sent its own User-Agent: the night sheet's, and [crawl]'s for the other.
        agents = {host: {e.agent for e in server.log if e.host.split(":")[0] == host}
                  for host in (night_host, day_host)}
        assert agents == {night_host: {NIGHT_AGENT}, day_host: {config.crawl.user_agent}}
