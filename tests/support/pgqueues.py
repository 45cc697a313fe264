"""A crawler process's view of the PostgreSQL queues, for tests that play several processes."""

from __future__ import annotations

from archiver.queues.leases import Leases
from archiver.queues.postgres.crawlqueue import PgCrawlQueues
from archiver.queues.postgres.sitequeue import PgSiteQueue


class PgProcess:
    """One crawler process: its site queue and crawl queues sharing its leases."""

    def __init__(self, url: str, number: int) -> None:
        leases = Leases(300.0)
        self.sites = PgSiteQueue(url, process=number, leases=leases)
        self.queues = PgCrawlQueues(url, leases, bloom_bits=1 << 12, max_fp=0.01)

    def close(self) -> None:
        self.sites.close()
        self.queues.close()
