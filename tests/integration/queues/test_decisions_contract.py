"""The decision log and queue positions behind ``archiver why``, run against both crawl-queue
backends (folders with ``decisions`` files, PostgreSQL's crawl_decisions): decisions written with
the group commit, read back by URL, bounded per site; a URL's place in its site's queue."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from archiver.queues.embedded.crawlqueue import EmbeddedCrawlQueues
from archiver.queues.interfaces import CrawlQueues, CrawlQueueStore
from archiver.queues.leases import Leases
from archiver.queues.models import QueuePosition
from archiver.queues.postgres.crawlqueue import PgCrawlQueues
from archiver.queues.postgres.sitequeue import PgSiteQueue
from archiver.store.durable import SyncJob

SITE = "http://a.test"
LIMIT = 6


@pytest.fixture(params=["embedded", "postgresql"])
def queues(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[
        tuple[CrawlQueues, Callable[[], CrawlQueueStore]]]:
    """The crawl queues of one store, and how to open SITE's queue as its visit would."""
    if request.param == "embedded":
        embedded = EmbeddedCrawlQueues(tmp_path, bloom_bits=1 << 12, max_fp=0.01,
                                       max_decisions=LIMIT)
        yield embedded, lambda: embedded.open(SITE)
        embedded.close()
        return
    url = request.getfixturevalue("pg_store_url")
    leases = Leases(300.0)
    sites = PgSiteQueue(url, process=0, leases=leases)
    shared = PgCrawlQueues(url, leases, bloom_bits=1 << 12, max_fp=0.01, max_decisions=LIMIT)
    sites.add(SITE)

    def open_() -> CrawlQueueStore:
        sites.release(SITE)
        assert sites.claim(include_deferred=False) == SITE
        return shared.open(SITE)

    sites.claim(include_deferred=False)
    yield shared, open_
    shared.close()
    sites.close()


def commit(queue: CrawlQueueStore) -> None:
    """What the crawler's group commit does: the job's writes in its worker thread."""
    job = SyncJob()
    queue.add_to(job)
    job.run()


def test_decisions_are_written_with_the_group_commit_and_read_by_url(queues):
    store, open_ = queues
    queue = open_()
    queue.add(SITE + "/", 0)
    queue.decide(SITE + "/private/a", "robots")
    queue.decide(SITE + "/deep", "max-depth", SITE + "/")
    queue.decide(SITE + "/deep", "max-depth", SITE + "/other")  # once per visit
    commit(queue)
    assert [(d.kind, d.detail) for d in store.decisions(SITE, SITE + "/deep")] == [
        ("max-depth", SITE + "/")]
    assert [d.kind for d in store.decisions(SITE, SITE + "/private/a")] == ["robots"]
    assert store.decisions(SITE, SITE + "/never") == []
    assert store.decisions("http://b.test", SITE + "/deep") == []
    queue.close()


def test_a_site_keeps_between_half_and_all_of_its_newest_decisions(queues):
    store, open_ = queues
    for visit in range(3):
        queue = open_()
        for n in range(5):
            queue.decide(f"{SITE}/{visit}/{n}", "fetch-error", "reset")
            commit(queue)
        queue.close()
    kept = [f"{SITE}/{visit}/{n}" for visit in range(3) for n in range(5)
            if store.decisions(SITE, f"{SITE}/{visit}/{n}")]
    assert LIMIT // 2 <= len(kept) <= LIMIT
    assert kept == [f"{SITE}/{visit}/{n}" for visit in range(3) for n in range(5)][-len(kept):]


def test_a_urls_position_is_read_from_the_saved_cursor(queues):
    store, open_ = queues
    queue = open_()
    for path in ("/", "/a", "/b", "/c"):
        queue.add(SITE + path, 1)
    first = queue.next()
    assert first is not None
    queue.commit(first, pages=1, bytes_=10)
    queue.save(queue.mark())
    commit(queue)
    assert store.position(SITE, SITE + "/") == QueuePosition(1, True, 0, 3)
    assert store.position(SITE, SITE + "/c") == QueuePosition(1, False, 2, 3)
    assert store.position(SITE, SITE + "/z") is None
    assert store.position("http://b.test", SITE + "/") is None
    queue.close()
