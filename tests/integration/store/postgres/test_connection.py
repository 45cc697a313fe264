"""The PostgreSQL stores' one reconnecting connection (archiver.store.postgres.connection) against a real
server that restarts, stops and comes back, and against a proxy that loses the answer to a
statement that committed: a waiting store waits and goes on, one that does not wait says when to
ask again, and a write whose answer was lost is settled by reading what it did, never made twice.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg
import pytest

from archiver import config
from archiver.queues.leases import Leases
from archiver.queues.postgres.crawlqueue import PgCrawlQueues
from archiver.queues.postgres.linksstate import PgLinksState
from archiver.queues.postgres.sitequeue import PgSiteQueue
from archiver.store.models import Capture
from archiver.store.postgres.catalog import PgCatalog
from archiver.store.postgres.connection import StoreAway, StoreWatch
from archiver.store.postgres.crawlers import BundleLedger
from archiver.store.postgres.schema import StoreError
from archiver.store.s3.objectstore import S3Store
from archiver.stores import Stores, open_stores
from tests.support.cluster import wait_for
from tests.support.linkbatch import site_changes
from tests.support.pgproxy import PgProxy
from tests.support.postgres import store_database
from tools.pgserver import switch_over


class Events:
    """What a watch reports, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def __call__(self, level: int, name: str, fields: dict) -> None:
        self.seen.append((name, fields))

    def names(self) -> list[str]:
        return [name for name, _ in self.seen]


def capture(url: str, offset: int, filename: str = "A-20260101000000-0-1.warc.gz") -> Capture:
    return Capture("com,example)/" + url.rsplit("/", 1)[1], "20260101000000", url, 200, "text/html",
                   "sha1:" + "A" * 32, "-", filename, offset, 100)


@pytest.fixture
def proxied(postgres_server, pg_store_url):
    """A proxy in front of the session's server, and the store database's URL through it."""
    proxy = PgProxy(postgres_server.port)
    try:
        yield proxy, proxy.url(pg_store_url.rsplit("/", 1)[1], postgres_server.user)
    finally:
        proxy.close()


def test_a_waiting_store_waits_out_a_restart_and_an_outage_and_reports_each_once(own_postgres):
    url = store_database(own_postgres)
    events = Events()
    watch = StoreWatch(wait=True, retry_max=0.5, report=events)
    catalog = PgCatalog(url, 4, watch=watch)
    try:
        assert catalog.count() == 0
        own_postgres.restart()  # -m immediate: every backend killed, crash recovery
        assert catalog.add([capture("http://example.com/a", 0)]) == 1
        assert catalog.count() == 1
        assert events.names() == ["store-unavailable", "store-recovered"]
        assert "terminat" in events.seen[0][1]["cause"] or "closed" in events.seen[0][1]["cause"]

        # (Fast: an immediate stop would lose the add above, committed without waiting for
        # its WAL: in a crawl, the bundle's durable commit that follows it takes it along.)
        own_postgres.stop("fast")
        added: list[int] = []
        adding = threading.Thread(target=lambda: added.append(catalog.add(
            [capture("http://example.com/b", 100)])))
        adding.start()
        adding.join(2.0)
        assert adding.is_alive(), "the add did not wait for the store"
        own_postgres.start()
        adding.join(30)
        assert added == [1] and catalog.count() == 2
        assert events.names() == ["store-unavailable", "store-recovered"] * 2
        assert events.seen[-1][1]["after"] >= 2.0
    finally:
        catalog.close()


def test_a_waiting_store_opened_while_the_server_is_down_waits_for_it(own_postgres, tmp_path, caplog):
    """A crawler started (a new machine, a restart) while the database restarts or fails over
    waits for it, the schema checked once it answers; a store that does not wait refuses."""
    url = store_database(own_postgres)
    path = tmp_path / "archiver.toml"
    path.write_text(f'[archive]\nroot = "{tmp_path / "archive"}"\n[store]\nurl = "{url}"\n'
                    f'[warc]\nstore = "{tmp_path / "warcs"}"\n')
    cfg = config.load(path)
    own_postgres.stop("fast")
    with pytest.raises(StoreError, match="cannot connect"):
        open_stores(cfg)
    opened: list[Stores] = []
    opening = threading.Thread(target=lambda: opened.append(open_stores(cfg, wait=True)))
    with caplog.at_level(logging.WARNING, logger="archiver.store.postgres.connection"):
        opening.start()
        wait_for(lambda: "store-unavailable" in caplog.text, "the open to find the store away")
        assert opening.is_alive(), "the open did not wait for the store"
        own_postgres.start()
        opening.join(30)
    assert "store-recovered" in caplog.text
    assert len(opened) == 1 and opened[0].cluster is not None
    queue = opened[0].site_queue(0)
    try:
        assert sum(queue.counts().values()) == 0
    finally:
        queue.close()


