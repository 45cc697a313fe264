"""One site's visit: the trio shell that resolves, fetches and rests for one site.

A visit runs in one crawler slot. It resolves the host, opens the site's crawl queue (seeding "/" if
the queue is new), fetches robots.txt once, then fetches queued URLs one at a time over one kept-alive
connection, resting between fetches. Each answer takes the capture road: what earlier captures say
makes it a ``Record`` (archiver.crawl.dedupe), the process's ``CaptureSink`` writes it to the WARC
bundle and the catalog (archiver.crawl.capture), and its links are routed (archiver.crawl.routing):
same-origin ones into the crawl queue through its Bloom bitmap, others to the spool.

Every decision (rests and back-off, what an answer means for the URL and the visit, where a link
goes, robots.txt redirects) is made by the sans-I/O objects of archiver.crawl.policy; this module
performs them. An unexpected error while handling one URL costs that URL only: it is logged with
its traceback, counted as ``errors=internal``, and the visit goes on (``crawl.max_internal_errors``
in a row end it).

A large body's work (hashing, WARC compression, decoding, link extraction, robots.txt parsing, the
page text plugins read) is done in a worker thread, and its links are routed in slices
(archiver.crawl.bodies), so that one response never holds the event loop for long. A response
naming more content codings than ``web.http.MAX_CODINGS`` is a protocol error: it is archived as
received, logged (``too-many-codings``) and counted as ``errors=codings``, and neither its links nor
its text are read.

Plugins (archiver.crawl.pluginhost) are asked here: ``should_visit`` when a link is routed and
again before a queued URL is fetched, ``on_capture`` for each response written (its labels go
into a metadata record right after it and into its catalog entry; a revisit is not labelled
again: its links are routed with the labels of the capture it repeats), ``site_priority`` for
each external link spooled.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections import Counter
from collections.abc import Mapping, Sequence

import trio

from archiver.config import site_crawl
from archiver.crawl import bodies
from archiver.crawl.capture import Labeller, Record
from archiver.crawl.connection import LeaseLost, SiteConnection
from archiver.crawl.context import CrawlContext
from archiver.crawl.http import FetchResult
from archiver.crawl.login import log_in
from archiver.crawl.pluginhost import PluginHost, no_plugins, read_document, small_document
from archiver.crawl.policy import MAX_HOPS_RULE, Outcome, RobotsAnswer, RobotsFetch, VisitPolicy
from archiver.crawl.politeness import RATE_LIMITED
from archiver.crawl.renderer import SiteRenderer
from archiver.crawl.routing import LinkRouter, scope_detail
from archiver.crawl.session import LOGIN, SiteSession
from archiver.crawl.sitemapping import read_sitemaps
from archiver.logs import event
from archiver.plugins import CaptureInfo, Document, VisitContext
from archiver.queues.models import Entry
from archiver.queues.revisits import PageChanges, ask_again
from archiver.store.bundles import Written
from archiver.store.durable import is_disk_error
from archiver.store.models import Capture
from archiver.web import robots, urls
from archiver.web.cookies import CookieJar
from archiver.web.gatekeepers import DEFAULT_RULES, SCANNED, recognise
from archiver.web.http import (
    MAX_CODINGS,
    CodingError,
    content_codings,
    decode_body,
    parse_retry_after,
)
from archiver.web.logins import redact_text
from archiver.web.sheets import sheet_for
from archiver.web.timestamps import from_datetime, to_datetime

log = logging.getLogger("archiver.crawl.visit")
GATEKEEPER = "gatekeeper"  # the label of a gatekeeper's answer (its kind)
# A page with one of these labels is not the site's content: never rendered.
_NOT_RENDERED = {GATEKEEPER, LOGIN, "session-lost"}
OK_SCANNED = 8192  # of a 2xx page, the bytes the gatekeeper rules read (SCANNED of another)


class _Postponed(Exception):
    """The site's sheet closed its window during a rest: the visit stops before the fetch."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.note)
        self.outcome = outcome


class _Draining(Exception):
    """The process is draining (SIGTERM) or the disk is full: the visit stops before its next
    fetch and the site goes back to the queue."""


