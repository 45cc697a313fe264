"""The process's browser (archiver.crawl.rendering.Browsers) with real Chromium: started by the
first page, stopped once idle for browser.idle_timeout, restarted past browser.memory_limit."""

from __future__ import annotations

import trio

from archiver.browser.chromium import supervised
from archiver.browser.page import Answer, Request
from archiver.config import BrowserConfig
from archiver.crawl.rendering import Browsers
from archiver.crawl.stats import Stats

PAGE = "http://page.test/"
HTML = b"<!doctype html><title>Page</title><p>Some words of a page.</p>"


async def answer(request: Request) -> Answer | None:
    return Answer(200, [("Content-Type", "text/html")], HTML) if request.url == PAGE else None


async def test_the_browser_starts_for_a_page_and_stops_once_idle() -> None:
    config = BrowserConfig(idle_timeout=0.5, page_timeout=10.0)
    stats = Stats()
    async with supervised() as supervisor, trio.open_nursery() as nursery:
        browsers = Browsers(supervisor, lambda: config, stats)
        nursery.start_soon(browsers.watch_idle)
        assert not supervisor.running()  # nothing started before a page needs it
        rendering = await browsers.render(PAGE, answer)
        assert "Some words of a page." in rendering.text and supervisor.running()
        assert await supervisor.exited(within=20)  # stopped after 0.5 s idle (20: a guard)
        assert supervisor.starts == 1 and not supervisor.running()
        await browsers.render(PAGE, answer)  # the next page starts a new one
        assert supervisor.running() and supervisor.starts == 2
        nursery.cancel_scope.cancel()


async def test_a_browser_past_its_memory_limit_is_restarted_between_pages() -> None:
    config = BrowserConfig(memory_limit=1, page_timeout=10.0)  # any browser is past one byte
    stats = Stats()
    async with supervised() as supervisor:
        browsers = Browsers(supervisor, lambda: config, stats)
        for _ in range(2):
            rendering = await browsers.render(PAGE, answer)
            assert "Some words of a page." in rendering.text
            assert not supervisor.running()  # stopped once the page was done
        assert supervisor.starts == 2 and stats.faults["browser-restarted"] == 2
