"""Where each link of an archived response goes: same-site links into the site's crawl queue
(through its Bloom bitmap), links to other sites to the spool for the links batch, the rest
skipped and counted, with the reason kept in the crawl queue's decision log (``archiver why``).

Where a link goes is decided by the visit's sans-I/O policy (archiver.crawl.policy.VisitPolicy)
and the plugins' ``should_visit`` and ``site_priority``; this module performs it. A large body's
links are found in a worker thread, and routed ``ROUTE_SLICE`` at a time (archiver.crawl.bodies).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

import trio

from archiver.crawl import bodies
from archiver.crawl.context import CrawlContext
from archiver.crawl.http import FetchResult
from archiver.crawl.pluginhost import SitePlugins
from archiver.crawl.policy import VisitPolicy, url_shape
from archiver.plugins import LinkContext, VisitContext
from archiver.queues.interfaces import CrawlQueueStore
from archiver.queues.models import Entry
from archiver.web import pagelinks, urls


class LinkRouter:
    """Routes the links of one site's responses."""

    def __init__(self, origin: str, ctx: CrawlContext, policy: VisitPolicy,
                 crawl_queue: CrawlQueueStore, plugins: SitePlugins) -> None:
        self.origin = origin
        self.ctx = ctx
        self.policy = policy
        self.crawl_queue = crawl_queue
        self.plugins = plugins

    async def route(self, entry: Entry, result: FetchResult, labels: Mapping[str, str]) -> None:
        """Route the links of ``result``, the answer to ``entry`` (``labels``: its capture's, for
        the plugins' site_priority)."""
        headers = {name: value for name in ("content-type", "content-encoding", "location")
                   if (value := result.header(name)) is not None}
        status = result.status or 0
        small = pagelinks.links_if_small(entry.url, status, headers, result.body, bound=bodies.LARGE)
        if small is None:
            found, targets = await self.ctx.bodies.run(
                _links_and_targets, entry.url, status, headers, result.body,
                self.ctx.config.crawl.max_decoded_size)
        else:
            found, targets = small, [urls.normalize(ref, small.base) for ref in small.refs]
        if not found.read:
            return
        await self._route(entry, zip(found.refs, targets, strict=True), found.base, labels,
                          redirect=found.redirect)

    async def route_urls(self, entry: Entry, found: Iterable[str], labels: Mapping[str, str]
                         ) -> None:
        """Route the URLs a render of ``entry``'s page found (its rendered links, the routes it
        visited, the URLs it requested: archiver.crawl.rendering), as its HTML links are."""
        unique = dict.fromkeys(found)
        await self._route(entry, ((url, urls.normalize(url)) for url in unique), entry.url, labels,
                          redirect=False)

    async def _route(self, entry: Entry, links: Iterable[tuple[str, str | None]], base: str,
                     labels: Mapping[str, str], *, redirect: bool) -> None:
        """Route each (reference, its normalised URL or None) found in ``entry``'s answer."""
        ctx, stats, policy = self.ctx, self.ctx.stats, self.policy
        depth = entry.depth if redirect else entry.depth + 1
        shape = url_shape(entry.url)
        new_local = []
        for number, (ref, url) in enumerate(links):
            if number and not number % bodies.ROUTE_SLICE:
                # Routing always finishes (its links are in the queue before the URL is done).
                await trio.lowlevel.cancel_shielded_checkpoint()
            if url is None:  # mailto:, javascript:, a bad host or port...: counted, not followed
                stats.skipped["url-" + urls.rejection(ref, base)] += 1
                continue
            where = policy.route(url, depth, source_shape=shape, redirect=redirect)
            if where in (None, "external") and (plugin := self._refusal(
                    url, entry.url, depth, external=where == "external")) is not None:
                if where is None and not self.crawl_queue.known(url):
                    self.crawl_queue.decide(url, "plugin", f"{plugin}, linked from {entry.url}")
                continue
            if where is None:
                if self.crawl_queue.add(url, depth):
                    stats.links_local += 1
                    new_local.append(url)
            elif where == "external":
                stats.links_external += 1
                priority = self.plugins.priority(urls.origin(url), LinkContext(
                    entry.url, labels, url)) if self.plugins.wants("site_priority") else 0.0
                ctx.spool.add(url, self.origin, time.time(), hops=policy.hops, priority=priority)
            elif where != "seen":
                self._skipped(url, where, entry.url)
        policy.page_read(shape, new_local)

    def _refusal(self, url: str, source: str, depth: int, *, external: bool) -> str | None:
        """The plugin whose should_visit refuses the link (counted), if one does."""
        if not self.plugins.wants("should_visit"):
            return None
        plugin = self.plugins.refusal(url, VisitContext(self.origin, source, depth, external))
        if plugin is not None:
            self.ctx.stats.skipped["plugin"] += 1
        return plugin

    def _skipped(self, url: str, where: str, source: str) -> None:
        """A link the policy does not follow: counted, and its reason logged in the crawl queue."""
        self.ctx.stats.skipped[where] += 1
        policy = self.policy
        if where == "scope":
            # Kept in this site's log only for its own URLs (`why` reads the log of the URL's
            # origin and of its scheme twin).
            home = urls.origin(url)
            if (home in policy.local or home == urls.scheme_twin(self.origin)) and (
                    not self.crawl_queue.known(url)):
                self.crawl_queue.decide(url, "scope", scope_detail(policy.scope_rule(url), source))
        elif not self.crawl_queue.known(url):  # queued by another link: not skipped
            self.crawl_queue.decide(url, where, source)


def _links_and_targets(url: str, status: int, headers: dict[str, str], body: bytes,
                       max_decoded_size: int) -> tuple[pagelinks.FoundLinks, list[str | None]]:
    """A response's references and each one normalised (None: not followed), for a worker thread."""
    found = pagelinks.links_in_response(url, status, headers, body,
                                        max_decoded_size=max_decoded_size)
    return found, [urls.normalize(ref, found.base) for ref in found.refs]


def scope_detail(rule: str | None, source: str | None) -> str:
    """The decision log's detail of an out-of-scope URL: the deciding rule and the linking page."""
    what = f"rule {rule}" if rule is not None else "no scope.include rule matched"
    return what + (f", linked from {source}" if source else ", queued before the rule")
