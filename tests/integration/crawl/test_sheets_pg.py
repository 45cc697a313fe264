"""A sheet's daily page count and postponement with the shared stores (PostgreSQL): the count is
written with the group commit, read back by the next holder of the site (another process, after a
restart), and a postponed site leaves its lease and waits until its opening."""

from __future__ import annotations

import pytest

from archiver.store.durable import SyncJob
from tests.support.pgqueues import PgProcess

SITE = "http://a.test"
DAY = 740_000



@pytest.fixture
def two(pg_store_url):
    made = [PgProcess(pg_store_url, 0), PgProcess(pg_store_url, 1)]
    yield made
    for process in made:
        process.close()


def test_the_daily_count_goes_to_the_next_holder_and_a_postponed_site_waits(two):
    one, other = two
    one.sites.add(SITE, now=0)
    assert one.sites.claim(include_deferred=False, now=10) == SITE
    queue = one.queues.open(SITE)
    assert queue.day_pages(DAY) == 0
    queue.count_day_page(DAY)
    queue.count_day_page(DAY)
    job = SyncJob()
    queue.add_to(job)
    job.run()                                    # the group commit writes the count
    queue.count_day_page(DAY)
    queue.close()                                # and the close what is left
    one.sites.postpone(SITE, 5000.0, "daily budget of 3 pages spent until 00:00 UTC")
    row = one.sites.site(SITE)
    assert row is not None and (row.state, row.due, row.note) == (
        "waiting", 5000.0, "daily budget of 3 pages spent until 00:00 UTC")

    assert other.sites.claim(include_deferred=False, now=4999) is None
    assert other.sites.claim(include_deferred=False, now=5000) == SITE
    again = other.queues.open(SITE)
    assert again.day_pages(DAY) == 3 and again.day_pages(DAY + 1) == 0
    again.close()
