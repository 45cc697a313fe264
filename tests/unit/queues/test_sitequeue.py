"""The per-process site queue (SQLite)."""

from archiver.queues.sitequeue import SiteQueue, process_for, queue_path


def test_add_once_and_claim_most_linked_first(tmp_path):
    q = SiteQueue(queue_path(tmp_path, 0))
    assert q.add("http://a.test", now=1)
    assert not q.add("http://a.test", now=2)
    q.add("http://b.test", inlinks=5, now=3)
    q.add("http://c.test", inlinks=1, now=4)
    assert q.claim(include_deferred=False, now=10) == "http://b.test"
    assert q.claim(include_deferred=False, now=10) == "http://c.test"
    assert q.claim(include_deferred=False, now=10) == "http://a.test"
    assert q.claim(include_deferred=False, now=10) is None
    assert q.counts()["active"] == 3


def test_retry_backs_off_then_defers(tmp_path):
    q = SiteQueue(queue_path(tmp_path, 0))
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


def test_active_sites_come_back_after_a_crash(tmp_path):
    path = queue_path(tmp_path, 3)
    q = SiteQueue(path)
    q.add("http://a.test", now=0)
    assert q.claim(include_deferred=False, now=0)
    # No close: the process "died" holding the site.
    q2 = SiteQueue(path)
    assert q2.state("http://a.test") == "waiting"
    assert q2.claim(include_deferred=False, now=0) == "http://a.test"


def test_release_makes_a_site_ready_again(tmp_path):
    q = SiteQueue(queue_path(tmp_path, 0))
    q.add("http://a.test", now=0)
    q.claim(include_deferred=False, now=0)
    q.release("http://a.test")
    assert q.claim(include_deferred=False, now=0) == "http://a.test"


def test_process_for_is_stable_and_spreads():
    origins = [f"http://site-{i}.test" for i in range(1000)]
    owners = [process_for(o, 4) for o in origins]
    assert owners == [process_for(o, 4) for o in origins]
    assert all(200 < owners.count(p) < 300 for p in range(4))
    assert {process_for(o, 1) for o in origins} == {0}


def test_recrawl_requeues_only_finished_sites_and_asks_for_a_restart(tmp_path):
    q = SiteQueue(queue_path(tmp_path, 0))
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


def test_a_queue_made_before_recrawls_gains_the_column(tmp_path):
    import sqlite3
    path = queue_path(tmp_path, 0)
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE sites (origin TEXT PRIMARY KEY, state TEXT NOT NULL DEFAULT 'waiting', "
               "due REAL NOT NULL DEFAULT 0, inlinks INTEGER NOT NULL DEFAULT 0, attempts INTEGER "
               "NOT NULL DEFAULT 0, added REAL NOT NULL, visits INTEGER NOT NULL DEFAULT 0, "
               "note TEXT NOT NULL DEFAULT '')")
    db.execute("INSERT INTO sites (origin, state, added) VALUES ('http://a.test', 'done', 0)")
    db.commit()
    db.close()
    q = SiteQueue(path)
    assert q.recrawl("http://a.test") == 1 and q.restart_pending("http://a.test")


def test_claim_or_due_claims_else_says_when(tmp_path):
    q = SiteQueue(queue_path(tmp_path, 0))
    assert q.claim_or_due(include_deferred=False, now=0) == (None, None)   # nothing waits at all
    q.add("http://a.test", now=0)
    q.add("http://b.test", now=0)
    assert q.claim_or_due(include_deferred=False, now=0) == ("http://a.test", None)
    q.retry("http://a.test", delay=10, max_attempts=3, defer_delay=1000, note="", now=0)
    assert q.claim_or_due(include_deferred=False, now=0) == ("http://b.test", None)
    assert q.claim_or_due(include_deferred=False, now=5) == (None, 10)      # a.test is due at 10
    assert q.claim_or_due(include_deferred=False, now=10) == ("http://a.test", None)
