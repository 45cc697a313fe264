"""One site's visit: robots.txt, the fetch loop with rests, and routing of the links found.

A visit runs in one crawler slot. It resolves the host, opens the site's crawl queue (seeding "/" if
the queue is new), fetches robots.txt once, then fetches queued URLs one at a time over one kept-alive
connection, resting between fetches. Every response goes to the WARC bundle; links on the same
origin go to the crawl queue through its Bloom bitmap, links to other sites to the spool.

A redirect from http to https (or back) on the same host keeps the other scheme inside this visit
(an *alias* origin, with its own robots.txt as RFC 9309 §2.3 scopes robots.txt to scheme, host and
port); otherwise every other origin is external.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import Counter, deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import trio

from archiver import pagelinks, robots, urls
from archiver.bloom import GrowingBloom
from archiver.bundle import payload_digest
from archiver.catalog import Capture, CatalogError
from archiver.durable import is_disk_error
from archiver.fetch import FetchResult, HttpClient, decode_body
from archiver.frontier import Entry, Frontier, site_dir
from archiver.logs import event
from archiver.politeness import Rest, RestPolicy, parse_retry_after
from archiver.timestamps import to_datetime
from archiver.warcindex import capture_fields

if TYPE_CHECKING:
    from archiver.config import Config
    from archiver.crawler import CrawlContext

log = logging.getLogger("archiver.site")

@dataclass(frozen=True)
class Outcome:
    """How a visit ended: ``done`` (finished or stopped by a site limit) or ``retry`` (come back later)."""

    kind: str  # "done", "retry", or "stopped" (the process is draining: back to the queue)
    note: str = ""


class _Draining(Exception):
    """The process is draining (SIGTERM) or the disk is full: the visit stops before its next
    fetch and the site goes back to the queue."""


def rest_policy(config: Config) -> RestPolicy:
    c = config.crawl
    return RestPolicy(c.min_rest, c.max_rest, c.rest_factor, c.max_retry_after, c.backoff_start,
                      c.max_backoff, c.backoff_recovery)


def looks_like_trap(url: str, max_repeats: int) -> bool:
    """A path that repeats one segment more than ``max_repeats`` times (``/a/b/a/b/a/b/...``)."""
    segments = [s for s in urls.path_segments(url) if s]
    if len(segments) <= max_repeats:
        return False
    return Counter(segments).most_common(1)[0][1] > max_repeats


class SiteVisit:
    """Crawls one origin until its queue is empty, a limit is reached, or it must be retried."""

    def __init__(self, origin: str, ctx: CrawlContext, *, recrawl: bool = False) -> None:
        """``recrawl``: the site was visited before, so unchanged payloads become revisit records."""
        self.origin = origin
        self.ctx = ctx
        self.recrawl = recrawl
        self.scheme, self.host, self.port = urls.origin_parts(origin)
        self.rules: dict[str, robots.RobotsRules] = {}
        self.local = {origin}
        self.addresses: dict[str, str] = {}
        self.next_at = 0.0
        self._rest_from = 0.0  # when the current rest began
        self.held: str | None = None  # the address whose connection slot this visit holds
        self.failures = 0
        self.retries: deque[tuple[Entry, int]] = deque()
        self.external = GrowingBloom(initial_bits=65_536, max_fp=1e-3)
        self.rest = Rest(rest_policy(ctx.config))
        self._config = ctx.config  # the config the rest policy came from (SIGHUP replaces it)

    async def run(self) -> Outcome:
        ctx, c = self.ctx, self.ctx.config.crawl
        resolution = await ctx.resolver.resolve(self.host)
        if not resolution.addresses:
            ctx.stats.errors["dns"] += 1
            event(log, logging.WARNING, "dns-failed", site=self.origin, error=resolution.error)
            return Outcome("retry", f"dns: {resolution.error}")
        self.addresses[self.host] = resolution.addresses[0]
        frontier = Frontier.open(site_dir(ctx.config.root, self.origin),
                                 bloom_bits=c.site_bitmap_bits, max_fp=c.site_bitmap_max_fp)
        self.frontier = frontier
        ctx.frontiers.add(frontier)
        self.pages, self.bytes = frontier.pages, frontier.bytes
        client = HttpClient(user_agent=c.user_agent, connect_timeout=c.connect_timeout,
                            first_byte_timeout=c.first_byte_timeout, total_timeout=c.total_timeout,
                            max_size=c.max_response_size, max_header_size=c.max_header_size,
                            verify_tls=c.verify_tls)
        self.client = client
        ctx.stats.active[self.origin] = {"url": "", "queued": frontier.pending}
        try:
            if len(frontier) == 0:
                frontier.add(self.origin + "/", 0)
            if frontier.pending == 0:  # woken for links it already had: no robots.txt needed
                return Outcome("done", "nothing new")
            if await self._robots(self.origin) is None:
                return Outcome("retry", "robots.txt unavailable")
            return await self._crawl()
        except _Draining:
            return Outcome("stopped", "draining" if ctx.disk_ok.is_set() else "disk full")
        except (OSError, sqlite3.Error) as e:
            if not is_disk_error(e):
                raise
            ctx.disk_trouble(e, f"site {self.origin}")
            return Outcome("stopped", "disk full")
        finally:
            ctx.stats.active.pop(self.origin, None)
            try:
                with trio.CancelScope(shield=True):
                    await ctx.settle(frontier)
            finally:
                ctx.frontiers.discard(frontier)
                frontier.close()
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await self._let_go()
                await client.aclose()

    async def _crawl(self) -> Outcome:
        stats, frontier = self.ctx.stats, self.frontier
        while True:
            self._follow_config()
            c = self._config.crawl
            if self.pages >= c.max_pages:
                return Outcome("done", "max-pages")
            if self.bytes >= c.max_bytes:
                return Outcome("done", "max-bytes")
            # URLs answered by 429/503 are tried again once the queue is through.
            entry, attempts = frontier.next(), 0
            if entry is None:
                if not self.retries:
                    return Outcome("done", "")
                entry, attempts = self.retries.popleft()
            origin, path = urls.split_origin(entry.url)
            rules = self.rules.get(origin)
            if rules is None:
                rules = self.rules[origin] = await self._robots(origin) or robots.unreachable()
            if not rules.allowed(path):
                stats.robots_excluded += 1
                event(log, logging.DEBUG, "robots-excluded", site=self.origin, url=entry.url)
                self._commit(entry, attempts)
                continue
            result = await self._fetch(entry.url)
            if result.status is None or (result.status >= 500 and result.status != 503):
                self.failures += 1
                if self.failures >= c.max_failures:
                    # Leave this entry uncommitted: the next visit starts with it.
                    return Outcome("retry", f"{self.failures} failures in a row "
                                            f"({result.error or result.status})")
            else:
                self.failures = 0
            if result.status in (429, 503) and attempts < c.retries_per_url:
                self.retries.append((entry, attempts + 1))
            elif result.status is not None:
                self._route_links(entry, result)
            self._commit(entry, attempts)
            stats.active[self.origin]["queued"] = frontier.pending + len(self.retries)

    async def _rest(self) -> bool:
        """Wait out the site's rest; True (at once) if the process is draining. A reload that
        shortens the rest ends it sooner."""
        ctx = self.ctx
        while (not ctx.draining.is_set() and ctx.disk_ok.is_set()
               and trio.current_time() < self.next_at):
            wake = ctx.wake
            with trio.move_on_at(self.next_at):
                await wake.wait()
            self._follow_config()
        return ctx.draining.is_set() or not ctx.disk_ok.is_set()

    def _follow_config(self) -> None:
        """After SIGHUP: the new rests and limits apply from now on, to the rest under way too."""
        if self.ctx.config is self._config:
            return
        self._config = self.ctx.config
        self.rest.policy = rest_policy(self._config)
        self.next_at = min(self.next_at, self._rest_from + self.rest.floor())

    def _commit(self, entry: Entry, attempts: int) -> None:
        """Record progress; a retried entry is already behind the cursor."""
        if attempts == 0:
            self.frontier.commit(entry, pages=self.pages, bytes_=self.bytes)

    async def _robots(self, origin: str) -> robots.RobotsRules | None:
        """Fetch and parse ``origin``'s robots.txt (RFC 9309 §2.3); None when it is unavailable."""
        agent = self.ctx.config.crawl.agent
        url = origin + "/robots.txt"
        for _ in range(robots.MAX_ROBOTS_REDIRECTS + 1):
            result = await self._fetch(url)
            if result.status is None:
                return None
            location = result.header("location")
            if 300 <= result.status < 400 and location:
                target = urls.normalize(location, url)
                if target is None:
                    break
                url = target
                continue
            body = decode_body(result.body, result.header("content-encoding"),
                               robots.MAX_ROBOTS_BYTES)
            rules = robots.rules_for_status(result.status, body, agent)
            if result.status >= 500 or result.status == 429:
                event(log, logging.WARNING, "robots-unavailable", site=origin,
                      status=result.status)
                return None
            self.rules[origin] = rules
            if origin == self.origin and rules.crawl_delay:
                # The rest after robots.txt itself must already honour its Crawl-delay.
                self.rest.crawl_delay = rules.crawl_delay
                delay = min(rules.crawl_delay, self.ctx.config.crawl.max_rest)
                self.next_at = max(self.next_at, trio.current_time() + delay)
            return rules
        # RFC 9309 §2.3.1.2: past five redirects the file may be taken as unavailable (allow all).
        self.rules[origin] = robots.RobotsRules.allow_all()
        return self.rules[origin]

    async def _hold(self, ip: str) -> None:
        """Hold a connection slot of ``ip`` (see archiver.addresses) before fetching from it."""
        if self.held != ip:
            await self._let_go()
            await self.ctx.slots.acquire(ip)
            self.held = ip

    async def _let_go(self) -> None:
        if self.held is not None:
            await self.client.aclose()
            self.ctx.slots.release(self.held)
            self.held = None

    async def _address(self, host: str) -> str | None:
        if host not in self.addresses:
            resolution = await self.ctx.resolver.resolve(host)
            if not resolution.addresses:
                return None
            self.addresses[host] = resolution.addresses[0]
        return self.addresses[host]

    async def _fetch(self, url: str) -> FetchResult:
        """Rest, fetch ``url``, write the exchange to the WARC bundle, set the next rest."""
        ctx, stats = self.ctx, self.ctx.stats
        if ctx.bundle.error is not None:  # the WARC could not be written: stop fetching
            ctx.disk_trouble(ctx.bundle.error, "warc")
        if not ctx.disk_ok.is_set() or await self._rest():
            raise _Draining
        stats.active[self.origin]["url"] = url
        host = urls.origin_parts(urls.origin(url))[1]
        ip = await self._address(host)
        if ip is None:
            result = FetchResult(url=url, ip="", started=time.time(), request=b"",
                                 error="dns: no address")
        else:
            await self._hold(ip)
            result = await self.client.fetch(url, ip)
            if ctx.slots.contended(ip):  # another site waits for this address: hand it over
                await self._let_go()
        now = self._rest_from = trio.current_time()
        retry_after = parse_retry_after(result.header("retry-after"), result.started
                                        + result.elapsed)
        self.next_at = now + self.rest.after(result.status, result.elapsed, retry_after)
        if result.status is None:
            kind = (result.error or "error").split(":", 1)[0]
            stats.errors[kind] += 1
            event(log, logging.INFO, "fetch-failed", site=self.origin, url=url, error=result.error)
            return result
        date = datetime.fromtimestamp(result.started, UTC)
        original = self._same_payload(url, result)
        if original is None:
            rectype = "response"
            written = ctx.bundle.write_exchange(
                url=url, ip=result.ip, date=date, request=result.request,
                response_head=result.head, response_body=result.body, truncated=result.truncated)
        else:
            rectype = "revisit"
            stats.revisits += 1
            written = ctx.bundle.write_revisit(
                url=url, ip=result.ip, date=date, request=result.request,
                response_head=result.head, payload_digest=original.digest,
                refers_to_url=original.url, refers_to_date=to_datetime(original.timestamp))
        try:
            ctx.captures.append(capture_fields(
                url=url, date=date, status=result.status,
                content_type=result.header("content-type"), location=result.header("location"),
                digest=written.payload_digest, filename=written.response.filename,
                offset=written.response.offset, length=written.response.length, rectype=rectype))
        except ValueError as e:  # the record is written; `catalog verify` will list it
            stats.errors["catalog"] += 1
            event(log, logging.WARNING, "catalog-entry-failed", site=self.origin, url=url,
                  error=str(e))
        size = len(result.head) + len(result.body)
        stats.pages += 1
        stats.bytes += size
        self.pages += 1
        self.bytes += size
        if result.truncated:
            stats.errors[f"truncated-{result.truncated}"] += 1
        if result.status >= 400:
            stats.errors[f"http-{result.status // 100}xx"] += 1
        event(log, logging.DEBUG, "fetched", site=self.origin, url=url, status=result.status,
              bytes=size, ms=round(result.elapsed * 1000))
        return result

    def _same_payload(self, url: str, result: FetchResult) -> Capture | None:
        """On a recrawl, the earlier response whose payload this one repeats, if the last capture
        of ``url`` had the same payload digest (Heritrix's and wget's deduplication by digest)."""
        if not self.recrawl or not result.body or result.truncated:
            return None
        try:
            earlier = self.ctx.lookup.captures(url)
        except (CatalogError, ValueError, sqlite3.Error):
            return None
        if not earlier or earlier[-1].digest != payload_digest(result.body):
            return None
        digest = earlier[-1].digest
        return next((c for c in reversed(earlier)
                     if c.rectype == "response" and c.digest == digest), None)

    def _route_links(self, entry: Entry, result: FetchResult) -> None:
        headers = {name: value for name in ("content-type", "content-encoding", "location")
                   if (value := result.header(name)) is not None}
        found = pagelinks.links_in_response(entry.url, result.status or 0, headers, result.body,
                                            max_decoded_size=self.ctx.config.crawl.max_decoded_size)
        depth = entry.depth if found.redirect else entry.depth + 1
        for ref in found.refs:
            self._route(urls.normalize(ref, found.base), depth, redirect=found.redirect)

    def _route(self, url: str | None, depth: int, *, redirect: bool = False) -> None:
        """Queue a same-site link (after the guards) or spool an external one."""
        if url is None:
            return
        c, stats = self.ctx.config.crawl, self.ctx.stats
        if len(url) > c.max_url_length:
            stats.skipped["url-too-long"] += 1
            return
        origin = urls.origin(url)
        if origin not in self.local:
            if redirect and urls.origin_parts(origin)[1] == self.host:
                self.local.add(origin)  # an alias origin: its robots.txt is fetched on first use
            else:
                if self.external.add(url):
                    stats.links_external += 1
                    self.ctx.spool.add(url, self.origin, time.time())
                return
        if depth > c.max_depth:
            stats.skipped["max-depth"] += 1
        elif looks_like_trap(url, c.max_repeated_segments):
            stats.skipped["trap"] += 1
        elif self.frontier.add(url, depth):
            stats.links_local += 1
