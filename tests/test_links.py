"""The external-link batch: global bitmap, ledger, in-link counts, and two crawler processes."""

from __future__ import annotations

import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import trio
from warcio.archiveiterator import ArchiveIterator

from archiver import config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.links.batch import LinkBatch, run_batch
from archiver.queues.bloom import BloomBitmap, false_positive_rate, optimal_hashes
from archiver.queues.crawlqueue import CrawlQueue, queue_dir
from archiver.queues.sitequeue import SiteQueue, process_for, queue_path
from archiver.queues.spool import parse_line
from archiver.stores import open_stores
from archiver.web import urls
from tests.crawlkit import captures, warc_files, write_config
from tools.demoweb import WebSpec, start_demo

ARCHIVER = [sys.executable, "-m", "archiver"]
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


def synthetic_spool(root: Path, *, files: int = 12, per_file: int = 1500, sites: int = 150) -> None:
    rng = random.Random(7)
    for n in range(files):
        lines = []
        for _ in range(per_file):
            source, target = rng.randrange(sites), rng.randrange(sites)
            page = rng.randrange(60)
            lines.append(f"http://S{target}.test/p/{page}.html\thttp://s{source}.test\t20261122000000")
        write_spool(root, f"{n % 2}-2026112200{n:04d}-{n:05d}.tsv", lines)


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


# -- pure parts -------------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "result"), [
    ("http://a.test/x\thttp://b.test\t20261122000000\n", ("http://a.test/x", "http://b.test")),
    ("http://a.test/x\thttp://b.test\n", "expected 3 tab-separated fields, found 2"),
    ("http://a.test/x\tb.test\t20261122000000", "linking site 'b.test' is not an origin"),
    ("http://a.test/x\thttp://b.test/p\t20261122000000", "linking site 'http://b.test/p' is not an origin"),
    ("http://a.test/x\thttp://b.test\t2026-11-22", "time '2026-11-22' is not 14 digits"),
])
def test_parse_spool_line(line, result):
    assert parse_line(line) == result


def test_false_positive_rate_at_design_load_is_within_its_bound():
    expected, bits_per_url = 100_000, 16
    bitmap = BloomBitmap(expected * bits_per_url, optimal_hashes(bits_per_url))
    bound = false_positive_rate(bitmap.bits, expected, bitmap.hashes)
    assert bound < 1e-3                                    # 16 bits per URL: about 0.05 %
    for n in range(expected):
        bitmap.add(f"http://site{n % 997}.test/page/{n}")     # a few are already false positives
    probes = 400_000
    false = sum(f"http://other{n % 991}.test/doc/{n}" in bitmap for n in range(probes))
    # 400,000 probes at ~4.6e-4 expect ~185 false positives; 1.25x leaves > 3 standard deviations.
    assert 0 < false / probes <= bound * 1.25


# -- the batch ------------------------------------------------------------------------------