def test_connections_that_find_an_outage_over_do_not_report_it_again(own_postgres):
    url = store_database(own_postgres)
    events = Events()
    watch = StoreWatch(wait=True, retry_max=0.5, report=events)
    first, second = PgCatalog(url, 4, watch=watch), PgCatalog(url, 4, watch=watch)
    try:
        own_postgres.restart()
        assert first.count() == second.count() == 0  # the second finds its connection lost too
        assert events.names() == ["store-unavailable", "store-recovered"]
        own_postgres.restart()  # a new outage, found by the second first
        assert second.count() == first.count() == 0
        assert events.names() == ["store-unavailable", "store-recovered"] * 2
    finally:
        first.close()
        second.close()


def test_a_store_that_does_not_wait_says_when_to_ask_again_and_comes_back(own_postgres):
    url = store_database(own_postgres)
    catalog = PgCatalog(url, 4, readonly=True, watch=StoreWatch(retry_max=0.5))
    try:
        assert catalog.count() == 0
        own_postgres.stop("immediate")
        with pytest.raises(StoreAway) as away:
            catalog.count()
        assert away.value.retry_after >= 1
        with pytest.raises(StoreAway):  # within the back-off: refused without trying
            catalog.captures("http://example.com/a")
        own_postgres.start()
        deadline = time.monotonic() + 10
        while True:  # the next attempt comes once its pause (at most retry_max) has passed
            try:
                assert catalog.count() == 0
                break
            except StoreAway:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        catalog.close()


def test_a_waiting_store_stops_waiting_when_its_process_gives_up(own_postgres):
    url = store_database(own_postgres)
    watch = StoreWatch(wait=True, retry_max=0.2)
    catalog = PgCatalog(url, 4, watch=watch)
    try:
        own_postgres.stop("immediate")
        failed: list[BaseException] = []

        def count() -> None:
            try:
                catalog.count()
            except StoreAway as e:
                failed.append(e)

        counting = threading.Thread(target=count)
        counting.start()
        counting.join(1.0)
        assert counting.is_alive()
        watch.give_up()
        counting.join(10)
        assert not counting.is_alive() and "stops waiting" in str(failed[0])
    finally:
        catalog.close()
        own_postgres.start()


def test_a_claim_whose_answer_was_lost_is_found_not_made_again(proxied, pg_store_url):
    proxy, url = proxied
    seed = PgSiteQueue(pg_store_url)
    for origin in ("http://a.test", "http://b.test"):
        seed.add(origin)
    leases = Leases(60.0)
    queue = PgSiteQueue(url, process=3, leases=leases)
    try:
        proxy.lose_answer_to(b"UPDATE sites SET state = 'active'")
        first = queue.claim(include_deferred=False)
        assert proxy.cut.is_set()
        assert first == "http://a.test"
        assert leases.held() == {"http://a.test": 1}
        # One site active, ours, with the epoch we hold: the lost claim was not made twice.
        assert seed.counts()["active"] == 1
        assert queue.claim(include_deferred=False) == "http://b.test"
    finally:
        queue.close()
        seed.close()


def test_a_finish_whose_answer_was_lost_is_found_done(proxied, pg_store_url):
    proxy, url = proxied
    seed = PgSiteQueue(pg_store_url)
    seed.add("http://a.test")
    queue = PgSiteQueue(url, process=1, leases=Leases(60.0))
    try:
        assert queue.claim(include_deferred=False) == "http://a.test"
        proxy.lose_answer_to(b"UPDATE sites SET state = $1")
        lost = queue.leases.lost
        state = queue.retry("http://a.test", delay=60, max_attempts=3, defer_delay=600, note="x")
        assert proxy.cut.is_set()
        assert state == "retry" and not lost
        assert seed.site("http://a.test").attempts == 1  # counted once
    finally:
        queue.close()
        seed.close()


