"""The per-process site queue (SQLite)."""

from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.sites import backoff, process_for
from tests.support.sitequeues import first_site_queue


def test_active_sites_come_back_after_a_crash(tmp_path):
    path = queue_path(tmp_path, 3)
    q = SiteQueue(path)
    q.add("http://a.test", now=0)
    assert q.claim(include_deferred=False, now=0)
    # No close: the process "died" holding the site.
    q2 = SiteQueue(path)
    assert q2.state("http://a.test") == "waiting"
    assert q2.claim(include_deferred=False, now=0) == "http://a.test"


def test_process_for_is_stable_and_spreads():
    origins = [f"http://site-{i}.test" for i in range(1000)]
    owners = [process_for(o, 4) for o in origins]
    assert owners == [process_for(o, 4) for o in origins]
    assert all(200 < owners.count(p) < 300 for p in range(4))
    assert {process_for(o, 1) for o in origins} == {0}


def test_a_queue_made_before_recrawls_gains_the_column(tmp_path):
    path = queue_path(tmp_path, 0)
    first_site_queue(path, [("http://a.test", "done", 0)])
    q = SiteQueue(path)
    assert q.recrawl("http://a.test") == 1 and q.restart_pending("http://a.test")


def test_backoff_doubles_the_delay_then_defers_and_starts_counting_again():
    steps = [backoff(n, delay=10, max_attempts=4, defer_delay=3600, now=1000) for n in range(4)]
    assert steps == [("retry", 1010, 1), ("retry", 1020, 2), ("retry", 1040, 3),
                     ("deferred", 4600, 0)]


def test_a_queue_made_before_sessions_gains_cookies_gatekeepers_and_pauses(tmp_path):
    path = queue_path(tmp_path, 0)
    first_site_queue(path, [("http://a.test", "waiting", 0)])
    q = SiteQueue(path)
    assert q.cookies("http://a.test") == "" and q.site("http://a.test").gatekeepers == ()
    assert q.keep_cookies("http://a.test", "[]") and q.cookies("http://a.test") == "[]"
    q.count_gatekeepers("http://a.test", {"challenge": 3})
    assert q.claim(include_deferred=False, now=0) == "http://a.test"
    q.pause("http://a.test", "session lost")
    q.close()
    q = SiteQueue(path)                      # a pause outlives the process, unlike active
    row = q.site("http://a.test")
    assert (row.state, row.note, row.gatekeepers) == ("paused", "session lost", (("challenge", 3),))
    q.close()
