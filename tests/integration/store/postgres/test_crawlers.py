"""Crawler registrations and unshipped bundles in PostgreSQL: the catalog names a bundle only once
it is shipped, and the bundles of a crawler that vanished are catalogued or declared lost."""

from __future__ import annotations

import psycopg
import pytest

from archiver.store.catalogkeys import surt_key
from archiver.store.models import Capture
from archiver.store.postgres.catalog import PgCatalog
from archiver.store.postgres.crawlers import BundleLedger, CrawlerBusy, CrawlerRoster, Lost

BUNDLE = "ARCHIVER-20260101000000-0-00000.warc.gz"


def cap(url: str, offset: int, filename: str = BUNDLE, at: str = "20260101000000") -> Capture:
    return Capture(urlkey=surt_key(url), timestamp=at, url=url, status=200,
                   mime="text/html", digest="sha1:" + "A" * 32, redirect=None, filename=filename,
                   offset=offset, length=100)


@pytest.fixture
def store(pg_store_url):
    opened = []

    def roster(ttl: float = 300.0) -> CrawlerRoster:
        opened.append(CrawlerRoster(pg_store_url, ttl))
        return opened[-1]

    def ledger(process: int, epoch: int, ttl: float = 300.0) -> BundleLedger:
        opened.append(BundleLedger(pg_store_url, process=process, epoch=epoch, ttl=ttl))
        return opened[-1]

    catalog = PgCatalog(pg_store_url, 1000)
    opened.append(catalog)
    yield roster, ledger, catalog
    for thing in opened:
        thing.close()


def sql(url: str, query: str, *params: object) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as db:
        cur = db.execute(query, params)
        return cur.fetchall() if cur.description else []


def test_a_process_number_runs_once_in_the_cluster(store):
    roster, _, _ = store
    first = roster()
    assert first.register(3, "host-a", 100) == 1
    with pytest.raises(CrawlerBusy, match="running on host-a"):
        roster().register(3, "host-b", 200)
    assert first.beat({"pages": 5})
    # The same process restarted on the same host (systemd) registers again, with a new epoch.
    again = roster()
    assert again.register(3, "host-a", 100) == 2
    assert not first.beat() and again.beat()


def test_the_catalog_names_a_bundle_only_once_it_is_shipped(store):
    _, ledger, catalog = store
    ours = ledger(0, 1)
    ours.record([cap("http://a.test/", 10), cap("http://a.test/b", 200)])
    assert catalog.count() == 0
    assert ours.shipped(BUNDLE, catalog, index=lambda: pytest.fail("entries were pending")) == 2
    assert sorted(c.url for c in catalog.iter_all()) == ["http://a.test/", "http://a.test/b"]
    # Shipped again (a retry after a crash between the catalog and the ledger): nothing twice.
    assert ours.shipped(BUNDLE, catalog, index=lambda: [cap("http://a.test/", 10)]) == 0
    assert catalog.count() == 2


def test_the_bundles_of_a_crawler_that_vanished_send_their_urls_back(store, pg_store_url):
    roster, ledger, catalog = store
    dead = roster(ttl=1.0)
    dead.register(0, "host-a", 1)
    ours = ledger(0, 1, ttl=1.0)
    sql(pg_store_url, "INSERT INTO sites (origin, added, state) VALUES ('http://a.test', 0, 'done')")
    sql(pg_store_url, "INSERT INTO crawl_entries VALUES ('http://a.test', 1, 0, 'http://a.test/'),"
        " ('http://a.test', 2, 3, 'http://a.test/b')")
    ours.record([cap("http://a.test/robots.txt", 5), cap("http://a.test/", 10), cap("http://a.test/b", 200)])
    survivor = ledger(1, 1, ttl=1.0)
    assert survivor.vanished() == []                                    # still beating
    sql(pg_store_url, "UPDATE crawlers SET heartbeat = now() - interval '5 seconds'")
    assert survivor.vanished() == [(BUNDLE, "crawler process 0 stopped beating 5 s ago")]
    assert survivor.lose(BUNDLE) == Lost(requeued=2, sites=1, woken=1)  # robots.txt is not queued
    assert survivor.lose(BUNDLE) is None                                # declared once
    assert sorted(sql(pg_store_url, "SELECT url, depth, refetch FROM crawl_inbox")) == [
        ("http://a.test/", 0, True), ("http://a.test/b", 3, True)]
    assert sql(pg_store_url, "SELECT state FROM sites") == [("waiting",)]
    assert catalog.count() == 0
    # The paused crawler comes back, writes more into it and ships it after all: the entries
    # pending now are only the late ones, so it is catalogued from its own records, all of them.
    assert ours.record([cap("http://a.test/late", 900)]) == [BUNDLE]
    assert sql(pg_store_url, "SELECT state FROM bundles") == [("reopened",)]
    assert [name for name, _ in survivor.vanished()] == [BUNDLE]         # still unshipped
    sql(pg_store_url, "UPDATE crawlers SET heartbeat = now()")
    records = [cap("http://a.test/", 10), cap("http://a.test/b", 200), cap("http://a.test/late", 900)]
    assert ours.shipped(BUNDLE, catalog, index=lambda: records) == 3
    assert sql(pg_store_url, "SELECT state FROM bundles") == [("shipped",)]
    assert sql(pg_store_url, "SELECT count(*) FROM pending_captures") == [(0,)]


