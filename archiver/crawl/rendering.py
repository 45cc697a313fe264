"""Browser-assisted capture: the browser renders, archiver fetches.

With ``crawl.capture = "browser"`` every HTML page a visit fetches is also rendered in Chromium;
with ``"auto"`` only a page that needs scripts to show its content (archiver.web.scriptneed).
The page is fetched over HTTP first, as always; the render then opens it in a tab whose every
request is paused and answered here (archiver.browser.page), never by the browser's own network:

    request ─> already answered in this visit? ─> from memory
            ─> not GET, not http(s), out of scope, disallowed by its host's robots.txt
               ─> refused (a network error for the page), counted, the decision kept
            ─> the host's turn (HostClock: one request at a time, the rest after the last)
               ─> the visit's own fetch (archiver.crawl.visit): the site's connection, the
                  address policy and size limits, the capture sink: the WARC holds the exact
                  bytes archiver's client exchanged, as for any fetch

Requests to the page's own site rest ``browser.embed_rest`` between them (never less than its
robots.txt Crawl-delay); every other host rests the crawl rest, process-wide. What the render
finds (rendered links, pushState routes, the URLs it requested) is routed as HTML links are
(archiver.crawl.routing).

:class:`Browsers` is the process's browser: started when the first page needs it (an HTTP-only
crawl never starts one), ``browser.tabs`` pages at once, stopped after ``browser.idle_timeout``,
restarted when it crashes, hangs (a page past ``page_timeout`` plus :data:`HANG_GRACE`) or grows
past ``browser.memory_limit``. A browser that cannot start (no ``chromium`` installed, say) is
not tried again for ``idle_timeout`` seconds: the pages meanwhile are captured over HTTP. A page
whose render fails keeps its HTTP capture; the failure is logged, counted and labelled on it
(``render-failed``), and the page is not rendered again.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from archiver.browser.chromium import BrowserError, Supervisor
from archiver.browser.devtools import CommandTimeout, DevToolsError
from archiver.browser.page import Answer, Request
from archiver.browser.render import (
    BrowserHung,
    FormFill,
    Rendering,
    RenderSettings,
    render_page,
)
from archiver.config import BrowserConfig, viewport
from archiver.crawl.http import FetchResult
from archiver.crawl.stats import Stats
from archiver.logs import event
from archiver.web import scriptneed
from archiver.web.http import decode_body

log = logging.getLogger("archiver.crawl.rendering")

HANG_GRACE = 15.0  # seconds past page_timeout after which the browser is taken for hung
EXIT_WAIT = 1.0  # seconds a failed page waits to see whether its browser exited (a crash)
_HTML = ("text/html", "application/xhtml+xml")
# Headers that describe the bytes on the wire, not the decoded body the browser is given.
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding",
                           "x-archiver-transfer-encoding", "connection", "keep-alive"})


class RenderFailed(Exception):
    """The browser could not render a page (it crashed, hung or could not start)."""


def render_reason(capture: str, result: FetchResult, max_decoded_size: int) -> str | None:
    """Why the page ``result`` answered is rendered under ``crawl.capture = capture``, or None:
    only a whole 2xx HTML answer is, always with "browser", when it needs scripts with "auto"."""
    if capture == "http" or result.status is None or not 200 <= result.status < 300:
        return None
    if result.truncated or (result.header("content-type") or "").split(";")[0].strip().lower(
            ) not in _HTML:
        return None
    if capture == "browser":
        return "crawl.capture = browser"
    body = decode_body(result.body, result.header("content-encoding"), max_decoded_size)
    need = scriptneed.needs_scripts(body, result.header("content-type"))
    return None if need is None else f"auto: {need}"


def answer_of(result: FetchResult, max_decoded_size: int) -> Answer | None:
    """What the browser is given for a fetch: the decoded body with the headers that still hold
    for it (None for a fetch that got no answer: a network error for the page)."""
    if result.status is None:
        return None
    body = decode_body(result.body, result.header("content-encoding"), max_decoded_size)
    headers = [(name, value) for name, value in result.headers
               if name.lower() not in _WIRE_HEADERS]
    return Answer(result.status, headers, body)


class Answers:
    """The answers a visit gave its pages' requests, newest kept, ``limit`` bytes at most."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._size = 0
        self._answers: OrderedDict[str, Answer] = OrderedDict()

    def get(self, url: str) -> Answer | None:
        answer = self._answers.get(url)
        if answer is not None:
            self._answers.move_to_end(url)
        return answer

    def put(self, url: str, answer: Answer) -> None:
        if len(answer.body) > self._limit:
            return
        if (old := self._answers.pop(url, None)) is not None:
            self._size -= len(old.body)
        self._answers[url] = answer
        self._size += len(answer.body)
        while self._size > self._limit:
            _, dropped = self._answers.popitem(last=False)
            self._size -= len(dropped.body)

    def __contains__(self, url: str) -> bool:
        return url in self._answers


class HostClock:
    """When each host may next be asked, one request at a time per host (process-wide, so that
    two pages of different sites needing one host share its rest)."""

    def __init__(self) -> None:
        self._next: dict[str, float] = {}
        self._locks: dict[str, trio.Lock] = {}

    @asynccontextmanager
    async def turn(self, host: str) -> AsyncIterator[None]:
        """Wait until ``host`` may be asked and hold it while the block asks it."""
        lock = self._locks.setdefault(host, trio.Lock())
        try:
            async with lock:
                await trio.sleep_until(self._next.get(host, 0.0))
                yield
        finally:
            if not lock.locked() and not lock.statistics().tasks_waiting:
                self._locks.pop(host, None)

    def rest(self, host: str, seconds: float) -> None:
        """``host`` may be asked again ``seconds`` from now."""
        now = trio.current_time()
        if len(self._next) > 10_000:  # forget the hosts whose rest is over
            self._next = {h: at for h, at in self._next.items() if at > now}
        self._next[host] = now + seconds


