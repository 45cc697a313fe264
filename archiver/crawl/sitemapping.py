"""Reading a site's sitemaps during its visit (the trio shell of archiver.web.sitemaps).

Once its robots.txt is read, a visit (with ``crawl.sitemaps`` on) fetches the sitemaps the file
names and ``/sitemap.xml``, and the sitemaps a sitemap index lists (one level): each is a fetch of
the visit, resting as any other, obeying robots.txt and archived; sitemaps on another site are
not fetched (that site's visit reads its own). Their URLs are routed as a page's links are
(scope, the site's Bloom bitmap, ``archiver why``: "linked from" the sitemap).

On a revisit, a listed URL whose ``lastmod`` is newer than its last capture is due first: the
visit fetches it before walking its crawl queue (at most ``MAX_DUE`` such checks a visit, each a
catalog lookup).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from archiver.logs import event
from archiver.queues.models import Entry
from archiver.web import urls
from archiver.web.http import decode_body
from archiver.web.sitemaps import MAX_BYTES, SitemapWalk
from archiver.web.timestamps import to_datetime

if TYPE_CHECKING:
    from archiver.crawl.visit import SiteVisit

log = logging.getLogger("archiver.crawl.sitemapping")
MAX_DUE = 1000  # lastmod checks against the catalog in one visit


async def read_sitemaps(visit: SiteVisit) -> None:
    """Fetch the visit's sitemaps and route the URLs they list."""
    rules = visit.rules.get(visit.origin)
    walk = SitemapWalk(visit.origin, rules.sitemaps if rules is not None else [])
    checks = 0
    while (url := walk.next_url()) is not None:
        origin, path = urls.split_origin(url)
        if origin != visit.origin or (rules is not None and not rules.allowed(path)):
            continue  # another site's (its own visit reads it), or robots.txt says no
        earlier = await visit.ctx.dedupe.earlier(url) if visit.recrawl else []
        answer = await visit.fetch(url, earlier, conditional=False)  # read whole: not asked
        if answer.status != 200 or visit.gatekept is not None:
            continue
        body = decode_body(answer.body, answer.header("content-encoding"), MAX_BYTES)
        sitemap = await visit.ctx.bodies.run(walk.read, url, body)
        if sitemap.error or sitemap.truncated:
            event(log, logging.INFO, "sitemap-cut-short", site=visit.origin, url=url,
                  error=sitemap.error, truncated=sitemap.truncated)
        if not sitemap.pages:
            continue
        await visit.router.route_urls(Entry(url, 0, -1), [e.url for e in sitemap.pages], {})
        if not visit.recrawl:
            continue
        for entry in sitemap.pages:
            if entry.lastmod is None or checks >= MAX_DUE or urls.origin(entry.url) != \
                    visit.origin:
                continue
            checks += 1
            earlier = await visit.ctx.dedupe.earlier(entry.url)
            if earlier and to_datetime(earlier[-1].timestamp).timestamp() < entry.lastmod:
                visit.due_first.append(entry.url)
