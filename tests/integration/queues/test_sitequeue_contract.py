"""The site queue's contract (``queues.interfaces.SiteQueueStore``), run against both backends: a
crawler process's SQLite queue and the shared queue in PostgreSQL (where a claim is a lease)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.interfaces import SiteQueueStore
from archiver.queues.leases import Leases
from archiver.queues.models import COOKIES_LIMIT
from archiver.queues.postgres.sitequeue import PgSiteQueue
from archiver.queues.revisits import ChangeHistory, PageChanges, RevisitSchedule


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


DAY = 86400.0
WEEKLY = RevisitSchedule(interval=7 * DAY, shortest=DAY, longest=90 * DAY)


def test_a_finished_site_waits_for_its_revisit_which_only_a_daemon_takes(open_queue):
    q = open_queue()
    q.add("http://a.test", now=0)
    assert q.claim(include_deferred=False, now=0) == "http://a.test"
    q.finish("http://a.test", schedule=WEEKLY, now=100)          # a first visit: the interval
    assert q.state("http://a.test") == "revisit"
    assert q.next_due(include_deferred=True) is None              # --until-idle: nothing waits
    assert q.next_due(include_deferred=True, include_revisits=True) == 100 + 7 * DAY
    assert q.claim(include_deferred=True, include_revisits=True, now=100 + 7 * DAY - 1) is None
    assert q.claim(include_deferred=True, now=100 + 7 * DAY) is None
    assert not q.restart_pending("http://a.test")
    assert q.claim(include_deferred=True, include_revisits=True,
                   now=100 + 7 * DAY) == "http://a.test"
    assert q.restart_pending("http://a.test")                     # the crawl queue starts over
    row = next(r for r in q.rows() if r.origin == "http://a.test")
    assert row.next_visit == 0 and row.visits == 2                # the schedule was taken


def test_each_visit_moves_the_next_by_how_much_changed(open_queue):
    q = open_queue()
    q.add("http://a.test", now=0)
    q.claim(include_deferred=False, now=0)
    q.finish("http://a.test", schedule=WEEKLY, now=0)
    now = 7 * DAY
    assert q.claim(include_deferred=True, include_revisits=True, now=now) == "http://a.test"
    q.restarted("http://a.test")
    all_changed = PageChanges(compared=10, changed=10, seconds=10 * 7 * DAY)
    q.finish("http://a.test", changes=all_changed, schedule=WEEKLY, now=now)
    row = next(r for r in q.rows() if r.origin == "http://a.test")
    assert row.state == "revisit"
    assert row.history == ChangeHistory(10, 10, 10 * 7 * DAY)
    assert row.next_visit == now + WEEKLY.delay(row.history) < now + 7 * DAY   # sooner
    now = row.next_visit
    q.claim(include_deferred=True, include_revisits=True, now=now)
    q.finish("http://a.test", changes=PageChanges(10, 0, 10 * DAY), schedule=WEEKLY, now=now)
    row = next(r for r in q.rows() if r.origin == "http://a.test")
    assert row.history.compared == pytest.approx(18) and row.history.changed == pytest.approx(8)
    assert row.next_visit == now + WEEKLY.delay(row.history)


def test_new_links_wake_a_site_waiting_for_its_revisit_and_keep_its_schedule(open_queue):
    q = open_queue()
    q.add("http://a.test", now=0)
    q.claim(include_deferred=False, now=0)
    q.finish("http://a.test", schedule=WEEKLY, now=0)
    q.merge_links([("http://a.test", 3, True)], now=DAY)          # the links batch: new URLs
    assert q.state("http://a.test") == "waiting"
    assert q.claim(include_deferred=False, now=DAY) == "http://a.test"
    assert not q.restart_pending("http://a.test")                 # only the new URLs
    q.finish("http://a.test", schedule=WEEKLY, now=2 * DAY)
    row = next(r for r in q.rows() if r.origin == "http://a.test")
    assert (row.state, row.due, row.next_visit) == ("revisit", 7 * DAY, 7 * DAY)


def test_without_revisits_a_finished_site_is_done_and_recrawl_takes_a_revisit_too(open_queue):
    q = open_queue()
    for origin in ("http://a.test", "http://b.test"):
        q.add(origin, now=0)
        q.claim(include_deferred=False, now=0)
    q.finish("http://a.test", schedule=RevisitSchedule(0, DAY, 90 * DAY), now=0)
    q.finish("http://b.test", schedule=WEEKLY, now=0)
    assert (q.state("http://a.test"), q.state("http://b.test")) == ("done", "revisit")
    assert q.counts()["revisit"] == 1
    assert q.recrawl(now=5) == 2
    assert q.claim(include_deferred=False, now=5) is not None
    assert q.claim(include_deferred=False, now=5) is not None
    assert q.restart_pending("http://a.test") and q.restart_pending("http://b.test")


LOST = "session lost: http://a.test/members/p7 did not contain 'Log out'"


def test_a_paused_site_is_not_claimed_woken_or_waited_for_until_resumed(open_queue):
    q = open_queue()
    q.add("http://a.test", now=0)
    assert q.claim(include_deferred=False, now=0) == "http://a.test"
    q.pause("http://a.test", LOST)
    assert q.state("http://a.test") == "paused" and q.site("http://a.test").note == LOST
    assert q.counts()["paused"] == 1 and q.counts()["active"] == 0
    assert q.next_due(include_deferred=True, include_revisits=True) is None   # idle
    assert q.claim(include_deferred=True, include_revisits=True, now=1e12) is None
    q.merge_links([("http://a.test", 3, True)], now=5)           # new URLs wake no paused site
    assert q.recrawl(now=5) == 0
    assert q.state("http://a.test") == "paused"
    assert not q.resume("http://b.test", now=9)                   # unknown
    assert q.resume("http://a.test", now=10)
    row = q.site("http://a.test")
    assert (row.state, row.due, row.note) == ("waiting", 10, "")
    assert not q.resume("http://a.test", now=11)                  # not paused any more
    assert q.claim(include_deferred=False, now=9) is None
    assert q.claim(include_deferred=False, now=10) == "http://a.test"
    assert q.visits("http://a.test") == 2


def test_a_site_keeps_its_cookies_between_visits_up_to_the_limit(open_queue, caplog):
    q = open_queue()
    q.add("http://a.test", now=0)
    assert q.cookies("http://a.test") == ""
    jar = json.dumps([{"name": "session", "value": "x" * 100, "domain": "a.test", "path": "/"}])
    assert q.keep_cookies("http://a.test", jar)
    q = open_queue()                                              # the next visit's process
    assert q.cookies("http://a.test") == jar
    big = json.dumps([{"name": "c", "value": "y" * COOKIES_LIMIT}])
    with caplog.at_level(logging.WARNING):
        assert not q.keep_cookies("http://a.test", big)
    [refused] = [r for r in caplog.records if r.getMessage() == "cookies-not-kept"]
    assert (refused.fields["site"], refused.fields["bytes"]) == ("http://a.test", len(big))
    assert q.cookies("http://a.test") == jar                      # the last jar that fitted
    assert q.keep_cookies("http://a.test", "")
    assert q.cookies("http://a.test") == ""
    assert not q.keep_cookies("http://b.test", jar) and q.cookies("http://b.test") == ""


def test_gatekeeper_answers_add_up_by_kind(open_queue):
    q = open_queue()
    q.add("http://a.test", now=0)
    assert q.site("http://a.test").gatekeepers == ()
    q.count_gatekeepers("http://a.test", {"challenge": 2, "block": 0})
    q.count_gatekeepers("http://a.test", {"challenge": 10, "rate-limit": 1})
    q.count_gatekeepers("http://b.test", {"challenge": 1})        # unknown: nothing
    assert q.site("http://a.test").gatekeepers == (("challenge", 12), ("rate-limit", 1))
    assert [row.gatekeepers for row in q.rows()] == [(("challenge", 12), ("rate-limit", 1))]
