"""scope.max_hops in a real crawl of the demo web, fed round after round by the links batch, and
hop counts and priorities carried by the batch into the PostgreSQL site queue."""

from __future__ import annotations

from collections import deque

import psycopg
import trio

from archiver import config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.models import LinkedSite
from archiver.web import urls
from demoweb import WebSpec, start_demo
from tests.support.crawls import write_config
from tests.support.linkbatch import LINKS, batch_once, shared_links_config, ship_spool

STAMP = "20261122000000"


def hops_from(seeds: list[str], links: set[tuple[str, str]]) -> dict[str, int]:
    """Each site's fewest site-to-site links from a seed site (breadth-first over the web's
    cross-site links)."""
    targets: dict[str, set[str]] = {}
    for source, url in links:
        targets.setdefault(source, set()).add(urls.origin(url))
    hops = dict.fromkeys(seeds, 0)
    queue = deque(seeds)
    while queue:
        site = queue.popleft()
        for target in targets.get(site, set()) - hops.keys():
            hops[target] = hops[site] + 1
            queue.append(target)
    return hops


async def test_a_crawl_with_max_hops_1_never_requests_a_site_2_hops_away(tmp_path):
    async with trio.open_nursery() as nursery:
        web, server = await start_demo(nursery, WebSpec(sites=6, pages_per_site=6, port=0,
                                                        trap=False))
        path = write_config(tmp_path, web)
        path.write_text(path.read_text() + LINKS.format(checkpoint=100_000)
                        + "[scope]\nmax_hops = 1\n")
        cfg = config.load(path)
        seed = urls.origin(web.seeds()[0])
        enqueue_seeds(cfg, 0, web.seeds())
        skipped = 0
        for _ in range(6):                                 # crawl, batch, crawl...: until still
            crawler = Crawler(cfg, until_idle=True)
            await crawler.run()
            skipped += crawler.stats.skipped["scope"]
            totals = await trio.to_thread.run_sync(batch_once, cfg)
            if totals.new_urls == 0 and totals.new_sites == 0:
                break
        else:
            raise AssertionError("the crawl did not settle in 6 rounds")
        nursery.cancel_scope.cancel()
    hops = hops_from([seed], web.external_links())
    near = {site for site, n in hops.items() if n <= 1}
    far = {site for site, n in hops.items() if n >= 2}
    assert len(near) >= 2 and far                          # the web reaches past one hop
    requested = {urls.origin(f"http://{r.host}:{web.spec.port}{r.target}") for r in server.log}
    assert requested == near                               # every near site, none farther
    assert all(any(r.target == "/" and urls.origin(f"http://{r.host}:{web.spec.port}/") == site
                   for r in server.log) for site in near if not site.startswith("http://robots500."))
    assert skipped > 0                                     # the links out of the 1-hop sites
    with SiteQueue(queue_path(cfg.root, 0), recover=False) as queue:
        assert {row.origin: row.hops for row in queue.rows()} == {site: hops[site] for site in near}


def test_hop_counts_and_priorities_survive_the_batch_into_the_postgresql_site_queue(
        tmp_path, pg_store_url, s3_bucket):
    cfg = shared_links_config(tmp_path / "m1", store_url=pg_store_url, bucket=s3_bucket)
    ship_spool(cfg, "0-20261122000000-00001.tsv", [
        f"http://a.test/1\thttp://seed.test\t{STAMP}\t0\t0.5",
        f"http://b.test/\thttp://far.test\t{STAMP}\t3\t1.0",
        f"http://b.test/x\thttp://mid.test\t{STAMP}\t2\t-2.0",
        f"http://c.test/\thttp://old.test\t{STAMP}",               # from before hops: 0 hops
    ])
    batch_once(cfg)

    def marks() -> dict[str, tuple[int, float]]:
        with psycopg.connect(pg_store_url) as db:
            return {o: (h, p) for o, h, p in db.execute("SELECT origin, hops, priority FROM sites")}

    assert marks() == {"http://a.test": (1, 0.5), "http://b.test": (3, 1.0), "http://c.test": (1, 0.0)}
    # Later: b from a nearer site (a known URL: nothing new to crawl, yet the site is pushed
    # again), a with a higher priority, c from a farther site (no change).
    ship_spool(cfg, "0-20261122000100-00002.tsv", [
        f"http://b.test/\thttp://a.test\t{STAMP}\t1\t0.0",
        f"http://a.test/1\thttp://seed.test\t{STAMP}\t0\t4.0",
        f"http://c.test/\thttp://far.test\t{STAMP}\t5\t0.0",
    ])
    totals = batch_once(cfg)
    assert totals.new_urls == 0
    assert marks() == {"http://a.test": (1, 4.0), "http://b.test": (2, 1.0), "http://c.test": (1, 0.0)}
    with psycopg.connect(pg_store_url) as db:
        assert db.execute("SELECT count(*) FROM links_sites WHERE dirty > 0").fetchone() == (0,)
        assert dict(db.execute("SELECT origin, hops FROM links_sites")) == {
            "http://a.test": 1, "http://b.test": 2, "http://c.test": 1}


async def test_a_site_queued_farther_than_a_lowered_max_hops_is_never_requested(tmp_path):
    async with trio.open_nursery() as nursery:
        web, server = await start_demo(nursery, WebSpec(sites=3, pages_per_site=3, port=0,
                                                        trap=False))
        near, far = (web.origin(host) for host in web.normal_hosts[:2])
        path = write_config(tmp_path, web)
        path.write_text(path.read_text() + "[scope]\nmax_hops = 0\n")
        cfg = config.load(path)
        enqueue_seeds(cfg, 0, [near + "/"])
        with SiteQueue(queue_path(cfg.root, 0)) as queue:     # found at 1 hop before the limit
            queue.merge_links([LinkedSite(far, 1, True, 1, 5.0)])
        crawler = Crawler(cfg, until_idle=True)
        await crawler.run()
        nursery.cancel_scope.cancel()
    requested = {urls.origin(f"http://{r.host}:{web.spec.port}/") for r in server.log}
    assert requested == {near}
    with SiteQueue(queue_path(cfg.root, 0), recover=False) as queue:
        row = queue.site(far)
        assert row is not None and row.state in ("done", "revisit") and "scope.max_hops" in row.note
