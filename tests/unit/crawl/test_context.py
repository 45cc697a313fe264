"""Why fetching pauses (archiver.crawl.context): a full disk and the bundles past
warc.local_limit each hold it, fetching resumes only when neither does, and the status says which
holds it (``waiting_for``)."""

from __future__ import annotations

from typing import Any

from archiver.config import Config
from archiver.crawl.context import CrawlContext
from archiver.crawl.stats import Stats


def context() -> CrawlContext:
    unused: Any = None  # the pause touches none of the stores
    return CrawlContext(config=Config(), bundle=unused, spool=unused, lookup=unused, stats=Stats(),
                        slots=unused, sink=unused, dedupe=unused, crawl_queues=unused,
                        bodies=unused)


async def test_fetching_resumes_only_when_neither_the_disk_nor_the_local_limit_holds_it():
    ctx = context()
    assert ctx.disk_ok.is_set() and ctx.stats.waiting_for is None
    ctx.local_limit(True)
    assert not ctx.disk_ok.is_set() and ctx.stats.waiting_for == "objects"
    assert ctx.held_by == "bundles waiting for the object store"
    ctx.disk_trouble(OSError(28, "No space left on device"), "sync")
    assert ctx.stats.waiting_for == "disk" and ctx.held_by == "disk full"
    assert ctx.stats.errors["disk"] == 1
    ctx.disk_back()
    assert not ctx.disk_ok.is_set() and ctx.stats.waiting_for == "objects"
    paused = ctx.disk_ok
    ctx.local_limit(False)
    assert paused.is_set() and ctx.disk_ok.is_set() and ctx.stats.waiting_for is None


async def test_the_status_says_the_database_first_and_what_holds_fetching_after_it():
    ctx = context()
    ctx.database(True)
    assert ctx.stats.waiting_for == "database" and not ctx.store_ok.is_set()
    ctx.local_limit(True)
    assert ctx.stats.waiting_for == "database" and not ctx.disk_ok.is_set()
    ctx.local_limit(False)
    assert ctx.stats.waiting_for == "database" and ctx.disk_ok.is_set()
    ctx.local_limit(True)
    ctx.database(False)  # back: the local limit still holds fetching, and the status says so
    assert ctx.stats.waiting_for == "objects" and ctx.store_ok.is_set()
    ctx.local_limit(False)
    assert ctx.stats.waiting_for is None and ctx.disk_ok.is_set()
