"""The shared site queue's leases on a real PostgreSQL: claims never collide, an expired lease
goes to another process with a new epoch, and the late holder's writes change nothing."""

from __future__ import annotations

import psycopg
import pytest

from archiver.queues.leases import Leases
from archiver.queues.pgsitequeue import PgSiteQueue


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
