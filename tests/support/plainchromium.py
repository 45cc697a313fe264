"""The judge of the browser-capture tests: pages of the demo web loaded in plain Chromium, with no
archiving, and what the demo server saw each load request.

Chromium talks to the demo server directly (``--host-resolver-rules`` send the demo names to
127.0.0.1 and every other name nowhere). Each page loads in a fresh tab with the HTTP cache off, so
each load asks for everything it needs; the load is over when no request of the tab has been in
flight for ``QUIET`` seconds (or at ``bound``), after it optionally started the page's media and
scrolled to the end one viewport at a time (as a reader would, so that lazy images and infinite
lists see their elements come into view). The server's request log between the navigation and the
end of the load is the judge: what a capture of the page must hold. (The modern pages name no
icon, ``<link rel="icon" href="data:,">``, so Chromium asks them for no /favicon.ico.)
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio
import trio.testing

from demoweb import DemoServer, DemoWeb, WebSpec
from demoweb.server import start_demo
from tests.support import chromium

QUIET = 0.5  # seconds with no request in flight and none started: the page's network is quiet
BOUND = 20.0  # seconds a page may take to get quiet, each time it is waited for
MAX_SCROLLS = 60  # viewport-high steps down a page at most
VIEWPORT = (1280, 900)
_PLAY = """Array.from(document.querySelectorAll("video, audio"), (media) => {
  media.muted = true;
  media.play().catch(() => {});
}).length"""
_STEP = """(() => {
  const before = window.scrollY;
  window.scrollBy(0, window.innerHeight);
  return window.scrollY !== before;
})()"""


@dataclass(frozen=True)
class PlainLoad:
    """One page as plain Chromium loaded it."""

    url: str
    requests: tuple[str, ...]  # the URLs the demo server answered during the load, in the order asked
    screenshot: bytes  # PNG of the viewport, scrolled back to the top
    text: str  # the rendered body's innerText


def resolver_rules(web: DemoWeb) -> str:
    """The demo names to 127.0.0.1, every other name unresolved (nothing leaves the machine)."""
    return f"MAP *.{web.spec.domain} 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def _in_flight(page: chromium.Page, since: int) -> set[str]:
    """Requests of the tab started at or after ``since`` that have neither finished nor failed."""
    started, ended = set(), set()
    for event in page.browser.events[since:]:
        if event.session != page.session:
            continue
        if event.method == "Network.requestWillBeSent":
            started.add(event.params["requestId"])
        elif event.method in ("Network.loadingFinished", "Network.loadingFailed"):
            ended.add(event.params["requestId"])
    return started - ended


async def _first_of(page: chromium.Page, methods: Sequence[str], since: int) -> None:
    """Return once any of ``methods`` has been received from the tab at or after ``since``."""
    async with trio.open_nursery() as nursery:

        async def wait(method: str) -> None:
            await page.wait_for(method, since)
            nursery.cancel_scope.cancel()

        for method in methods:
            nursery.start_soon(wait, method)


async def settle(page: chromium.Page, since: int, bound: float = BOUND) -> bool:
    """Wait until no request of the tab (counted from event ``since``) is in flight and none has
    started for QUIET seconds; False if ``bound`` seconds passed first."""
    with trio.move_on_after(bound):
        while True:
            mark = page.browser.mark()
            if _in_flight(page, since):
                await _first_of(page, ("Network.loadingFinished", "Network.loadingFailed"), mark)
                continue
            with trio.move_on_after(QUIET) as idle:
                await page.wait_for("Network.requestWillBeSent", mark)
            if idle.cancelled_caught:
                return True
    return False


async def load(
    devtools: chromium.Browser,
    server: DemoServer,
    url: str,
    *,
    viewport: tuple[int, int] = VIEWPORT,
    scroll: bool = True,
    play: bool = True,
) -> PlainLoad:
    """Load ``url`` in a fresh tab, settle, play its media and scroll it to the end if asked,
    and take what the server saw meanwhile, a screenshot and the rendered text."""
    page = await devtools.open_page()
    await page.enable()
    await page.send("Network.setCacheDisabled", cacheDisabled=True)
    width, height = viewport
    await page.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                    deviceScaleFactor=1, mobile=False)
    await trio.testing.wait_all_tasks_blocked()
    first = len(server.log)
    since = devtools.mark()
    with trio.fail_after(BOUND):
        await page.goto(url)
    await settle(page, since)
    if play and await page.evaluate(_PLAY):
        await settle(page, since)
    if scroll:
        for _ in range(MAX_SCROLLS):
            moved = await page.evaluate(_STEP)
            await settle(page, since)
            if not moved and not await page.evaluate(_STEP):
                break  # at the end, and the last wait added nothing below it
        await page.evaluate("window.scrollTo(0, 0)")
        await settle(page, since)
    shot = await page.send("Page.captureScreenshot", format="png")
    text = await page.evaluate("document.body ? document.body.innerText : ''")
    await page.send("Page.close")
    await trio.testing.wait_all_tasks_blocked()
    seen = sorted(server.log[first:], key=lambda entry: entry.start)
    requests = tuple(server.web.origin(entry.host) + entry.target for entry in seen)
    return PlainLoad(url, requests, base64.b64decode(shot["data"]), text)


@asynccontextmanager
async def plain_chromium(
    spec: WebSpec, home: Path
) -> AsyncIterator[tuple[DemoWeb, DemoServer, chromium.Browser]]:
    """The demo web served on a free port and plain Chromium (its files in ``home``) to load it."""
    async with trio.open_nursery() as nursery:
        web, server = await start_demo(nursery, spec)
        async with (
            chromium.chromium(home, resolver_rules(web)) as browser,
            chromium.connect(browser.port, browser.path) as devtools,
        ):
            yield web, server, devtools
            await browser.quit(devtools)
        nursery.cancel_scope.cancel()


async def plain_loads(
    spec: WebSpec,
    home: Path,
    choose: Callable[[DemoWeb], Sequence[str]],
    *,
    viewport: tuple[int, int] = VIEWPORT,
    scroll: bool = True,
    play: bool = True,
) -> tuple[DemoWeb, dict[str, PlainLoad]]:
    """Serve the demo web of ``spec``, load the pages ``choose`` picks from it one after another
    (``load``'s options), and return the web and each page's load."""
    async with plain_chromium(spec, home) as (web, server, devtools):
        loads = {}
        for url in choose(web):
            loads[url] = await load(devtools, server, url, viewport=viewport, scroll=scroll, play=play)
    return web, loads