@dataclass(frozen=True)
class PageRender:
    """One rendered page: what the browser made of it, and why it was rendered."""

    reason: str
    rendering: Rendering
    requested: list[str]  # the URLs its requests were answered with, fetched or from memory


class Browsers:
    """The process's browser: ``tabs`` pages at once, started on demand, stopped when idle,
    restarted after a crash, a hang, or past its memory limit."""

    def __init__(self, supervisor: Supervisor, config: Callable[[], BrowserConfig],
                 stats: Stats) -> None:
        """``config``: the current [browser] settings (a reload may change them)."""
        self._supervisor = supervisor
        self._config = config
        self._stats = stats
        self._tabs = trio.CapacityLimiter(config().tabs)
        self._rendering = 0
        self._restart_due = False
        self._used = trio.Event()  # set when a render ends (the idle watch starts over)
        # Until when, and why, no browser is started after one failed to start.
        self._unavailable: tuple[float, str] | None = None
        self.clock = HostClock()

    @property
    def supervisor(self) -> Supervisor:
        return self._supervisor

    async def render(self, url: str, answer: Callable[[Request], Awaitable[Answer | None]],
                     cookies: Sequence[dict[str, Any]] = (), form: FormFill | None = None
                     ) -> Rendering:
        """Render ``url`` in a tab whose requests ``answer`` answers, starting with ``cookies``
        (the site's jar), with its ``form`` filled in and submitted (a scripted login);
        RenderFailed if the browser could not (it is then restarted for the next page)."""
        config = self._config()
        self._tabs.total_tokens = config.tabs
        settings = RenderSettings(
            page_timeout=config.page_timeout, max_scrolls=config.max_scrolls, quiet=config.quiet,
            viewport=viewport(config.viewport), screenshot_format=config.screenshot_format,
            max_resources=config.max_resources)
        if self._unavailable is not None and trio.current_time() < self._unavailable[0]:
            raise RenderFailed(self._unavailable[1])
        async with self._tabs:
            self._rendering += 1
            try:
                try:
                    devtools = await self._supervisor.devtools()
                except BrowserError as e:
                    # Not tried again for a while: each page would pay for the same failure.
                    reason = f"browser did not start: {e}"
                    self._unavailable = (trio.current_time() + config.idle_timeout, reason)
                    self._stats.faults["browser-unavailable"] += 1
                    event(log, logging.ERROR, "browser-unavailable", executable=config.executable,
                          error=str(e), retry_s=config.idle_timeout)
                    raise RenderFailed(reason) from None
                starts = self._supervisor.starts
                try:
                    with trio.fail_after(config.page_timeout + HANG_GRACE):
                        return await render_page(devtools, url, answer, settings, cookies, form)
                except (trio.TooSlowError, BrowserHung, DevToolsError) as e:
                    raise RenderFailed(await self._failed(url, e, starts, config)) from None
            finally:
                self._rendering -= 1
                self._used.set()
                await self._check_memory(config)

    async def _failed(self, url: str, error: Exception, starts: int, config: BrowserConfig
                      ) -> str:
        """Why a page's render failed (counted and logged); the browser is restarted."""
        if await self._supervisor.exited(EXIT_WAIT):
            fault, reason = "browser-crashed", f"browser crashed: {str(error)[:200]}"
        elif isinstance(error, DevToolsError) and not isinstance(error, CommandTimeout):
            fault, reason = "browser-failed", f"devtools: {str(error)[:200]}"
        else:
            fault, reason = "browser-hung", "browser hung"
        self._stats.faults[fault] += 1
        event(log, logging.WARNING, fault, url=url, error=str(error)[:200] or type(error).__name__,
              page_timeout=config.page_timeout)
        await self._restart(starts)
        return reason

    async def _restart(self, starts: int) -> None:
        """Stop the browser that failed (unless another page did so already): the next page
        starts a new one. Other tabs of the stopped browser fail and are captured over HTTP."""
        if self._supervisor.starts == starts:
            await self._supervisor.stop()

    async def _check_memory(self, config: BrowserConfig) -> None:
        """Past the memory limit, restart the browser once no page is being rendered."""
        if not self._restart_due and self._supervisor.memory() > config.memory_limit:
            self._restart_due = True
            event(log, logging.INFO, "browser-memory", bytes=self._supervisor.memory(),
                  limit=config.memory_limit)
        if self._restart_due and self._rendering == 0:
            self._restart_due = False
            self._stats.faults["browser-restarted"] += 1
            await self._supervisor.stop()

    async def watch_idle(self) -> None:
        """Stop the browser after ``idle_timeout`` seconds without a page (runs forever)."""
        while True:
            self._used = trio.Event()
            with trio.move_on_after(self._config().idle_timeout):
                await self._used.wait()
                continue
            if self._rendering == 0 and self._supervisor.running():
                event(log, logging.INFO, "browser-idle", seconds=self._config().idle_timeout)
                await self._supervisor.stop()
            await self._used.wait()
