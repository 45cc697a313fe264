"""The site queue's contract (``queues.interfaces.SiteQueueStore``), run against both backends: a
crawler process's SQLite queue and the shared queue in PostgreSQL (where a claim is a lease)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from archiver.queues.interfaces import SiteQueueStore
from archiver.queues.leases import Leases
from archiver.queues.pgsitequeue import PgSiteQueue
from archiver.queues.sitequeue import SiteQueue, queue_path


@pytest.fixture(params=["sqlite", "postgresql"])
def open_queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], SiteQueueStore]]:
    """Opens the site queue of crawler process 0 on one store; closed after the test."""
    opened: list[SiteQueueStore] = []
    url = request.getfixturevalue("pg_store_url") if request.param == "postgresql" else ""

    def make() -> SiteQueueStore:
        opened.append(PgSiteQueue(url, process=0, leases=Leases(300.0)) if url
                      else SiteQueue(queue_path(tmp_path, 0)))
        return opened[-1]

    yield make
    for queue in opened:
        queue.close()


def test_add_once_and_claim_most_linked_first(open_queue):
    q = open_queue()
    assert q.add("http://a.test", now=1)
    assert not q.add("http://a.test", now=2)
    q.add("http://b.test", inlinks=5, now=3)
    q.add("http://c.test", inlinks=1, now=4)
    assert q.claim(include_deferred=False, now=10) == "http://b.test"
    assert q.claim(include_deferred=False, now=10) == "http://c.test"
    assert q.claim(include_deferred=False, now=10) == "http://a.test"
    assert q.claim(include_deferred=False, now=10) is None
    assert q.counts()["active"] == 3


def test_retry_backs_off_then_defers(open_queue):
    q = open_queue()
    q.add("http://a.test", now=0)
    assert q.claim(include_deferred=False, now=0) == "http://a.test"
    args = {"delay": 10, "max_attempts": 3, "defer_delay": 1000, "note": "robots 503"}
    assert q.retry("http://a.test", now=0, **args) == "retry"
    assert q.next_due(include_deferred=False) == 10
    assert q.claim(include_deferred=False, now=9) is None
    assert q.claim(include_deferred=False, now=10) == "http://a.test"
    assert q.retry("http://a.test", now=10, **args) == "retry"
    assert q.next_due(include_deferred=False) == 30          # doubled
    assert q.claim(include_deferred=False, now=30) == "http://a.test"
    assert q.retry("http://a.test", now=30, **args) == "deferred"
    assert q.next_due(include_deferred=False) is None         # --until-idle stops waiting
    assert q.next_due(include_deferred=True) == 1030
    assert q.claim(include_deferred=False, now=5000) is None
    assert q.claim(include_deferred=True, now=5000) == "http://a.test"
    q.finish("http://a.test")
    assert q.state("http://a.test") == "done"


def test_release_makes_a_site_ready_again(open_queue):
    q = open_queue()
    q.add("http://a.test", now=0)
    q.claim(include_deferred=False, now=0)
    q.release("http://a.test")
    assert q.claim(include_deferred=False, now=0) == "http://a.test"


def test_recrawl_requeues_only_finished_sites_and_asks_for_a_restart(open_queue):
    q = open_queue()
    for origin in ("http://a.test", "http://b.test", "http://c.test"):
        q.add(origin, now=0)
    assert q.claim(include_deferred=False, now=0) == "http://a.test"
    q.finish("http://a.test")
    assert q.claim(include_deferred=False, now=0) == "http://b.test"   # still active
    assert q.recrawl("http://b.test", now=5) == 0
    assert q.recrawl("http://c.test", now=5) == 0                      # waiting: nothing to redo
    assert not q.restart_pending("http://c.test")
    assert q.recrawl("http://a.test", now=5) == 1
    assert q.state("http://a.test") == "waiting" and q.restart_pending("http://a.test")
    assert q.claim(include_deferred=False, now=5) == "http://c.test"
    assert q.claim(include_deferred=False, now=5) == "http://a.test"
    assert q.visits("http://a.test") == 2
    q.restarted("http://a.test")
    assert not q.restart_pending("http://a.test")
    q.finish("http://a.test")
    q.finish("http://c.test")
    assert q.recrawl(now=9) == 2                                      # every finished site


def test_claim_or_due_claims_else_says_when(open_queue):
    q = open_queue()
    assert q.claim_or_due(include_deferred=False, now=0) == (None, None)   # nothing waits at all
    q.add("http://a.test", now=0)
    q.add("http://b.test", now=0)
    assert q.claim_or_due(include_deferred=False, now=0) == ("http://a.test", None)
    q.retry("http://a.test", delay=10, max_attempts=3, defer_delay=1000, note="", now=0)
    assert q.claim_or_due(include_deferred=False, now=0) == ("http://b.test", None)
    assert q.claim_or_due(include_deferred=False, now=5) == (None, 10)      # a.test is due at 10
    assert q.claim_or_due(include_deferred=False, now=10) == ("http://a.test", None)
