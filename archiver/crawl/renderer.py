"""One visit's side of browser-assisted capture (archiver.crawl.rendering): whether a fetched
page is rendered, its render in the process's browser, and the answer to each request it makes.

A request is answered from memory when this visit already has it (``browser.kept_answers``
bytes of answers; past them, from the response record it wrote), refused when it is not GET or
HEAD, not http(s), out of scope or disallowed by its host's robots.txt, and otherwise fetched by
the visit itself (``SiteVisit.fetch`` as an embed): its host's turn on the process's
``HostClock``, the site's connection, the capture sink. A request that raises costs that request
(logged, counted ``errors=internal``); a lost lease or a full disk ends the visit after the render,
as for any fetch.
"""

from __future__ import annotations

import io
import logging
import sqlite3
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio
from warcio.statusandheaders import StatusAndHeadersParser, StatusAndHeadersParserException

from archiver.browser.page import Answer, Request
from archiver.browser.render import FormFill, Rendering
from archiver.crawl import bodies
from archiver.crawl.connection import LeaseLost
from archiver.crawl.http import FetchResult
from archiver.crawl.politeness import Rest
from archiver.crawl.rendering import Answers, PageRender, RenderFailed, answer_of, render_reason
from archiver.crawl.routing import scope_detail
from archiver.logs import event
from archiver.queues.models import Entry
from archiver.store.bundles import RecordLocation
from archiver.store.durable import is_disk_error
from archiver.store.warcindex import WarcError, read_record
from archiver.web import robots, urls
from archiver.web.http import parse_retry_after
from archiver.web.logins import secret_forms

if TYPE_CHECKING:
    from archiver.crawl.visit import SiteVisit

log = logging.getLogger("archiver.crawl.renderer")