def test_a_lost_bundles_urls_still_ahead_of_their_sites_cursor_are_not_fetched_twice(store, pg_store_url):
    """The group commit records a record's capture before the cursor passes its entry (the cursor
    is written at the next commit): a URL whose entry the cursor has not passed is fetched by the
    visit that continues the site, so it is not sent back as a refetch too."""
    roster, ledger, _ = store
    roster(ttl=1.0).register(0, "host-a", 1)
    ours = ledger(0, 1, ttl=1.0)
    sql(pg_store_url, "INSERT INTO sites (origin, added, state) VALUES ('http://a.test', 0, 'active')")
    sql(pg_store_url, "INSERT INTO crawl_entries VALUES ('http://a.test', 1, 0, 'http://a.test/'),"
        " ('http://a.test', 2, 1, 'http://a.test/b'), ('http://a.test', 3, 1, 'http://a.test/c')")
    sql(pg_store_url, "INSERT INTO crawl_cursors (origin, cursor, epoch) VALUES ('http://a.test', 1, 1)")
    ours.record([cap("http://a.test/", 10), cap("http://a.test/b", 200)])
    sql(pg_store_url, "UPDATE crawlers SET heartbeat = now() - interval '5 seconds'")
    assert ledger(1, 1, ttl=1.0).lose(BUNDLE) == Lost(requeued=1, sites=1, woken=0)
    assert sql(pg_store_url, "SELECT url FROM crawl_inbox") == [("http://a.test/",)]


def test_a_lost_bundle_wakes_its_finished_sites_and_sends_back_only_what_no_one_captured_since(
        store, pg_store_url):
    """Found lost after its sites finished (done, or waiting for a revisit), a bundle makes them
    due at once; a URL captured again since its lost capture (pending in another bundle, or in
    the catalog), or already sent back, is not fetched a third time."""
    roster, ledger, catalog = store
    roster(ttl=1.0).register(0, "host-a", 1)
    ours = ledger(0, 1, ttl=1.0)
    sql(pg_store_url, "INSERT INTO sites (origin, added, state, due) VALUES"
        " ('http://a.test', 0, 'done', 0), ('http://b.test', 0, 'revisit', 9e9),"
        " ('http://c.test', 0, 'deferred', 9e9)")
    lost_at = "20260101000010"
    ours.record([cap(f"http://{host}.test/{page}", n, at=lost_at)
                 for n, (host, page) in enumerate([("a", "x"), ("a", "pending"), ("a", "shipped"),
                                                  ("a", "again"), ("b", "x"), ("c", "x")])])
    survivor = ledger(1, 1, ttl=1.0)
    # A survivor captured two of them again (one still pending, one catalogued); "again" was
    # sent back already by another lost bundle.
    later = "ARCHIVER-20260101000000-1-00000.warc.gz"
    survivor.record([cap("http://a.test/pending", 1, later, at=lost_at)])
    catalog.add([cap("http://a.test/shipped", 2, later, at="20260101000011")])
    sql(pg_store_url, "INSERT INTO crawl_inbox (origin, depth, url, refetch)"
        " VALUES ('http://a.test', 1, 'http://a.test/again', true)")
    sql(pg_store_url, "UPDATE crawlers SET heartbeat = now() - interval '5 seconds'")

    def captured(url: str, at: str) -> bool:
        return any(c.url == url for c in catalog.captures(url, from_=at))

    assert survivor.lose(BUNDLE, captured) == Lost(requeued=3, sites=3, woken=2)
    assert sorted(sql(pg_store_url, "SELECT url FROM crawl_inbox")) == [
        ("http://a.test/again",), ("http://a.test/x",), ("http://b.test/x",), ("http://c.test/x",)]
    assert sorted(sql(pg_store_url, "SELECT origin, state, due FROM sites")) == [
        ("http://a.test", "waiting", 0.0), ("http://b.test", "waiting", 0.0),
        ("http://c.test", "deferred", 9e9)]                              # fetched at its retry


def test_a_vanished_crawlers_shipped_bundle_is_catalogued_from_its_records(store, pg_store_url):
    """Catalogued by another crawler (its own crawler vanished after shipping it), a bundle's
    entries come from its records, not from the pending ones, which a failover that lost the
    last commits may have left short."""
    roster, ledger, catalog = store
    roster().register(0, "host-a", 1)
    ours = ledger(0, 1)
    records = [cap("http://a.test/", 10), cap("http://a.test/b", 200), cap("http://a.test/c", 400)]
    ours.record(records[:1])                        # the later entries' commit went with a failover
    survivor = ledger(1, 1)
    assert survivor.shipped(BUNDLE, catalog, index=lambda: records, from_records=True) == 3
    assert sorted(c.url for c in catalog.iter_all()) == ["http://a.test/", "http://a.test/b",
                                                         "http://a.test/c"]
    assert sql(pg_store_url, "SELECT state FROM bundles") == [("shipped",)]
