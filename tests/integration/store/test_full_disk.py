"""A full disk: fetching pauses, what is written stays valid, and the crawl resumes once writes
succeed again. The "disk" is the process's file-size limit (RLIMIT_FSIZE), which needs no
privileges: past it every write fails with EFBIG, as a full file system fails with ENOSPC."""

from __future__ import annotations

import logging
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.store.bundles import complete_prefix
from archiver.store.embedded.catalog import Catalog
from archiver.store.warcindex import read_record
from demoweb import WebSpec, run_demo_process, start_demo
from tests.support.crawls import captures, load, warc_files, warcio_check, write_config

LIMIT = 200_000  # bytes any one file may reach while the "disk" is full
SPEC = WebSpec(sites=3, pages_per_site=25, port=0, trap=False)


@contextmanager
def file_size_limit(limit: int):
    """Lower this process's soft RLIMIT_FSIZE (SIGXFSZ ignored, so writes fail with EFBIG)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def assert_archive_consistent(root, config) -> None:
    for path in warc_files(root):
        with path.open("rb") as f:
            end, records = complete_prefix(f)
            assert records and end == f.seek(0, 2), path   # nothing half-written
    with Catalog(root / "catalog", config.catalog.shards, readonly=True) as catalog:
        for capture in catalog.iter_all():
            stored = read_record(root / "warcs", capture.filename, capture.offset, capture.length)
            assert stored.url == capture.url


@contextmanager
def logged(name: str) -> Iterator[trio.Event]:
    """An event set when the crawler logs event ``name`` (on the event loop, as disk-full is)."""
    seen = trio.Event()

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.msg == name:
                seen.set()

    handler = Handler()
    logger = logging.getLogger("archiver")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


async def test_a_full_disk_pauses_fetching_and_the_crawl_resumes_when_space_returns(tmp_path):
    async with trio.open_nursery() as nursery:
        web, server = await start_demo(nursery, SPEC)
        path = write_config(tmp_path, web, min_rest=0.02)
        path.write_text(path.read_text() + "[warc]\nsync_interval = 0.1\n")
        config = load(path)
        enqueue_seeds(config, 0, [o + "/" for o in web.origins()])
        crawler = Crawler(config, until_idle=True)
        done = trio.Event()

        async def crawl() -> None:
            await crawler.run()
            done.set()

        with file_size_limit(LIMIT) as space_returns, logged("disk-full") as disk_full:
            nursery.start_soon(crawl)
            with trio.fail_after(60):
                await disk_full.wait()
            assert not done.is_set()
            fetched = len(server.log)
            # Paused: several retries of the writes go by (sync_interval = 0.1 s) without a fetch.
            await trio.sleep(0.5)
            assert len(server.log) <= fetched + crawler.config.crawl.sites_per_process
            paused_at = len(server.log)
            await trio.sleep(0.3)
            assert len(server.log) == paused_at
            assert crawler.stats.errors["disk"] >= 1
            assert_archive_consistent(config.root, config)
            space_returns()
            with trio.fail_after(120):
                await done.wait()
        nursery.cancel_scope.cancel()
    expected = {u for u in web.expected("archiver") if "robots500" not in u}
    assert expected <= set(captures(config.root))
    assert warcio_check(warc_files(config.root)).returncode == 0
    assert not [p for p in warc_files(config.root) if p.name.endswith(".open")]
    assert_archive_consistent(config.root, config)


def test_on_disk_full_exit_stops_with_75_and_the_next_start_repairs(tmp_path):
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    with run_demo_process(SPEC) as (web, _port, _proc):
        path = write_config(tmp_path, web, min_rest=0.02, on_disk_full="exit")
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(o + "/\n" for o in web.origins()))
        command = [sys.executable, "-m", "archiver", "crawl", "run", "--config", str(path), "--until-idle"]
        full = subprocess.run([*command, "--seeds", str(seeds)], capture_output=True, text=True,
                              timeout=120, preexec_fn=limited, check=False)
        assert full.returncode == 75, full.stderr
        assert "event=disk-full" in full.stderr and "disk is full" in full.stderr
        config = load(path)
        assert_archive_consistent(config.root, config)
        again = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    expected = {u for u in web.expected("archiver") if "robots500" not in u}
    assert expected <= set(captures(config.root))
    assert warcio_check(warc_files(config.root)).returncode == 0
    assert_archive_consistent(config.root, config)