class SiteVisit:
    """Crawls one origin until its queue is empty, a limit is reached, or it must be retried."""

    def __init__(self, origin: str, ctx: CrawlContext, *, recrawl: bool = False, hops: int = 0,
                 plugins: PluginHost | None = None, cookies: str = "") -> None:
        """``recrawl``: the site was visited before, so unchanged payloads become revisit records;
        ``hops``: the site's hop count from a seed site (``scope.max_hops``); ``plugins``: the
        process's plugins (none if not given); ``cookies``: the site's cookie jar as its last
        visit left it (CookieJar.to_json)."""
        self.origin = origin
        self.ctx = ctx
        self.recrawl = recrawl
        self.host = urls.origin_parts(origin)[1]
        self.rules: dict[str, robots.RobotsRules] = {}
        self.next_at = 0.0
        self._rest_from = 0.0  # when the current rest began
        # The first [[sheets]] table matching the site (archiver.web.sheets), and the [crawl]
        # settings with its overrides.
        self.sheet = sheet_for(ctx.config.sheets, origin)
        self.crawl = site_crawl(ctx.config.crawl, self.sheet)
        self.policy = VisitPolicy(origin, self.crawl, scope=ctx.config.scope.rules(),
                                  hops=hops, max_hops=ctx.config.scope.max_hops)
        # Pages compared with their last capture of an earlier visit (the site's change rate).
        self.changes = PageChanges()
        self._started = time.time()
        self._config = ctx.config  # the config the policy came from (SIGHUP replaces it)
        self.plugins = (plugins or no_plugins(ctx.stats.errors)).for_site(origin)
        self.labels: dict[str, str] = {}  # the plugins' labels of the page fetched last
        # Browser-assisted capture: renders the visit's pages, answers their requests.
        self.renderer = SiteRenderer(self)
        # The site's cookie jar and login (archiver.crawl.session).
        login = self.sheet.login if self.sheet is not None else None
        self.kept_cookies = cookies  # the jar as the last visit kept it
        jar = self._jar(cookies) if self.crawl.cookies else None
        self.session = SiteSession(origin, jar=jar, login=login, credential=None if login is None
                                   else ctx.config.credentials.get(login.credentials))
        self.gatekeepers: Counter[str] = Counter()  # gatekeeper answers by kind
        self.gatekept: str | None = None  # the gatekeeper kind of the last fetch's answer
        self.answer_again = False  # the last answer was a Digest challenge the session answers
        self.sitemaps_read = False
        # Sitemap URLs whose lastmod is newer than their last capture (archiver.crawl.sitemapping):
        # fetched before the crawl queue's next entries; once fetched, skipped when reached.
        self.due_first: list[str] = []
        self.fetched_first: set[str] = set()

    def _jar(self, kept: str) -> CookieJar:
        """The site's cookie jar as its last visit ``kept`` it ("" for none: an empty jar)."""
        if not kept:
            return CookieJar()
        jar, problem = CookieJar.from_json(kept, time.time())
        if problem is not None:
            event(log, logging.WARNING, "cookies-unreadable", site=self.origin, reason=problem)
        return jar

    async def run(self) -> Outcome:
        ctx = self.ctx
        if self.policy.beyond_max_hops():
            ctx.stats.skipped["scope"] += 1
            return Outcome("done", f"{MAX_HOPS_RULE}: {self.policy.hops} hops from a seed site")
        resolution = await ctx.lookup.resolve(self.host)
        if not resolution.addresses:
            ctx.stats.errors["dns"] += 1
            event(log, logging.WARNING, "dns-failed", site=self.origin, error=resolution.error)
            return Outcome("retry", f"dns: {resolution.error}")
        self.connection = SiteConnection(self.origin, ctx, self.crawl, self.session)
        self.connection.addresses[self.host] = resolution.addresses[0]
        # Opening reads the whole log (the bitmap is rebuilt from it) and merges the inbox under
        # its lock: a worker thread's job, not the event loop's.
        crawl_queue = await trio.to_thread.run_sync(ctx.crawl_queues.open, self.origin)
        self.crawl_queue = crawl_queue
        ctx.open_queues.add(crawl_queue)
        self.policy.pages, self.policy.bytes = crawl_queue.pages, crawl_queue.bytes
        self.router = LinkRouter(self.origin, ctx, self.policy, crawl_queue, self.plugins)
        ctx.stats.active[self.origin] = {"url": "", "queued": crawl_queue.pending}
        try:
            if len(crawl_queue) == 0:
                crawl_queue.add(self.origin + "/", 0)
            if crawl_queue.pending == 0:  # woken for links it already had: no robots.txt needed
                return Outcome("done", "nothing new")
            return await self._crawl()
        except _Draining:
            return Outcome("stopped", "draining" if ctx.disk_ok.is_set() else ctx.held_by)
        except _Postponed as e:
            return e.outcome
        except LeaseLost:
            return Outcome("lost", "the site's lease went to another process")
        except (OSError, sqlite3.Error) as e:
            if not is_disk_error(e):
                raise
            ctx.disk_trouble(e, f"site {self.origin}")
            return Outcome("stopped", "disk full")
        finally:
            ctx.stats.active.pop(self.origin, None)
            try:
                with trio.CancelScope(shield=True):
                    await ctx.settle(crawl_queue)
            finally:
                ctx.open_queues.discard(crawl_queue)
                with trio.CancelScope(shield=True):  # a shared queue writes its last entries
                    await trio.to_thread.run_sync(crawl_queue.close)
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await self.connection.aclose()

    async def _crawl(self) -> Outcome:
        policy, crawl_queue = self.policy, self.crawl_queue
        while True:
            self._follow_config()
            limit = policy.limit_reached()
            if limit is not None:
                return Outcome("done", limit)
            if (postponed := self.sheet_wait()) is not None:
                return postponed
            entry = self._due_first() or crawl_queue.next(merge=False)
            if entry is None and crawl_queue.inbox_waiting():
                await self._merge_inbox()
                entry = crawl_queue.next(merge=False)
            if entry is None:
                return Outcome("done", "")
            if self._out_of_scope(entry) or self._refused(entry) or self._login_page(entry):
                await trio.lowlevel.checkpoint()  # a long run of them must let others run
                continue
            # robots.txt before the first URL in scope (a visit of out-of-scope URLs needs none).
            if self.origin not in self.rules and await self.robots(self.origin) is None:
                return Outcome("retry", "robots.txt unavailable")  # the URL stays queued
            if (self.session.login is not None and not self.session.opened
                    and (reason := await log_in(self))):
                return self._pause(reason)
            if self.crawl.sitemaps and not self.sitemaps_read:
                self.sitemaps_read = True
                await read_sitemaps(self)
            try:
                end = await self._handle(entry)
                policy.handled()
            except (_Draining, LeaseLost, _Postponed):
                raise
            except Exception as e:  # one URL's bug costs that URL, not the site
                if isinstance(e, (OSError, sqlite3.Error)) and is_disk_error(e):
                    raise
                end = self._failed(entry, e)
            if end is not None:
                return end
            self.ctx.stats.active[self.origin]["queued"] = crawl_queue.pending

    def sheet_wait(self) -> Outcome | None:
        """The visit's end if the site's sheet says it may not be fetched now: its window is
        closed, or its daily budget is spent (pages counted in the crawl queue, which keeps the
        count across restarts)."""
        sheet = self.sheet
        if sheet is None:
            return None
        now = self.ctx.clock()
        spent = self.crawl_queue.day_pages(sheet.day_of(now)) if sheet.daily_pages else 0
        wait = sheet.wait(now, spent)
        return None if wait is None else Outcome("postponed", wait[1], due=wait[0])

    def _out_of_scope(self, entry: Entry) -> bool:
        """Finish, unfetched, a queued URL the scope rules exclude (queued before they did)."""
        decision = self.policy.scope.decide(entry.url)
        if decision.in_scope:
            return False
        self.ctx.stats.skipped["scope"] += 1
        event(log, logging.DEBUG, "out-of-scope", site=self.origin, url=entry.url,
              rule=decision.rule)
        self.crawl_queue.decide(entry.url, "scope", scope_detail(decision.rule, None))
        self._commit(entry)
        return True

    def _refused(self, entry: Entry) -> bool:
        """Finish, unfetched, a queued URL a plugin's should_visit refuses."""
        if not self.plugins.wants("should_visit"):
            return False
        plugin = self.plugins.refusal(entry.url, VisitContext(self.origin, None, entry.depth, False))
        if plugin is None:
            return False
        self.ctx.stats.skipped["plugin"] += 1
        event(log, logging.DEBUG, "plugin-refused", site=self.origin, url=entry.url, plugin=plugin)
        self.crawl_queue.decide(entry.url, "plugin", f"{plugin}, queued before")
        self._commit(entry)
        return True

    def _login_page(self, entry: Entry) -> bool:
        """Finish, unfetched, a queued URL that is the sheet's login page."""
        if not self.session.login_page(entry.url):
            return False
        self.crawl_queue.decide(entry.url, "login", "the sheet's login_url: fetched to log in only")
        self._commit(entry)
        return True

    async def _merge_inbox(self) -> None:
        """Merge the URLs other processes queued for this site: the inbox's reads and its delete
        (another process may hold the inbox database's write lock) and the log's fsync are done in
        a worker thread."""
        crawl_queue = self.crawl_queue
        inbox = await trio.to_thread.run_sync(crawl_queue.take_inbox)
        if inbox is None:
            return
        try:
            added = crawl_queue.merge(inbox)
        except BaseException:
            inbox.release()  # the URLs stay in the inbox
            raise
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(crawl_queue.finish_inbox, inbox, added)

    async def _handle(self, entry: Entry) -> Outcome | None:
        """Fetch one queued URL (if robots.txt allows) and act on the answer;
        the outcome if the visit ends here."""
        stats, policy = self.ctx.stats, self.policy
        origin, path = urls.split_origin(entry.url)
        rules = self.rules.get(origin)
        if rules is None:
            rules = self.rules[origin] = await self.robots(origin) or robots.unreachable()
        if not rules.allowed(path):
            stats.robots_excluded += 1
            event(log, logging.DEBUG, "robots-excluded", site=self.origin, url=entry.url)
            self.crawl_queue.decide(entry.url, "robots")
            self._commit(entry)
            await trio.lowlevel.checkpoint()  # a long run of excluded URLs must let others run
            return None
        # A page's render fetched it in this visit, or it was due first.
        if entry.url in self.renderer.fetched or (entry.end >= 0 and entry.url in
                                                  self.fetched_first):
            self._commit(entry)
            await trio.lowlevel.checkpoint()
            return None
        earlier = await self.ctx.dedupe.earlier(entry.url) if self.recrawl else []
        if not ask_again([(to_datetime(c.timestamp).timestamp(), c.status) for c in earlier],
                         time.time()):
            stats.skipped["gone"] += 1  # asked less often while it stays gone
            last = earlier[-1]
            self.crawl_queue.decide(entry.url, "gone", f"{last.status} at {last.timestamp}")
            self._commit(entry)
            await trio.lowlevel.checkpoint()
            return None
        self.answer_again = False
        result = await self.fetch(entry.url, earlier, page=entry)
        if self.answer_again:  # a Digest challenge: the same URL with its answer, once
            result = await self.fetch(entry.url, earlier, page=entry)
        if self.session.lost:  # before archiving more pages of a login: the URL stays queued
            return self._pause(self.session.lost)
        if result.status is not None and self.sheet is not None and self.sheet.daily_pages:
            self.crawl_queue.count_day_page(self.sheet.day_of(self.ctx.clock()))
        if result.status is None:
            self.crawl_queue.decide(entry.url, "fetch-error", result.error or "error")
        verdict = policy.verdict(result.status, result.error, gatekeeper=self.gatekept)
        if verdict.links:
            await self.router.route(entry, result, self.labels)
            if (render := self.renderer.last) is not None:  # what the browser found, routed
                rendering = render.rendering
                await self.router.route_urls(
                    entry, [*rendering.links, *rendering.routes, *render.requested], self.labels)
        if verdict.entry == "requeue":
            self.crawl_queue.requeue(entry.url, entry.depth)
        if verdict.entry != "keep":
            self._commit(entry)
        return verdict.end

    def _pause(self, reason: str) -> Outcome:
        """The visit ends with its site paused: its session is lost or its login failed."""
        reason = redact_text(reason, self.session.secrets)  # it goes to the site queue and logs
        event(log, logging.WARNING, "session-lost" if self.session.lost else "login-failed",
              site=self.origin, reason=reason)
        return Outcome("paused", reason)

    def _failed(self, entry: Entry, error: Exception) -> Outcome | None:
        """A URL whose handling raised: logged with its traceback, counted, finished as failed."""
        self.ctx.stats.errors["internal"] += 1
        log.error("url-failed", exc_info=error, extra={"fields": {
            "site": self.origin, "url": entry.url, "error": f"{type(error).__name__}: {error}"}})
        self.crawl_queue.decide(entry.url, "error", f"{type(error).__name__}: {error}")
        self._commit(entry)
        self.next_at = max(self.next_at, trio.current_time() + self.policy.rest.floor())
        return self.policy.after_internal_error()

    async def _rest(self) -> bool:
        """Wait out the site's rest (and first, while the database is away, for it to come back);
        True (at once) if the process is draining. A reload that shortens the rest ends it sooner."""
        ctx = self.ctx
        while not ctx.store_ok.is_set() and not ctx.draining.is_set():  # the database is away
            await ctx.wake.wait()
        while (not ctx.draining.is_set() and ctx.disk_ok.is_set()
               and trio.current_time() < self.next_at):
            wake = ctx.wake
            with trio.move_on_at(self.next_at):
                await wake.wait()
            self._follow_config()
        return ctx.draining.is_set() or not ctx.disk_ok.is_set()

    def _follow_config(self) -> None:
        """After SIGHUP: the new sheets, rests and limits apply from now on, to the rest under
        way too (a new User-Agent from the next fetch)."""
        if self.ctx.config is self._config:
            return
        self._config = self.ctx.config
        self.sheet = sheet_for(self._config.sheets, self.origin)
        self.crawl = site_crawl(self._config.crawl, self.sheet)
        self.policy.reconfigure(self.crawl, self._config.scope.rules(),
                                self._config.scope.max_hops)
        self.next_at = min(self.next_at, self._rest_from + self.policy.rest.floor())

    def _commit(self, entry: Entry) -> None:
        """Record, in memory, that ``entry`` is finished (see CrawlQueue.commit); an entry due
        first (no place in the log) has nothing to record."""
        if entry.end >= 0:
            self.crawl_queue.commit(entry, pages=self.policy.pages, bytes_=self.policy.bytes)

    def _due_first(self) -> Entry | None:
        """The next URL due first (a sitemap's lastmod says it changed), as an entry with no
        place in the crawl queue's log."""
        while self.due_first:
            url = self.due_first.pop(0)
            if url not in self.fetched_first:
                self.fetched_first.add(url)
                return Entry(url, 1, -1)
        return None

    async def robots(self, origin: str, *, embed: bool = False) -> robots.RobotsRules | None:
        """Fetch and parse ``origin``'s robots.txt (RFC 9309 §2.3); None when it is unavailable.
        ``embed``: for a request of a rendered page (in its host's turn)."""
        walk = RobotsFetch(origin, self.ctx.config.crawl.agent)
        while True:
            earlier = await self.ctx.dedupe.earlier(walk.url) if self.recrawl else []
            # Rules need a body: never conditional.
            result = await self.fetch(walk.url, earlier, conditional=False, embed=embed)
            # Parsing costs up to about 1 ms per KiB, and a file is read up to 500 KiB: always
            # in a worker thread (once per origin and visit).
            if self.gatekept is not None:  # not the file: unavailable (never "allow all")
                answer = RobotsAnswer(reason=f"gatekeeper: {self.gatekept}")
                break
            answer = await self.ctx.bodies.run(
                walk.answer, result.status, location=result.header("location"),
                content_encoding=result.header("content-encoding"), body=result.body,
                truncated=result.truncated)
            if answer.follow is None:
                break
        if answer.rules is None:
            event(log, logging.WARNING, "robots-unavailable", site=origin, reason=answer.reason)
            return None
        rules = self.rules[origin] = answer.rules
        if origin == self.origin and rules.crawl_delay:
            # The rest after robots.txt itself must already honour its Crawl-delay.
            rest = self.policy.rest
            rest.crawl_delay = rules.crawl_delay
            self.next_at = max(self.next_at, self._rest_from + rest.floor())
        return rules

    async def fetch(self, url: str, earlier: list[Capture], *, conditional: bool = True,
                    page: Entry | None = None, embed: bool = False, method: str = "GET",
                    body: bytes = b"", headers: Sequence[tuple[str, str]] = (),
                    labels: Mapping[str, str] | None = None) -> FetchResult:
        """Rest, fetch ``url`` (``conditional``: asking whether the last of its ``earlier``
        captures is still current), hand the answer to the capture sink, set the next rest.
        ``page``: the queued page fetched, rendered if crawl.capture asks for it; ``embed``: a
        request of a page being rendered (archiver.crawl.rendering); ``method``, ``body``,
        ``headers``: a login's request (archiver.crawl.login), whose ``labels`` the capture gets
        instead of the session's. A gatekeeper's answer (archiver.web.gatekeepers) is labelled
        with its kind (``gatekept``), neither rendered nor checked for the session; a page that
        shows the session lost (SiteSession.check) is labelled so and ends the visit."""
        ctx, stats = self.ctx, self.ctx.stats
        if page is not None:
            self.labels, self.renderer.last = {}, None
        if ctx.bundle.error is not None:  # the WARC could not be written: stop fetching
            ctx.disk_trouble(ctx.bundle.error, "warc")
        # Before the rest (its time counts towards it): the validators of the payload the last
        # capture stands for, to ask whether it changed since.
        dedupe = ctx.config.crawl.dedupe
        asking = await ctx.dedupe.ask(earlier, dedupe=dedupe, conditional=conditional)
        result = await (self.renderer.exchange(url, method, body, headers) if embed else
                        self._exchange(url, asking.conditions, method, body, headers))
        self.gatekept = None
        if result.status is None:
            kind = (result.error or "error").split(":", 1)[0]
            stats.errors[kind] += 1
            event(log, logging.INFO, "fetch-failed", site=self.origin, url=url, error=result.error)
            return result
        try:
            content_codings(result.header("content-encoding"))
        except CodingError:  # archived as received; its links and text are not read
            stats.errors["codings"] += 1
            event(log, logging.INFO, "too-many-codings", site=self.origin, url=url,
                  limit=MAX_CODINGS)
        fixed = dict(labels) if labels is not None else self._answer_labels(result, page, embed)
        record, digest = await ctx.dedupe.record(result, asking, dedupe=dedupe)
        base = asking.base
        # A capture of this visit (fetched again) is no earlier visit's: whole seconds, as stored.
        if base is not None and (seen := to_datetime(earlier[-1].timestamp).timestamp()) < int(
                self._started):
            self.changes.page(changed=not record.not_modified and (base.status, base.digest)
                              != (result.status, digest), since=result.started - seen)
        labeller: Labeller | None = None
        if page is not None and not fixed.keys() & _NOT_RENDERED:
            fixed.update(await self.renderer.render(page, result))
        if record.original is not None:  # a revisit's links go with the labels it repeats
            if page is not None:
                self.labels = dict(record.original.label_map)
        elif self.plugins.wants("on_capture") and not embed:
            labeller = functools.partial(self._labels, await self._document(url, result), fixed)
        elif fixed:
            labeller = lambda record, written: fixed  # noqa: E731
        written = await ctx.sink.write(record, origin=self.origin, labeller=labeller)
        if embed and labels is None:  # where a later page of this visit finds it again (a
            # login's exchanges are not the site's content: its pages are fetched again)
            self.renderer.fetched[url] = written.response if record.original is None else None
        if self.renderer.last is not None and page is not None:
            ctx.sink.write_rendering(url, self.renderer.last.rendering, refers_to=written,
                                     date=record.date, origin=self.origin)
        size = len(result.head) + len(result.body)
        stats.pages += 1
        stats.bytes += size
        if result.truncated:
            stats.errors[f"truncated-{result.truncated}"] += 1
        if result.status >= 400:
            stats.errors[f"http-{result.status // 100}xx"] += 1
        event(log, logging.DEBUG, "fetched", site=self.origin, url=url, status=result.status,
              bytes=size, ms=round(result.elapsed * 1000))
        return result

    def _answer_labels(self, result: FetchResult, page: Entry | None, embed: bool
                       ) -> dict[str, str]:
        """The labels of an answer of the site: a gatekeeper's kind (which also slows the
        visit down), or the session's; a page showing the session lost marks it lost."""
        assert result.status is not None
        match = self._gatekeeper(result)
        if match is not None:
            self.gatekept = match
            self.gatekeepers[match] += 1
            self.ctx.stats.gatekeepers[match] += 1
            event(log, logging.INFO, "gatekeeper", site=self.origin, url=result.url, kind=match)
            if not embed and result.status not in RATE_LIMITED:  # Rest.after slowed down for those
                self.next_at = max(self.next_at, self._rest_from + self.policy.rest.slow_down())
            return {GATEKEEPER: match}
        session = self.session
        if session.challenge(result):  # a Digest login's exchange: answered by a fetch again
            self.answer_again = True
            return {LOGIN: session.id}
        if page is not None and session.opened:
            text = None
            if session.login is not None and session.login.logged_in and _is_html(result):
                text = decode_body(result.body, result.header("content-encoding"),
                                   self.crawl.max_decoded_size).decode("utf-8", "replace")
            session.lost = session.check(result.url, result.status, result.header("location"),
                                         text)
        return session.labels() if session.own(result.url) else {}

    def _gatekeeper(self, result: FetchResult) -> str | None:
        """The kind of gatekeeper whose answer ``result`` is, or None (crawl.gatekeepers)."""
        if not self.crawl.gatekeepers:
            return None
        assert result.status is not None
        # Gatekeepers answer with a page: no other body is read (an image, a script, a style
        # sheet). Of a 2xx page, the first OK_SCANNED bytes: a challenge served as 200 says so
        # at its top (its title), and the site's own pages, nearly all answers, cost less.
        scanned = OK_SCANNED if 200 <= result.status < 300 else SCANNED
        body = decode_body(result.body, result.header("content-encoding"), scanned) \
            if _is_html(result) or result.header("content-type") is None else b""
        match = recognise(result.status, result.headers, body,
                          (*self._config.crawl.gatekeeper_rules, *DEFAULT_RULES))
        return None if match is None else match.kind

    async def _exchange(self, url: str, conditions: list[tuple[str, str]], method: str = "GET",
                        body: bytes = b"", headers: Sequence[tuple[str, str]] = ()
                        ) -> FetchResult:
        """Wait out the rest, then fetch ``url`` over the site's connection (``method``,
        ``body``, ``headers``: a login's request); set the next rest from the answer."""
        ctx = self.ctx
        if not ctx.disk_ok.is_set() or await self._rest():
            raise _Draining
        if (postponed := self.sheet_wait()) is not None:  # the window closed during the rest
            raise _Postponed(postponed)
        ctx.stats.active[self.origin]["url"] = url
        result = await self.connection.fetch(url, conditions, self.crawl, method=method,
                                             body=body, headers=headers)
        now = self._rest_from = trio.current_time()
        self.renderer.site_fetched()
        retry_after = parse_retry_after(result.header("retry-after"), result.started
                                        + result.elapsed)
        size = len(result.head) + len(result.body)
        self.next_at = now + self.policy.fetched(result.status, result.elapsed, retry_after, size)
        return result

    async def _document(self, url: str, result: FetchResult) -> Document:
        """The document on_capture sees (archiver.crawl.pluginhost): a large body's, and its text,
        made in a worker thread."""
        assert result.status is not None
        headers: dict[str, str] = {}
        for name, value in result.headers:  # as parsed by the fetch, first value of each name
            headers.setdefault(name.lower(), value)
        truncated = bool(result.truncated)
        document = small_document(url, result.status, headers, result.body, truncated, bodies.LARGE)
        if document is None:
            document = await self.ctx.bodies.run(read_document, url, result.status, headers,
                                                 result.body, truncated)
        return document

    def _labels(self, document: Document, fixed: dict[str, str], record: Record,
                written: Written) -> dict[str, str]:
        """The plugins' on_capture labels of the response just written, and the ``fixed`` ones
        (the session's, a rendering's: the capture sink writes them in a metadata record right
        after it; a kill before that loses the labels, not the capture)."""
        capture = CaptureInfo(document.url, from_datetime(record.date), document.status,
                              written.record_id, written.response.filename,
                              written.response.offset, self.origin)
        self.labels = self.plugins.labels(capture, document)
        return {**self.labels, **fixed}



def _is_html(result: FetchResult) -> bool:
    """Is the answer an HTML page (by its Content-Type)?"""
    kind = (result.header("content-type") or "").split(";", 1)[0].strip().lower()
    return kind in ("text/html", "application/xhtml+xml")
