"""The shared site queue's leases on a real PostgreSQL: claims never collide, an expired lease
goes to another process with a new epoch, and the late holder's writes change nothing."""

from __future__ import annotations

import time

import psycopg
import pytest

from archiver.queues.leases import Leases
from archiver.queues.postgres.sitequeue import PgSiteQueue


@pytest.fixture
def queues(pg_store_url):
    opened = []

    def make(process: int, ttl: float = 300.0) -> PgSiteQueue:
        opened.append(PgSiteQueue(pg_store_url, process=process, leases=Leases(ttl)))
        return opened[-1]

    yield make
    for queue in opened:
        queue.close()


def expire(url: str, origin: str) -> None:
    """Make the lease of ``origin`` run out now (as if its holder stopped renewing long ago)."""
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("UPDATE sites SET lease_until = now() - interval '1 second' WHERE origin = %s", (origin,))


def test_two_processes_never_claim_the_same_site(queues):
    first, second = queues(0), queues(1)
    for n in range(6):
        first.add(f"http://s{n}.test", now=0)
    taken = [first.claim(include_deferred=False, now=0), second.claim(include_deferred=False, now=0),
             first.claim(include_deferred=False, now=0), second.claim(include_deferred=False, now=0)]
    assert len(set(taken)) == 4
    assert set(first.leases.held()) | set(second.leases.held()) == set(taken)
    assert first.counts()["active"] == 4


def test_an_expired_lease_goes_to_another_process_and_fences_the_first(queues, pg_store_url):
    late, taker = queues(0), queues(1)
    late.add("http://a.test", now=0)
    assert late.claim(include_deferred=False, now=0) == "http://a.test"
    first_epoch = late.leases.epoch("http://a.test")
    assert taker.claim(include_deferred=False, now=0) is None          # held: not for the taking
    expire(pg_store_url, "http://a.test")
    assert taker.claim(include_deferred=False, now=0) == "http://a.test"
    assert taker.leases.epoch("http://a.test") == first_epoch + 1
    # The late holder comes back: its renewal and its writes find another epoch.
    assert late.renew() == {"http://a.test"}
    assert late.leases.lost == {"http://a.test"}
    late.finish("http://a.test")
    assert late.state("http://a.test") == "active"                     # still the taker's visit
    assert late.retry("http://a.test", delay=1, max_attempts=3, defer_delay=9, note="") == "lost"
    assert taker.renew() == set()
    taker.finish("http://a.test", "complete")
    assert taker.state("http://a.test") == "done"


def test_a_visit_that_ends_while_urls_wait_in_its_inbox_leaves_the_site_due(queues, pg_store_url):
    """A lost bundle's refetches reach the inbox after the visit last looked: the site is due
    again at once, not finished with them left behind."""
    holder = queues(0)
    holder.add("http://a.test", now=0)
    holder.claim(include_deferred=False, now=0)
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        db.execute("INSERT INTO crawl_inbox (origin, depth, url, refetch)"
                   " VALUES ('http://a.test', 1, 'http://a.test/b', true)")
    holder.finish("http://a.test", "complete", now=100)
    assert holder.site("http://a.test").state == "waiting" and holder.site("http://a.test").due == 0
    assert holder.claim(include_deferred=False, now=100) == "http://a.test"


def test_a_lease_whose_deadline_passed_is_given_back_and_reported(queues):
    """A holder paused past its lease's deadline that nobody took meanwhile gives the site back
    when its visit stops, rather than renewing a lease no visit uses."""
    holder = queues(0, ttl=10.0)
    faults = []
    holder.leases.report = lambda _log, _level, name, **fields: faults.append((name, fields))
    holder.add("http://a.test", now=0)
    holder.claim(include_deferred=False, now=0)
    holder.leases.granted("http://a.test", holder.leases.epoch("http://a.test"),
                          sent_at=time.monotonic() - 60)                # paused for a minute
    holder.release("http://a.test")
    assert holder.state("http://a.test") == "waiting" and holder.leases.held() == {}
    assert [(name, fields["during"]) for name, fields in faults] == [("lease-lost", "release")]
    assert holder.renew() == set()


def test_next_due_counts_sites_others_hold_so_until_idle_waits_for_them(queues):
    holder, idle = queues(0), queues(1)
    holder.add("http://a.test", now=0)
    holder.claim(include_deferred=False, now=0)
    origin, due = idle.claim_or_due(include_deferred=False, now=0)
    assert origin is None and due is not None                          # not idle: a.test is leased
    holder.finish("http://a.test")
    assert idle.claim_or_due(include_deferred=False, now=0) == (None, None)


def test_a_queue_without_a_process_number_adds_but_cannot_claim(queues, pg_store_url):
    reader = PgSiteQueue(pg_store_url)
    try:
        assert reader.add("http://a.test")
        with pytest.raises(RuntimeError, match="cannot claim"):
            reader.claim(include_deferred=False)
    finally:
        reader.close()


def test_a_pause_ends_the_lease_and_a_late_holder_s_pause_changes_nothing(queues, pg_store_url,
                                                                          caplog):
    late, taker = queues(0), queues(1)
    late.add("http://a.test", now=0)
    assert late.claim(include_deferred=False, now=0) == "http://a.test"
    expire(pg_store_url, "http://a.test")
    assert taker.claim(include_deferred=False, now=0) == "http://a.test"
    late.pause("http://a.test", "session lost")                       # fenced: the taker's visit
    assert late.state("http://a.test") == "active"
    assert [r.fields["write"] for r in caplog.records if r.getMessage() == "fenced-write"] == ["pause"]
    taker.pause("http://a.test", "session lost")
    assert taker.leases.held() == {}
    with psycopg.connect(pg_store_url) as db:
        assert db.execute("SELECT state, holder, lease_until FROM sites").fetchall() == [
            ("paused", None, None)]
    assert taker.next_due(include_deferred=True) is None             # no lease left to wait for