class SiteRenderer:
    """Renders one visit's pages and answers their requests."""

    def __init__(self, visit: SiteVisit) -> None:
        self.visit = visit
        # The answers given to this visit's pages' requests, the newest kept in memory; the URLs
        # they fetched (not fetched again when their turn in the queue comes) and where each one's
        # response record is (None: written as a revisit).
        self.answers = Answers(visit.ctx.config.browser.kept_answers)
        self.fetched: dict[str, RecordLocation | None] = {}
        self.last: PageRender | None = None  # the render of the page fetched last
        self._error: Exception | None = None  # the first a render's request raised
        self._robots_lock = trio.Lock()
        self._login: dict[str, str] | None = None  # the labels of a scripted login's requests
        self.leaked = False  # a scripted login's page asked for a URL holding the password
        # The page's requests come at once, each in a task; the site's connection takes one at a
        # time (an HTTP-only visit, one fetch after the other, needs no lock: none is taken).
        self._sending = trio.Lock()

    def site_fetched(self) -> None:
        """The visit fetched a page: a render's requests to the site come ``embed_gap`` after."""
        browsers = self.visit.ctx.browsers
        if browsers is not None and self.visit.crawl.capture != "http":  # none of an HTTP-only visit's
            browsers.clock.rest(self.visit.host, self.embed_gap())

    async def render(self, page: Entry, result: FetchResult) -> dict[str, str]:
        """Render the page ``result`` answered if crawl.capture asks for it (``last``);
        the labels saying so: ``rendered`` and its reason, or ``render-failed`` and why."""
        visit = self.visit
        browsers, crawl = visit.ctx.browsers, visit.crawl
        if browsers is None or crawl.capture == "http":
            return {}
        large = len(result.body) > bodies.LARGE
        reason = (await visit.ctx.bodies.run(render_reason, crawl.capture, result,
                                             crawl.max_decoded_size) if large else
                  render_reason(crawl.capture, result, crawl.max_decoded_size))
        if reason is None:
            return {}
        document = await self._answer_of(result)
        assert document is not None  # an answered 2xx
        requested: list[str] = []
        depth = page.depth + 1

        async def answer_request(request: Request) -> Answer | None:
            if request.kind == "Document" and urls.normalize(request.url) == result.url:
                return document  # its record is written after the render
            answer = await self._answer_kept(request, depth)
            if answer is not None:
                requested.append(request.url)
            return answer

        self._error = None

        jar = visit.session.jar
        try:
            rendering = await browsers.render(
                result.url, answer_request, jar.browser_cookies(time.time()) if jar else ())
        except RenderFailed as e:
            visit.ctx.stats.errors["render"] += 1
            event(log, logging.WARNING, "render-failed", site=visit.origin, url=result.url,
                  error=str(e))
            return {"render-failed": str(e)}
        self._raise_kept()
        visit.ctx.stats.rendered += 1
        if jar is not None:  # what its scripts set, kept as the site's answers' cookies are
            jar.receive_browser(result.url, rendering.cookies, time.time())
        self.last = PageRender(reason, rendering, requested)
        event(log, logging.DEBUG, "rendered", site=visit.origin, url=result.url, reason=reason,
              requests=rendering.requests, refused=rendering.refused,
              timed_out=rendering.timed_out)
        return {"rendered": reason}

    async def log_in(self, url: str, form: FormFill, labels: dict[str, str]) -> Rendering:
        """A scripted login: the page ``url`` rendered, its form filled in with ``form`` and
        submitted; the rendering of the page that leads to. Its requests, the form's POST too,
        are the visit's fetches, labelled ``labels``; the site's cookies go in and come back.
        RenderFailed, or FormMissing when the page holds no such form."""
        visit = self.visit
        browsers = visit.ctx.browsers
        assert browsers is not None
        jar = visit.session.jar

        async def answer_request(request: Request) -> Answer | None:
            return await self._answer_kept(request, 1)

        self._error, self._login = None, labels
        try:
            rendering = await browsers.render(
                url, answer_request, jar.browser_cookies(time.time()) if jar else (), form)
        finally:
            self._login = None
        self._raise_kept()
        if jar is not None:
            jar.receive_browser(rendering.url, rendering.cookies, time.time())
        return rendering

    async def _answer_kept(self, request: Request, depth: int) -> Answer | None:
        """``_answer``, an error it raises kept for after the render (``_raise_kept``): one
        request costs that request."""
        try:
            return await self._answer(request, depth)
        except Exception as e:
            self._error = self._error or e
            if not isinstance(e, LeaseLost):
                self._failed_request(request.url, e)
            return None

    def _raise_kept(self) -> None:
        """After a render: raise what a request raised that ends the visit (the lease lost, a
        full disk)."""
        error = self._error
        if isinstance(error, LeaseLost) or (
                isinstance(error, (OSError, sqlite3.Error)) and is_disk_error(error)):
            raise error

    async def _answer(self, request: Request, depth: int) -> Answer | None:
        """The answer to one request of a page being rendered: from memory, refused (None: a
        network error for the page), or fetched by this visit as any URL is."""
        visit = self.visit
        stats = visit.ctx.stats
        url = urls.normalize(request.url)
        if url is None:
            stats.skipped["browser-url"] += 1
            return None
        if self._login is not None and _holds_secret(request.url, visit.session.secrets):
            self.leaked = True  # a form sent by GET: its URL would be recorded with the password
            return None
        posted = (request.method == "POST" and self._login is not None  # a scripted login's form
                  and urls.origin(url) == visit.origin)
        if not posted and (answer := self.answers.get(url) or await self._from_archive(url)
                           ) is not None:
            return answer
        if request.method not in ("GET", "HEAD") and not posted:  # the client sends GET only
            stats.skipped["browser-method"] += 1
            return None
        own = urls.origin(url) in visit.policy.local
        decision = visit.policy.scope.decide(url)
        if not decision.in_scope:
            stats.skipped["scope"] += 1
            if own and not visit.crawl_queue.known(url):
                visit.crawl_queue.decide(url, "scope", scope_detail(decision.rule, "a rendered page"))
            return None
        origin, path = urls.split_origin(url)
        rules = visit.rules.get(origin)
        if rules is None:
            async with self._robots_lock:  # one fetch of robots.txt for requests made at once
                rules = visit.rules.get(origin) or await visit.robots(origin, embed=True) or (
                    robots.unreachable())
                visit.rules[origin] = rules
        if not rules.allowed(path):
            stats.robots_excluded += 1
            event(log, logging.DEBUG, "robots-excluded", site=visit.origin, url=url)
            if own and not visit.crawl_queue.known(url):
                visit.crawl_queue.decide(url, "robots")
            return None
        if visit.ctx.draining.is_set() or not visit.ctx.disk_ok.is_set():
            return None
        if posted:
            result = await visit.fetch(url, [], conditional=False, embed=True, method="POST",
                                       body=request.body, headers=_form_headers(request),
                                       labels=self._login)
            return await self._answer_of(result)
        result = await visit.fetch(url, [], conditional=False, embed=True, labels=self._login)
        if result.status is not None:  # its own links (an iframe's, a style sheet's)
            await visit.router.route(Entry(url, depth, 0), result, {})
        answer = await self._answer_of(result)
        if answer is not None and self._login is None:  # a login's pages are fetched again
            self.answers.put(url, answer)
        return answer

    async def _from_archive(self, url: str) -> Answer | None:
        """The answer to a URL an earlier page of this visit fetched, read back from its response
        record (None if it was not fetched, was a revisit, or cannot be read: it is fetched)."""
        location = self.fetched.get(url)
        if location is None:
            return None
        bundle = self.visit.ctx.bundle
        bundle.flush()  # the record may still wait in the writer's buffer
        try:
            stored = await trio.to_thread.run_sync(read_record, bundle.directory,
                                                   location.filename, location.offset,
                                                   location.length)
            head = StatusAndHeadersParser(["HTTP/1.0", "HTTP/1.1"]).parse(
                io.BytesIO(stored.http_head))
            status = int(head.get_statuscode())
        except (WarcError, OSError, ValueError, StatusAndHeadersParserException) as e:
            event(log, logging.INFO, "answer-unread", site=self.visit.origin, url=url, error=str(e))
            return None
        result = FetchResult(url=url, ip="", started=0.0, status=status,
                             headers=list(head.headers), body=stored.payload)
        answer = await self._answer_of(result)
        if answer is not None:
            self.answers.put(url, answer)
        return answer

    async def _answer_of(self, result: FetchResult) -> Answer | None:
        """``answer_of`` the fetch, a large body decoded in a worker thread."""
        visit = self.visit
        if len(result.body) > bodies.LARGE:
            return await visit.ctx.bodies.run(answer_of, result, visit.crawl.max_decoded_size)
        return answer_of(result, visit.crawl.max_decoded_size)

    def _failed_request(self, url: str, error: Exception) -> None:
        """A rendered page's request whose handling raised: logged with its traceback, counted."""
        visit = self.visit
        visit.ctx.stats.errors["internal"] += 1
        log.error("url-failed", exc_info=error, extra={"fields": {
            "site": visit.origin, "url": url, "error": f"{type(error).__name__}: {error}"}})

    def embed_gap(self) -> float:
        """The rest between two requests of a rendered page to its own site."""
        visit = self.visit
        return max(visit.ctx.config.browser.embed_rest, visit.policy.rest.crawl_delay or 0.0)

    async def exchange(self, url: str, method: str = "GET", body: bytes = b"",
                       headers: Sequence[tuple[str, str]] = ()) -> FetchResult:
        """Fetch a rendered page's request over the site's connection in its host's turn: its
        own site after ``browser.embed_rest``, another host after the crawl rest (``method``,
        ``body``, ``headers``: a scripted login's form)."""
        visit = self.visit
        browsers = visit.ctx.browsers
        assert browsers is not None
        host = urls.origin_parts(urls.origin(url))[1]
        own = host == visit.host
        async with browsers.clock.turn(host), self._sending:
            visit.ctx.stats.active[visit.origin]["url"] = url
            result = await visit.connection.fetch(url, [], visit.crawl, method=method, body=body,
                                                  headers=headers)
            now = trio.current_time()
            if own:
                browsers.clock.rest(host, self.embed_gap())
                visit.next_at = max(visit.next_at, now + visit.policy.rest.floor())
            else:
                delay = visit.rules.get(urls.origin(url))
                rest = Rest(visit.policy.rest.policy, delay.crawl_delay if delay else None)
                browsers.clock.rest(host, rest.after(result.status, result.elapsed, parse_retry_after(
                    result.header("retry-after"), result.started + result.elapsed)))
        return result


def _form_headers(request: Request) -> list[tuple[str, str]]:
    """The headers of a form's POST the client sends as the browser gave them."""
    return [(name, value) for name, value in request.headers.items()
            if name.lower() in ("content-type", "origin", "referer")]


def _holds_secret(url: str, secrets: Sequence[str]) -> bool:
    """Does ``url`` hold one of ``secrets``, in any form a form would write it?"""
    return any(form in url for secret in secrets for form in secret_forms(secret))