def test_crawl_queue_entries_whose_commit_answer_was_lost_are_written_once(proxied, pg_store_url):
    proxy, url = proxied
    leases = Leases(60.0)
    sites = PgSiteQueue(pg_store_url, process=1, leases=leases)
    sites.add("http://a.test")
    assert sites.claim(include_deferred=False) == "http://a.test"
    queues = PgCrawlQueues(url, leases, bloom_bits=1024, max_fp=0.01)
    try:
        crawl_queue = queues.open("http://a.test")
        for n in range(3):
            crawl_queue.add(f"http://a.test/{n}", 1)
        entry = crawl_queue.next()
        crawl_queue.commit(entry, pages=1, bytes_=10)
        crawl_queue.save(crawl_queue.mark())
        proxy.lose_answer_to(b"COMMIT")
        crawl_queue.sync()
        assert proxy.cut.is_set() and not crawl_queue.fenced
        crawl_queue.add("http://a.test/3", 1)
        crawl_queue.close()
        with psycopg.connect(pg_store_url) as conn:
            entries = conn.execute("SELECT seq, url FROM crawl_entries ORDER BY seq").fetchall()
            cursor = conn.execute("SELECT cursor, pages FROM crawl_cursors").fetchone()
        assert entries == [(n + 1, f"http://a.test/{n}") for n in range(4)]
        assert cursor == (1, 1)
    finally:
        queues.close()
        sites.close()


def test_pending_entries_whose_commit_answer_was_lost_are_recorded_once(proxied, pg_store_url):
    proxy, url = proxied
    ledger = BundleLedger(url, process=0, epoch=1, ttl=60)
    try:
        first = [capture(f"http://example.com/{n}", n * 100) for n in range(3)]
        ledger.record(first)
        proxy.lose_answer_to(b"COMMIT")
        second = [capture(f"http://example.com/{n}", n * 100) for n in range(3, 6)]
        ledger.record(second)
        assert proxy.cut.is_set()
        with psycopg.connect(pg_store_url) as conn:
            offsets = [row[0] for row in conn.execute(
                "SELECT (capture->>'offset')::bigint FROM pending_captures ORDER BY 1")]
        assert offsets == [n * 100 for n in range(6)]
        catalog = PgCatalog(pg_store_url, 4)
        try:
            assert ledger.shipped(first[0].filename, catalog, list) == 6
            assert catalog.count() == 6
        finally:
            catalog.close()
    finally:
        ledger.close()


def test_a_links_commit_whose_answer_was_lost_is_found_committed(proxied, pg_store_url, s3_bucket):
    proxy, url = proxied
    objects = S3Store(s3_bucket.client, s3_bucket.name, "archive")
    state = PgLinksState(url, objects)
    try:
        proxy.lose_answer_to(b"COMMIT")
        state.commit(1, [("0-20261122000000-00001.tsv", 3, 2, 0)],
                     site_changes({"http://a.test": 1}, {"http://a.test"}), 0.0, [1])
        assert proxy.cut.is_set()
        assert state.generation == 1
        assert state.files_done() == {"0-20261122000000-00001.tsv"}
        state.commit(2, [("0-20261122000000-00002.tsv", 1, 1, 0)],
                     site_changes({"http://a.test": 1}), 0.0, [2])  # the lock is ours again
        assert state.generation == 2
        assert [s.inlinks for s in state.dirty_sites()] == [2]
    finally:
        state.close()


def test_a_waiting_store_follows_failovers_back_and_forth_behind_a_multi_host_url(replicated_postgres):
    primary, standby, url = replicated_postgres
    events = Events()
    catalog = PgCatalog(url, 4, watch=StoreWatch(wait=True, retry_max=0.5, report=events))
    try:
        catalog.add([capture("http://example.com/0", 0)])
        for n in (1, 2):  # over to the standby, then back to the first primary
            primary, standby = switch_over(primary, standby)
            catalog.add([capture(f"http://example.com/{n}", n * 100)])
        assert catalog.count() == 3
        assert events.names() == ["store-unavailable", "store-recovered"] * 2
    finally:
        catalog.close()
    with psycopg.connect(primary.url("archive")) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
    with psycopg.connect(standby.url("archive")) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
