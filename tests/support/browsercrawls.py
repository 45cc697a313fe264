"""A crawl of the demo web's modern site with browser-assisted capture (crawl.capture), in process,
for the browser-capture tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from archiver.crawl.crawler import Crawler, enqueue_seeds
from demoweb import DemoServer, DemoWeb, WebSpec, start_demo
from tests.support.crawls import load, write_config
from tests.support.plainchromium import PlainLoad, plain_loads

SPEC = WebSpec(sites=1, pages_per_site=2, port=0, trap=False, modern=True)
MIN_REST = 0.2  # the crawl rest: each page, and every request to another host
EMBED_REST = 0.05  # browser.embed_rest: between a rendered page's requests to its own site
QUIET = 0.3  # browser.quiet: the demo server answers at once, on loopback


class BrowserCrawl:
    """One crawl of the modern site, and what its server saw."""

    def __init__(self, tmp_path: Path, capture: str, *, min_rest: float = MIN_REST, tabs: int = 2,
                 browser: str = "",
                 beside: Callable[[BrowserCrawl], Awaitable[None]] | None = None) -> None:
        """``browser``: more [browser] lines; ``beside``: a task run beside the crawl (it is
        cancelled when the crawl ends)."""
        self.tmp_path = tmp_path
        self.capture = capture
        self.min_rest = min_rest
        self.tabs = tabs
        self.browser = browser
        self.beside = beside
        self.server: DemoServer

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self.web, self.server = await start_demo(nursery, SPEC)
            path = write_config(self.tmp_path, self.web, min_rest=self.min_rest, rest_factor=0.0,
                                capture=self.capture)
            # The infinite list's 50 item pages are static: found, and left out by scope.
            path.write_text(path.read_text() + f"[browser]\nembed_rest = {EMBED_REST}\n"
                            f"tabs = {self.tabs}\npage_timeout = 20.0\nquiet = {QUIET}\n{self.browser}"
                            '[scope]\nexclude = ["re:.*/items/.*"]\n')
            self.config = load(path)
            self.modern = self.web.origin("modern.demo")
            self.assets = self.web.origin("assets.demo")
            enqueue_seeds(self.config, 0, [self.modern + "/"])
            self.crawler = Crawler(self.config, until_idle=True)
            async with trio.open_nursery() as beside:
                if self.beside is not None:
                    beside.start_soon(self.beside, self)
                await self.crawler.run()
                beside.cancel_scope.cancel()
            nursery.cancel_scope.cancel()
        self.root = self.config.root

    def short(self, url: str) -> str:
        """A URL as MODERN_REQUESTS writes it."""
        return url.replace(self.assets, "//assets").removeprefix(self.modern)


@pytest.fixture(scope="session")
def modern_browser_crawl(tmp_path_factory: pytest.TempPathFactory) -> BrowserCrawl:
    """The modern site crawled with crawl.capture = "browser", once for the session (the capture
    tests judge it, the replay tests replay it; none changes it)."""
    crawl = BrowserCrawl(tmp_path_factory.mktemp("browser"), "browser")
    trio.run(crawl.run)  # its demo server is stopped when it returns
    return crawl


@pytest.fixture(scope="session")
def modern_plain_loads(tmp_path_factory: pytest.TempPathFactory
                       ) -> tuple[DemoWeb, dict[str, PlainLoad]]:
    """Each modern page loaded in plain Chromium (the judge), by its path on the modern host."""
    async def run() -> tuple[DemoWeb, dict[str, PlainLoad]]:
        web, loads = await plain_loads(SPEC, tmp_path_factory.mktemp("plain"),
                                       lambda web: web.modern_pages())
        origin = web.origin("modern.demo")
        return web, {url.removeprefix(origin): load for url, load in loads.items()}

    return trio.run(run)
