"""A crawl of the modern demo site (demoweb.modern) with a given crawl.capture, real Chromium
rendering its pages: shared by the browser-capture tests and the replay tests of its archive."""

from __future__ import annotations

from pathlib import Path

import trio

from archiver.crawl.crawler import Crawler, enqueue_seeds
from demoweb import WebSpec, start_demo
from tests.support.crawls import load, write_config

SPEC = WebSpec(sites=1, pages_per_site=2, port=0, trap=False, modern=True)
MIN_REST = 0.2  # the crawl rest: each page, and every request to another host
EMBED_REST = 0.05  # browser.embed_rest: between a rendered page's requests to its own site


class BrowserCrawl:
    """One crawl of the modern site, and what its server saw (the server is stopped after it)."""

    def __init__(self, tmp_path: Path, capture: str) -> None:
        self.tmp_path = tmp_path
        self.capture = capture

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self.web, self.server = await start_demo(nursery, SPEC)
            path = write_config(self.tmp_path, self.web, min_rest=MIN_REST, rest_factor=0.0,
                                capture=self.capture)
            # The infinite list's 50 item pages are static: found, and left out by scope.
            path.write_text(path.read_text() + f"[browser]\nembed_rest = {EMBED_REST}\n"
                            'tabs = 2\npage_timeout = 20.0\n[scope]\nexclude = ["re:.*/items/.*"]\n')
            self.config = load(path)
            self.modern = self.web.origin("modern.demo")
            self.assets = self.web.origin("assets.demo")
            enqueue_seeds(self.config, 0, [self.modern + "/"])
            self.crawler = Crawler(self.config, until_idle=True)
            await self.crawler.run()
            nursery.cancel_scope.cancel()
        self.root = self.config.root

    def short(self, url: str) -> str:
        """A URL as MODERN_REQUESTS writes it."""
        return url.replace(self.assets, "//assets").removeprefix(self.modern)
