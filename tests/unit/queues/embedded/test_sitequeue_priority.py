"""Site priority and hop counts in the embedded site queue: the claim order, the merge from the
links batch, seeds, and a queue from before them."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.models import LinkedSite
from tests.support.fuzzing import examples
from tests.support.sitequeues import first_site_queue


def claims(q: SiteQueue, now: float = 100) -> list[str]:
    out = []
    while (origin := q.claim(include_deferred=False, now=now)) is not None:
        out.append(origin)
    return out


def test_the_highest_priority_is_claimed_first_then_most_in_links_then_due(tmp_path):
    with SiteQueue(queue_path(tmp_path, 0)) as q:
        q.merge_links([LinkedSite("http://many.test", 9, True),
                      LinkedSite("http://keen.test", 1, True, 3, 0.5),
                      LinkedSite("http://keener.test", 0, True, 3, 2.0),
                      LinkedSite("http://low.test", 50, True, 1, -1.0),
                      LinkedSite("http://few.test", 2, True)], now=0)
        assert claims(q) == ["http://keener.test", "http://keen.test", "http://many.test",
                             "http://few.test", "http://low.test"]


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 50)), min_size=1, max_size=12))
def test_with_every_priority_0_the_order_is_in_links_then_due(tmp_path_factory, sites):
    """Today's order, exactly: most in-links first, then earliest due (then the table's order)."""
    with SiteQueue(queue_path(tmp_path_factory.mktemp("q"), 0)) as q:
        for n, (inlinks, due) in enumerate(sites):
            q.add(f"http://s{n}.test", inlinks=inlinks, now=due)
            q._db.execute("UPDATE sites SET due = ? WHERE origin = ?", (due, f"http://s{n}.test"))
        want = [f"http://s{n}.test" for n, _ in sorted(enumerate(sites),
                                                       key=lambda s: (-s[1][0], s[1][1], s[0]))]
        assert claims(q) == want


def test_a_site_keeps_its_lowest_hops_and_its_priority_only_grows(tmp_path):
    with SiteQueue(queue_path(tmp_path, 0)) as q:
        assert q.merge_links([LinkedSite("http://a.test", 1, True, 4, 1.5)], now=0) == 1
        q.merge_links([LinkedSite("http://a.test", 1, False, 6, 0.5)], now=1)   # farther, lower
        row = q.site("http://a.test")
        assert row is not None and (row.hops, row.priority) == (4, 1.5)
        q.merge_links([LinkedSite("http://a.test", 1, False, 2, 2.5)], now=2)   # nearer, higher
        row = q.site("http://a.test")
        assert row is not None and (row.hops, row.priority, row.inlinks) == (2, 2.5, 1)
        q.merge_links([LinkedSite("http://a.test", 3, False, 2, 0.0)], now=3)   # in-links alone
        row = q.site("http://a.test")
        assert row is not None and (row.hops, row.priority, row.inlinks) == (2, 2.5, 3)
        # A seed is at 0 hops, whether new or known already.
        assert not q.add("http://a.test") and q.site("http://a.test").hops == 0
        assert q.add("http://b.test") and q.site("http://b.test").hops == 0
        # A site done and woken keeps its marks.
        assert q.claim(include_deferred=False, now=10) == "http://a.test"
        q.finish("http://a.test", now=10)
        q.merge_links([LinkedSite("http://a.test", 3, True, 5, 0.0)], now=11)
        row = q.site("http://a.test")
        assert row is not None and (row.state, row.hops, row.priority) == ("waiting", 0, 2.5)


def test_a_queue_from_before_hops_reads_them_as_0_and_claims_in_its_old_order(tmp_path):
    path = queue_path(tmp_path, 0)
    first_site_queue(path, [("http://a.test", "waiting", 1), ("http://b.test", "waiting", 5)])
    with SiteQueue(path) as q:
        assert [(r.origin, r.hops, r.priority) for r in q.rows()] == [
            ("http://a.test", 0, 0.0), ("http://b.test", 0, 0.0)]
        assert claims(q) == ["http://b.test", "http://a.test"]
    db = sqlite3.connect(path)
    indexes = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='index'"
                                              " AND name LIKE 'sites_%'")}
    db.close()
    assert indexes == {"sites_order"}
