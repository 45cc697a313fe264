"""A ``scope`` decision in PostgreSQL's crawl_decisions (no constraint on kinds there): written
with the group commit, read back for ``archiver why`` as the embedded log reads it."""

from __future__ import annotations

from archiver.queues.leases import Leases
from archiver.queues.postgres.crawlqueue import PgCrawlQueues
from archiver.queues.postgres.sitequeue import PgSiteQueue
from archiver.store.durable import SyncJob

SITE = "http://a.test"


def test_a_scope_decision_is_kept_in_postgresql(pg_store_url):
    leases = Leases(300.0)
    sites = PgSiteQueue(pg_store_url, process=0, leases=leases)
    queues = PgCrawlQueues(pg_store_url, leases, bloom_bits=1 << 12, max_fp=0.01, max_decisions=10)
    try:
        sites.add(SITE)
        assert sites.claim(include_deferred=False) == SITE
        queue = queues.open(SITE)
        queue.add(SITE + "/", 0)
        detail = f"rule re:.*/cal/.*, linked from {SITE}/"
        queue.decide(SITE + "/cal/1", "scope", detail)
        job = SyncJob()
        queue.add_to(job)
        job.run()
        queue.close()
        assert [(d.kind, d.detail) for d in queues.decisions(SITE, SITE + "/cal/1")] == [
            ("scope", detail)]
    finally:
        queues.close()
        sites.close()
