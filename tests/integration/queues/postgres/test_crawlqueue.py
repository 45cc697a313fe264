"""Each site's crawl queue in PostgreSQL: opened only under the site's lease, resumed by any
process at its cursor, fed through its inbox, and fenced once the lease goes to another."""

from __future__ import annotations

import psycopg
import pytest

from archiver.queues.models import CrawlQueueBusy
from archiver.store.durable import SyncJob
from tests.support.pgqueues import PgProcess

SITE = "http://a.test"



@pytest.fixture
def processes(pg_store_url):
    made = []

    def make(number: int) -> PgProcess:
        made.append(PgProcess(pg_store_url, number))
        return made[-1]

    yield make
    for process in made:
        process.close()


def drain(queue) -> list[str]:
    out = []
    while (entry := queue.next()) is not None:
        out.append(entry.url)
    return out


def test_a_queue_opens_only_under_the_sites_lease(processes):
    one = processes(0)
    one.sites.add(SITE)
    with pytest.raises(CrawlQueueBusy):
        one.queues.open(SITE)
    one.sites.claim(include_deferred=False)
    with one.queues.open(SITE) as queue:
        assert len(queue) == 0 and queue.next() is None


def test_another_process_resumes_at_the_cursor_and_never_queues_a_url_twice(processes):
    one, two = processes(0), processes(1)
    one.sites.add(SITE)
    one.sites.claim(include_deferred=False)
    queue = one.queues.open(SITE)
    assert queue.add(SITE + "/", 0) and queue.add(SITE + "/b", 1) and queue.add(SITE + "/c", 1)
    assert not queue.add(SITE + "/b", 2)
    first = queue.next()
    queue.commit(first, pages=1, bytes_=100)
    queue.save(queue.mark())
    job = SyncJob()
    queue.add_to(job)
    job.run()                                    # what the group commit's worker thread does
    queue.close()
    one.sites.release(SITE)

    two.sites.claim(include_deferred=False)
    again = two.queues.open(SITE)
    assert (again.pages, again.bytes) == (1, 100)
    assert drain(again) == [SITE + "/b", SITE + "/c"]
    assert not again.add(SITE + "/", 0) and again.add(SITE + "/d", 2)
    assert len(again) == 4
    again.close()


def test_the_inbox_is_merged_through_the_bitmap_except_refetches(processes, pg_store_url):
    one, outsider = processes(0), processes(1)
    one.sites.add(SITE)
    one.sites.claim(include_deferred=False)
    queue = one.queues.open(SITE)
    queue.add(SITE + "/", 0)
    queue.commit(queue.next(), pages=1, bytes_=1)
    queue.save(queue.mark())
    queue.close()
    queue = one.queues.open(SITE)                       # the next visit: "/" fetched before it
    assert drain(queue) == []
    outsider.queues.append(SITE, [(SITE + "/", 0), (SITE + "/new", 1)])
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        db.execute("INSERT INTO crawl_inbox (origin, depth, url, refetch) VALUES (%s, 0, %s, true)",
                   (SITE, SITE + "/"))
    assert queue.inbox_waiting()
    inbox = queue.take_inbox()
    assert inbox is not None and queue.merge(inbox)
    queue.finish_inbox(inbox, True)
    assert sorted(drain(queue)) == [SITE + "/", SITE + "/new"]      # "/" again: a refetch
    assert queue.inbox_waiting() and queue.take_inbox() is None
    assert not queue.inbox_waiting()
    queue.close()
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        assert db.execute("SELECT count(*) FROM crawl_inbox").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM crawl_entries").fetchone() == (3,)


def test_a_holder_whose_lease_went_to_another_writes_nothing(processes, pg_store_url):
    late, taker = processes(0), processes(1)
    late.sites.add(SITE)
    late.sites.claim(include_deferred=False)
    stale = late.queues.open(SITE)
    stale.add(SITE + "/", 0)
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        db.execute("UPDATE sites SET lease_until = now() - interval '1 second'")
    taker.sites.claim(include_deferred=False)
    fresh = taker.queues.open(SITE)
    stale.add(SITE + "/late", 1)
    stale.commit(stale.next(), pages=5, bytes_=500)
    stale.save(stale.mark())
    stale.close()
    assert stale.fenced and late.sites.leases.lost == {SITE}
    fresh.close()
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        assert db.execute("SELECT cursor, pages FROM crawl_cursors").fetchone() == (0, 0)
        assert db.execute("SELECT count(*) FROM crawl_entries").fetchone() == (0,)