def test_batch_queues_new_urls_counts_distinct_linking_sites_and_keeps_a_ledger(tmp_path):
    cfg = links_config(tmp_path)
    root = cfg.root
    write_spool(root, "0-20261122000000-00001.tsv", [
        "http://A.test/one\thttp://x.test\t20261122000000",
        "http://a.test/one\thttp://y.test\t20261122000000",      # same URL once normalised
        "http://a.test/two\thttp://x.test\t20261122000000",      # x -> a again: one in-link
        "http://b.test:80/\thttp://x.test\t20261122000000",
        "http://a.test/self\thttp://a.test\t20261122000000",     # a site's link to itself
    ])
    write_spool(root, "1-20261122000001-00001.tsv.open", ["http://c.test/\thttp://x.test\t20261122000000"])
    totals = run_batch(cfg, once=True)
    assert (totals.files, totals.lines, totals.new_urls, totals.new_sites) == (1, 5, 4, 2)
    sites, queues = snapshot(root, 2)
    assert {o: s[1:] for o, s in sites.items()} == {
        "http://a.test": ("waiting", 2), "http://b.test": ("waiting", 1)}
    for origin, (owner, *_) in sites.items():
        assert owner == process_for(origin, 2)             # one queue only, the owner's
    assert queues["http://a.test"] == ["http://a.test/one", "http://a.test/two", "http://a.test/self"]
    assert queues["http://b.test"] == ["http://b.test/"]
    assert not (root / "outlinks" / "0-20261122000000-00001.tsv").exists()
    assert (root / "outlinks" / "done" / "0-20261122000000-00001.tsv").exists()
    assert (root / "outlinks" / "1-20261122000001-00001.tsv.open").exists()   # never read open files
    # The same file again (an operator copying it back): the ledger makes it a no-op.
    shutil.copy(root / "outlinks" / "done" / "0-20261122000000-00001.tsv", root / "outlinks")
    assert run_batch(cfg, once=True).files == 0
    # New links: a site done gets woken, in-links grow, and nothing known is queued again.
    with SiteQueue(queue_path(root, process_for("http://b.test", 2))) as q:
        q.finish("http://b.test")
    write_spool(root, "0-20261122000100-00002.tsv", [
        "http://b.test/new\thttp://z.test\t20261122000100",
        "http://a.test/one\thttp://z.test\t20261122000100",
    ])
    totals = run_batch(cfg, once=True)
    assert (totals.new_urls, totals.new_sites) == (1, 0)
    sites, queues = snapshot(root, 2)
    assert sites["http://b.test"][1:] == ("waiting", 2) and sites["http://a.test"][1:] == ("waiting", 3)
    assert queues["http://b.test"] == ["http://b.test/", "http://b.test/new"]
    assert [p.name for p in (root / "links").glob("bitmap-*")] == ["bitmap-2.bloom"]


def test_malformed_lines_are_counted_and_reported_with_file_and_line(tmp_path):
    cfg = links_config(tmp_path)
    write_spool(cfg.root, "0-20261122000000-00001.tsv", [
        "http://a.test/\thttp://x.test\t20261122000000",
        "garbage",
        "mailto:someone@a.test\thttp://x.test\t20261122000000",
        "http://b.test/\thttp://x.test\t20261122000000",
    ])
    done = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "4 URLs read, 2 new URLs, 2 new sites, 2 bad lines" in done.stdout
    bad = [line for line in done.stderr.splitlines() if "spool-bad-line" in line]
    assert len(bad) == 2
    assert "0-20261122000000-00001.tsv" in bad[0] and "line=2" in bad[0]
    assert "line=3" in bad[1] and "not an http(s) URL" in bad[1]
    assert "fp_at_design_load=" in done.stderr           # the bitmap's bound, reported at start


def test_a_batch_killed_halfway_then_rerun_equals_one_clean_run(tmp_path):
    clean, killed = links_config(tmp_path / "clean"), links_config(tmp_path / "killed")
    synthetic_spool(clean.root)
    synthetic_spool(killed.root)
    assert run_batch(clean, once=True).checkpoints > 3
    proc = subprocess.Popen([*ARCHIVER, "links", "run", "--once", "--config", str(killed.path)],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:                      # wait for a checkpoint, then kill mid-run
        if "links-checkpoint" in line and "generation=2" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    with LinkBatch(killed) as batch:               # it really stopped halfway
        assert batch.generation > 0 and batch.pending_files()
    rerun = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(killed.path)],
                           capture_output=True, text=True, timeout=120, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert snapshot(killed.root, 2) == snapshot(clean.root, 2)


def test_missing_bitmap_is_a_clear_error(tmp_path):
    cfg = links_config(tmp_path)
    write_spool(cfg.root, "0-20261122000000-00001.tsv", ["http://a.test/\thttp://x.test\t20261122000000"])
    assert run_batch(cfg, once=True).new_urls == 1
    (cfg.root / "links" / "bitmap-1.bloom").unlink()
    done = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "bitmap-1.bloom is missing" in done.stderr


# -- two crawler processes fed by the batch -----------------------------------------------

def batch_once(cfg: config.Config):
    with LinkBatch(cfg) as batch:
        return batch.run(once=True)


async def crawl_round(cfg: config.Config) -> None:
    async with trio.open_nursery() as nursery:
        for process in range(cfg.crawl.processes):
            nursery.start_soon(Crawler(cfg, process=process, until_idle=True).run)


