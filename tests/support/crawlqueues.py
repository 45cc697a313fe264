"""A site's crawl queue as the crawler opens it (the configured per-site bitmap), and its entries."""

from __future__ import annotations

from pathlib import Path

from archiver.config import CrawlConfig
from archiver.queues.crawlqueue import CrawlQueue, Entry


def open_queue(directory: Path) -> CrawlQueue:
    """A crawl queue with the configured per-site bitmap."""
    crawl = CrawlConfig()
    return CrawlQueue.open(directory, bloom_bits=crawl.site_bitmap_bits, max_fp=crawl.site_bitmap_max_fp)


def drain(crawl_queue: CrawlQueue) -> list[Entry]:
    entries = []
    while (entry := crawl_queue.next()) is not None:
        entries.append(entry)
    return entries
