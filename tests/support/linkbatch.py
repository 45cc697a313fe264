"""The external-link batch's test setting: a config with a [links] section, spool files, and a
snapshot of what the batch queued (site queues and crawl queues)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from archiver import config
from archiver.links.batch import LinkBatch
from archiver.queues.crawlqueue import CrawlQueue, queue_dir
from archiver.queues.sitequeue import queue_path

LINKS = "\n[links]\nexpected_urls = 200000\nbits_per_url = 16\ncheckpoint_urls = {checkpoint}\n"


def links_config(directory: Path, *, processes: int = 2, checkpoint: int = 1000) -> config.Config:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "archiver.toml"
    path.write_text(f'[archive]\nroot = "archive"\n[crawl]\nprocesses = {processes}\n'
                    'allowed_networks = ["127.0.0.0/8"]\n'
                    + LINKS.format(checkpoint=checkpoint))
    return config.load(path)


def write_spool(root: Path, name: str, lines: list[str]) -> Path:
    path = root / "outlinks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def snapshot(root: Path, processes: int) -> tuple[dict, dict]:
    """The site queues (origin -> state, in-links) and each site's crawl queue, inbox merged."""
    sites = {}
    crawl = config.CrawlConfig()
    for p in range(processes):
        path = queue_path(root, p)
        if path.exists():
            db = sqlite3.connect(path)
            sites.update({o: (p, s, i) for o, s, i in db.execute(
                "SELECT origin, state, inlinks FROM sites")})
            db.close()
    queues = {}
    for origin in sites:
        with CrawlQueue.open(queue_dir(root, origin), bloom_bits=crawl.site_bitmap_bits,
                             max_fp=crawl.site_bitmap_max_fp) as crawl_queue:
            queues[origin] = [e.url for e in iter(crawl_queue.next, None)]
    return sites, queues


def batch_once(cfg: config.Config):
    with LinkBatch(cfg) as batch:
        return batch.run(once=True)
