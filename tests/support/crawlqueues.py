"""A site's crawl queue as the crawler opens it (the configured per-site bitmap), every site's crawl
queue with their inboxes, and a queue's entries."""

from __future__ import annotations

from pathlib import Path

from archiver.config import CrawlConfig
from archiver.queues.embedded.crawlqueue import CrawlQueue, EmbeddedCrawlQueues
from archiver.queues.models import Entry


def open_queue(directory: Path) -> CrawlQueue:
    """A crawl queue with the configured per-site bitmap."""
    crawl = CrawlConfig()
    return CrawlQueue.open(directory, bloom_bits=crawl.site_bitmap_bits, max_fp=crawl.site_bitmap_max_fp)


def embedded_queues(root: Path, *, bulk: bool = False) -> EmbeddedCrawlQueues:
    """Every site's crawl queue under the archive root ``root`` (the configured per-site bitmap),
    with the inbox database (``bulk``: as the links batch opens it); close it after use."""
    crawl = CrawlConfig()
    return EmbeddedCrawlQueues(root, bloom_bits=crawl.site_bitmap_bits, max_fp=crawl.site_bitmap_max_fp,
                               bulk=bulk)


def drain(crawl_queue: CrawlQueue) -> list[Entry]:
    entries = []
    while (entry := crawl_queue.next()) is not None:
        entries.append(entry)
    return entries
