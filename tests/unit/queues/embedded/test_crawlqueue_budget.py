"""A sheet's daily page count kept with the site: the embedded crawl queue's ``budget`` file
(written by one pwrite per page, so a killed process loses none; read back on open) and the site
queue's ``postpone`` (waiting again, due at the opening, with the note ``status`` shows)."""

from __future__ import annotations

import os

from archiver.queues.embedded.crawlqueue import BUDGET, read_slots
from archiver.queues.embedded.sitequeue import SiteQueue
from archiver.store.durable import SyncJob
from tests.support.crawlqueues import open_queue

DAY = 740_000  # a date's ordinal


def test_the_daily_count_survives_a_reopen_and_starts_again_each_day(tmp_path):
    directory = tmp_path / "q"
    with open_queue(directory) as queue:
        assert queue.day_pages(DAY) == 0
        for _ in range(3):
            queue.count_day_page(DAY)
        # Written at once, not at close: what a killed process leaves on disk.
        fd = os.open(directory / BUDGET, os.O_RDONLY)
        try:
            assert read_slots(fd)[1:3] == (DAY, 3)
        finally:
            os.close(fd)
        job = SyncJob()
        queue.add_to(job)  # the group commit fsyncs the count with the log
        job.run()
    with open_queue(directory) as queue:
        assert queue.day_pages(DAY) == 3
        assert queue.day_pages(DAY + 1) == 0
        queue.count_day_page(DAY + 1)
        assert queue.day_pages(DAY + 1) == 1 and queue.day_pages(DAY) == 0
        queue.restart()  # a recrawl starts the cursor over, not the day's count
        assert queue.day_pages(DAY + 1) == 1
    with open_queue(directory) as queue:
        assert queue.day_pages(DAY + 1) == 1


def test_a_torn_budget_slot_falls_back_to_the_other(tmp_path):
    directory = tmp_path / "q"
    with open_queue(directory) as queue:
        queue.count_day_page(DAY)
        queue.count_day_page(DAY)  # the second slot
    with (directory / BUDGET).open("r+b") as f:  # tear the newer slot (sequence 2: offset 0)
        f.write(b"\xff" * 8)
    with open_queue(directory) as queue:
        assert queue.day_pages(DAY) == 1  # one page lost, never a count from nowhere


def test_postpone_makes_an_active_site_wait_with_a_note(tmp_path):
    with SiteQueue(tmp_path / "sites.sqlite") as sites:
        sites.add("http://a.example", now=0)
        sites.add("http://b.example", now=0)
        assert sites.claim(include_deferred=False, now=10) == "http://a.example"
        sites.postpone("http://a.example", 5000.0, "window opens 22:00 Europe/Paris")
        sites.postpone("http://b.example", 9000.0, "not active: untouched")
        row, other = sites.site("http://a.example"), sites.site("http://b.example")
        assert row is not None and other is not None
        assert (row.state, row.due, row.note, row.attempts) == (
            "waiting", 5000.0, "window opens 22:00 Europe/Paris", 0)
        assert (other.state, other.due, other.note) == ("waiting", 0.0, "")
        assert sites.claim(include_deferred=False, now=4999) == "http://b.example"
        assert sites.claim(include_deferred=False, now=4999) is None
        assert sites.next_due(include_deferred=False) == 5000.0
        assert sites.claim(include_deferred=False, now=5000) == "http://a.example"
