"""An archive laid out by the last release (``frontier/``, ``outlinks/``): read where it lies with
a warning, then moved by ``archiver store upgrade`` (archiver.store.layout), crawled on after."""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess

from archiver.queues.embedded.crawlqueue import EmbeddedCrawlQueues
from archiver.store import layout
from tests.support.onesite import OneSite, crawl_site
from tests.support.repo import ARCHIVER, archiver_here_text

SPOOLED = "0-20261122000000-00001.tsv"


def queues(root):
    return EmbeddedCrawlQueues(root, bloom_bits=1 << 16, max_fp=0.01, max_decisions=0)


async def test_an_old_archive_is_read_then_moved_and_keeps_its_crawl_queues(tmp_path, caplog):
    one = OneSite(pages=4)
    root = await crawl_site(tmp_path, one)
    config = tmp_path / "archiver.toml"
    (root / "crawl-queues").rename(root / "frontier")
    (root / "spool").mkdir(exist_ok=True)
    (root / "spool" / SPOOLED).write_text(f"http://elsewhere.test/\t{one.origin}\t1\n")
    (root / "spool").rename(root / "outlinks")
    page = one.origin + "/p1.html"
    caplog.set_level(logging.WARNING)

    before = queues(root).position(one.origin, page)  # read where it lies
    assert before is not None and before.done
    assert [r for r in caplog.records if r.getMessage() == "archive-layout-old"]
    assert layout.version(root) == 1

    moved = archiver_here_text("store", "upgrade", "--config", str(config))
    assert moved.returncode == 0, moved.stderr
    assert f"{root / 'frontier'} -> {root / 'crawl-queues'}" in moved.stdout
    assert f"{root / 'outlinks'} -> {root / 'spool'}" in moved.stdout
    assert not (root / "frontier").exists() and (root / "spool" / SPOOLED).exists()
    assert layout.version(root) == layout.VERSION
    assert queues(root).position(one.origin, page) == before

    again = archiver_here_text("store", "upgrade", "--config", str(config))
    assert again.returncode == 0 and "nothing to move" in again.stdout

    # The links batch (its own process: it runs a trio loop) reads the spool under its new name.
    links = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(config)],
                           capture_output=True, text=True, check=False)
    assert links.returncode == 0, links.stderr
    assert (root / "spool" / "done" / SPOOLED).exists()


async def test_store_upgrade_refuses_while_a_crawler_runs(tmp_path):
    root = await crawl_site(tmp_path, OneSite(pages=1))
    (root / "crawl-queues").rename(root / "frontier")
    fd = os.open(root / "sites" / "0.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running crawler holds it
        refused = archiver_here_text("store", "upgrade", "--config", str(tmp_path / "archiver.toml"))
    finally:
        os.close(fd)
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith("0.lock is held: stop every archiver service on "
                                           f"{root} first")
    assert (root / "frontier").is_dir() and not (root / "crawl-queues").exists()