def test_a_late_holder_is_fenced_from_the_claim_on_not_only_once_the_taker_opens(processes,
                                                                                  pg_store_url):
    """The taker has claimed the site but not opened its queue yet (it resolves the host first):
    the late holder's group commit still writes nothing, and says why."""
    late, taker = processes(0), processes(1)
    faults = []
    late.sites.leases.report = lambda _log, _level, name, **fields: faults.append((name, fields))
    late.queues.max_decisions = 100
    late.sites.add(SITE)
    late.sites.claim(include_deferred=False)
    stale = late.queues.open(SITE)
    stale.add(SITE + "/", 0)
    stale.decide(SITE + "/private", "robots")
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        db.execute("UPDATE sites SET lease_until = now() - interval '1 second'")
    assert taker.sites.claim(include_deferred=False) == SITE
    stale.commit(stale.next(), pages=1, bytes_=100)
    stale.save(stale.mark())
    job = SyncJob()
    stale.add_to(job)
    job.run()
    assert stale.fenced and late.sites.leases.lost == {SITE}
    assert [name for name, _ in faults] == ["fenced-write", "lease-lost"]
    assert faults[0][1]["cause"] == faults[1][1]["cause"] == "process 1 holds it now (epoch 2)"
    assert faults[0][1]["entries"] == 1 and faults[0][1]["decisions"] == 1
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        for table in ("crawl_entries", "crawl_decisions"):
            assert db.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
        assert db.execute("SELECT cursor, epoch FROM crawl_cursors").fetchone() == (0, 1)
    fresh = taker.queues.open(SITE)
    assert (fresh.cursor, len(fresh)) == (0, 0)
    fresh.close()


def test_opening_a_woken_sites_queue_merges_its_inbox_and_queues_a_refetch_once(processes,
                                                                               pg_store_url):
    """A finished site woken for a lost bundle's refetches has them queued as it opens (the
    visit then has something to fetch), each once, and none that is still ahead."""
    one = processes(0)
    one.sites.add(SITE)
    one.sites.claim(include_deferred=False)
    with one.queues.open(SITE) as queue:
        for path in ("/", "/a", "/b"):
            queue.add(SITE + path, 0)
        for _ in range(2):
            queue.commit(queue.next(), pages=1, bytes_=1)
        queue.save(queue.mark())
    one.sites.finish(SITE)
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        db.execute("INSERT INTO crawl_inbox (origin, depth, url, refetch) VALUES"
                   " (%(s)s, 0, %(s)s || '/', true), (%(s)s, 1, %(s)s || '/a', true),"
                   " (%(s)s, 1, %(s)s || '/a', true), (%(s)s, 1, %(s)s || '/b', true)", {"s": SITE})
        db.execute("UPDATE sites SET state = 'waiting', due = 0")
    assert one.sites.claim(include_deferred=False) == SITE
    with one.queues.open(SITE) as queue:
        assert drain(queue) == [SITE + "/b", SITE + "/", SITE + "/a"]
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        assert db.execute("SELECT count(*) FROM crawl_inbox").fetchone() == (0,)


def test_a_refetch_whose_entry_was_never_written_is_not_queued_again_when_found(processes,
                                                                               pg_store_url):
    """A vanished holder fetched a URL it had just found, and died before its entry was written:
    the lost bundle sends it back, and the visit that continues the site finds it again on the
    page it refetches; it is fetched once."""
    one = processes(0)
    one.sites.add(SITE)
    one.sites.claim(include_deferred=False)
    with one.queues.open(SITE) as queue:
        queue.add(SITE + "/", 0)
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        db.execute("INSERT INTO crawl_inbox (origin, depth, url, refetch)"
                   " VALUES (%s, 1, %s, true)", (SITE, SITE + "/style.css"))
    with one.queues.open(SITE) as queue:
        assert queue.next().url == SITE + "/"
        assert not queue.add(SITE + "/style.css", 1)                  # found on "/" again
        assert drain(queue) == [SITE + "/style.css"]


def test_a_refetch_of_a_url_this_visit_queued_itself_is_not_queued_again(processes, pg_store_url):
    """A lost bundle's URL that the visit continuing the site has fetched since (from the
    queue, written or not yet) is not fetched again; one the holder before it fetched is."""
    one = processes(0)
    one.sites.add(SITE)
    one.sites.claim(include_deferred=False)
    with one.queues.open(SITE) as queue:
        for path in ("/", "/old"):
            queue.add(SITE + path, 0)
            queue.commit(queue.next(), pages=1, bytes_=1)
        queue.save(queue.mark())
    with one.queues.open(SITE) as queue:                             # the visit that continues
        queue.add(SITE + "/a", 1)
        queue.commit(queue.next(), pages=3, bytes_=3)
        queue.sync()                                                   # "/a": its entry written
        queue.add(SITE + "/b", 1)
        queue.commit(queue.next(), pages=4, bytes_=4)                 # "/b": not written yet
        with psycopg.connect(pg_store_url, autocommit=True) as db:
            db.execute("INSERT INTO crawl_inbox (origin, depth, url, refetch) VALUES"
                       " (%(s)s, 1, %(s)s || '/old', true), (%(s)s, 1, %(s)s || '/a', true),"
                       " (%(s)s, 1, %(s)s || '/b', true)", {"s": SITE})
        inbox = queue.take_inbox()
        queue.finish_inbox(inbox, queue.merge(inbox))
        assert drain(queue) == [SITE + "/old"]


def test_restart_hands_every_entry_out_again(processes):
    one = processes(0)
    one.sites.add(SITE)
    one.sites.claim(include_deferred=False)
    queue = one.queues.open(SITE)
    for path in ("/", "/b"):
        queue.add(SITE + path, 0)
    for entry in (queue.next(), queue.next()):
        queue.commit(entry, pages=1, bytes_=1)
    queue.save(queue.mark())
    queue.restart()
    assert queue.restarted_at is not None and (queue.cursor, queue.pages) == (0, 0)
    assert drain(queue) == [SITE + "/", SITE + "/b"]
    queue.close()
