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

import trio

from archiver.config import site_crawl
from archiver.crawl import bodies
from archiver.crawl.capture import Labeller, Record
from archiver.crawl.connection import LeaseLost, SiteConnection
from archiver.crawl.context import CrawlContext
from archiver.crawl.http import FetchResult
from archiver.crawl.pluginhost import PluginHost, no_plugins, read_document, small_document
from archiver.crawl.policy import MAX_HOPS_RULE, Outcome, RobotsFetch, VisitPolicy
from archiver.crawl.renderer import SiteRenderer
from archiver.crawl.routing import LinkRouter, scope_detail
from archiver.logs import event
from archiver.plugins import CaptureInfo, Document, VisitContext
from archiver.queues.models import Entry
from archiver.queues.revisits import PageChanges, ask_again
from archiver.store.bundles import Written
from archiver.store.durable import is_disk_error
from archiver.store.models import Capture
from archiver.web import robots, urls
from archiver.web.http import MAX_CODINGS, CodingError, content_codings, parse_retry_after
from archiver.web.sheets import sheet_for
from archiver.web.timestamps import from_datetime, to_datetime

log = logging.getLogger("archiver.crawl.visit")


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
                 plugins: PluginHost | None = None) -> None:
        """``recrawl``: the site was visited before, so unchanged payloads become revisit records;
        ``hops``: the site's hop count from a seed site (``scope.max_hops``); ``plugins``: the
        process's plugins (none if not given)."""
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
        self.connection = SiteConnection(self.origin, ctx, self.crawl)
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
            entry = crawl_queue.next(merge=False)
            if entry is None and crawl_queue.inbox_waiting():
                await self._merge_inbox()
                entry = crawl_queue.next(merge=False)
            if entry is None:
                return Outcome("done", "")
            if self._out_of_scope(entry) or self._refused(entry):
                await trio.lowlevel.checkpoint()  # a long run of them must let others run
                continue
            # robots.txt before the first URL in scope (a visit of out-of-scope URLs needs none).
            if self.origin not in self.rules and await self.robots(self.origin) is None:
                return Outcome("retry", "robots.txt unavailable")  # the URL stays queued
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
        if entry.url in self.renderer.fetched:  # a page's render fetched it in this visit
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
        result = await self.fetch(entry.url, earlier, page=entry)
        if result.status is not None and self.sheet is not None and self.sheet.daily_pages:
            self.crawl_queue.count_day_page(self.sheet.day_of(self.ctx.clock()))
        if result.status is None:
            self.crawl_queue.decide(entry.url, "fetch-error", result.error or "error")
        verdict = policy.verdict(result.status, result.error)
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
        """Record, in memory, that ``entry`` is finished (see CrawlQueue.commit)."""
        self.crawl_queue.commit(entry, pages=self.policy.pages, bytes_=self.policy.bytes)

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
                     page: Entry | None = None, embed: bool = False) -> FetchResult:
        """Rest, fetch ``url`` (``conditional``: asking whether the last of its ``earlier``
        captures is still current), hand the answer to the capture sink, set the next rest.
        ``page``: the queued page fetched, rendered if crawl.capture asks for it; ``embed``: a
        request of a page being rendered (archiver.crawl.rendering)."""
        ctx, stats = self.ctx, self.ctx.stats
        if page is not None:
            self.labels, self.renderer.last = {}, None
        if ctx.bundle.error is not None:  # the WARC could not be written: stop fetching
            ctx.disk_trouble(ctx.bundle.error, "warc")
        # Before the rest (its time counts towards it): the validators of the payload the last
        # capture stands for, to ask whether it changed since.
        dedupe = ctx.config.crawl.dedupe
        asking = await ctx.dedupe.ask(earlier, dedupe=dedupe, conditional=conditional)
        result = await (self.renderer.exchange(url) if embed else
                        self._exchange(url, asking.conditions))
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
        record, digest = await ctx.dedupe.record(result, asking, dedupe=dedupe)
        base = asking.base
        # A capture of this visit (fetched again) is no earlier visit's: whole seconds, as stored.
        if base is not None and (seen := to_datetime(earlier[-1].timestamp).timestamp()) < int(
                self._started):
            self.changes.page(changed=not record.not_modified and (base.status, base.digest)
                              != (result.status, digest), since=result.started - seen)
        labeller: Labeller | None = None
        rendered = await self.renderer.render(page, result) if page is not None else {}
        if record.original is not None:  # a revisit's links go with the labels it repeats
            if page is not None:
                self.labels = dict(record.original.label_map)
        elif self.plugins.wants("on_capture") and not embed:
            labeller = functools.partial(self._labels, await self._document(url, result),
                                         rendered)
        elif rendered:
            labeller = lambda record, written: rendered  # noqa: E731
        written = await ctx.sink.write(record, origin=self.origin, labeller=labeller)
        if embed:  # where a later page of this visit finds it again
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

    async def _exchange(self, url: str, conditions: list[tuple[str, str]]) -> FetchResult:
        """Wait out the rest, then fetch ``url`` over the site's connection; set the next rest
        from the answer."""
        ctx = self.ctx
        if not ctx.disk_ok.is_set() or await self._rest():
            raise _Draining
        if (postponed := self.sheet_wait()) is not None:  # the window closed during the rest
            raise _Postponed(postponed)
        ctx.stats.active[self.origin]["url"] = url
        result = await self.connection.fetch(url, conditions, self.crawl)
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

    def _labels(self, document: Document, rendered: dict[str, str], record: Record,
                written: Written) -> dict[str, str]:
        """The plugins' on_capture labels of the response just written, and ``rendered`` (the
        capture sink writes them in a metadata record right after it; a kill before that loses
        the labels, not the capture)."""
        capture = CaptureInfo(document.url, from_datetime(record.date), document.status,
                              written.record_id, written.response.filename,
                              written.response.offset, self.origin)
        self.labels = self.plugins.labels(capture, document)
        return {**self.labels, **rendered}