async def test_alternating_crawls_and_batches_archive_the_whole_web_one_process_per_site(tmp_path):
    async with trio.open_nursery() as nursery:
        # Sites hash to processes by origin, port included: take a port where the sites the seed
        # leads to belong to both processes (about one port in 30 gives them all to one).
        while True:
            web, server = await start_demo(nursery, WebSpec(sites=6, pages_per_site=6, port=0,
                                                            trap=False))
            reached = web.expected("archiver", all_sites=False)
            if len({process_for(urls.origin(u), 2) for u in reached}) == 2:
                break
        path = write_config(tmp_path, web, processes=2)
        path.write_text(path.read_text() + LINKS.format(checkpoint=100_000))
        cfg = config.load(path)
        # Process 0 is given the one seed; if its site belongs to process 1, it is handed over.
        enqueue_seeds(cfg, 0, web.seeds())
        rounds = 0
        while True:
            await crawl_round(cfg)
            totals = await trio.to_thread.run_sync(batch_once, cfg)
            rounds += 1
            if totals.new_urls == 0 and totals.new_sites == 0:
                break
            assert rounds < 20
        nursery.cancel_scope.cancel()
    expected = web.expected(cfg.crawl.user_agent, all_sites=False)
    assert rounds > 3                                      # the sites form a chain of links
    got = captures(cfg.root)
    assert expected <= set(got)
    requests = Counter(f"http://{r.host}:{web.spec.port}{r.target}" for r in server.log
                       if not r.host.startswith("robots500."))   # retried: robots.txt each time
    assert max(requests.values()) == 1                     # no URL fetched twice by anyone
    origins = {urls.origin(u) for u in got}
    owners = {o: process_for(o, 2) for o in origins}
    assert set(owners.values()) == {0, 1}                  # both processes had work
    for origin, process in owners.items():
        assert origin in _sites_in_warcs(cfg.root, process), origin
        assert origin not in _sites_in_warcs(cfg.root, 1 - process), origin


def _sites_in_warcs(root: Path, process: int) -> set[str]:
    found = set()
    for warc in warc_files(root):
        if int(warc.name.split("-")[2]) != process:
            continue
        with warc.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type in ("response", "revisit"):
                    found.add(urls.origin(record.rec_headers.get_header("WARC-Target-URI")))
    return found


def test_seeds_go_to_their_owners_queue_and_a_busy_site_gets_them_in_its_inbox(tmp_path):
    cfg = links_config(tmp_path, processes=3)
    seeds = [f"http://s{n}.test/start" for n in range(30)]
    # s0 is being crawled right now
    with open_stores(cfg).crawl_queues().open("http://s0.test") as crawl_queue:
        crawl_queue.add("http://s0.test/", 0)
        enqueue_seeds(cfg, 1, seeds)
        enqueue_seeds(cfg, 2, seeds)                   # seeded twice: still one queue each
    sites, queues = snapshot(cfg.root, 3)
    assert set(sites) == {f"http://s{n}.test" for n in range(30)}
    for origin, (owner, state, _) in sites.items():
        assert owner == process_for(origin, 3) and state == "waiting"
        assert queues[origin] == [origin + "/", origin + "/start"]
    assert len({owner for owner, *_ in sites.values()}) == 3


def test_a_second_crawler_with_the_same_process_number_is_refused(tmp_path):
    cfg = links_config(tmp_path)
    first = Crawler(cfg, process=1)
    try:
        done = subprocess.run([*ARCHIVER, "crawl", "--process", "1", "--until-idle", "--config",
                               str(cfg.path)], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2 and "crawler process 1 is already running" in done.stderr
    finally:
        first.close()
    other = Crawler(cfg, process=1)                   # released on close
    other.close()


def test_a_second_links_batch_is_refused_while_one_runs(tmp_path):
    cfg = links_config(tmp_path)
    with LinkBatch(cfg):
        done = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2 and "links is already running" in done.stderr
    with LinkBatch(cfg) as again:                     # released on exit
        assert again.run(once=True).files == 0
