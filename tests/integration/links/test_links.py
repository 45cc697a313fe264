"""The external-link batch as a command and with two crawler processes: bad lines, kills, locks."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from functools import partial
from pathlib import Path

import trio
from warcio.archiveiterator import ArchiveIterator

from archiver import config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.links.batch import LinkBatch, run_batch
from archiver.queues.embedded.linksstate import EmbeddedLinksState
from archiver.queues.sites import process_for
from archiver.web import urls
from demoweb import WebSpec, start_demo
from tests.support.crawls import captures, warc_files, write_config
from tests.support.linkbatch import LINKS, batch_once, links_config, snapshot, synthetic_spool, write_spool
from tests.support.repo import ARCHIVER


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


def test_a_run_that_compiles_the_loops_says_so_and_where_it_keeps_them(tmp_path):
    cfg = links_config(tmp_path)
    cache = tmp_path / "numba-cache"  # empty: the first run compiles, the second finds them
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    said = []
    for serial in (1, 2):
        write_spool(cfg.root, f"0-20261122000000-0000{serial}.tsv",
                    [f"http://a{serial}.test/\thttp://x.test\t20261122000000"])
        done = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                              capture_output=True, text=True, timeout=120, check=False, env=env)
        assert done.returncode == 0, done.stderr
        assert "1 URLs read, 1 new URLs" in done.stdout
        said.append([line for line in done.stderr.splitlines() if "links-loops-compiled" in line])
    assert len(said[0]) == 1 and f"cache={cache}" in said[0][0] and "loops=6" in said[0][0]
    assert said[1] == []


def test_a_batch_killed_halfway_then_rerun_equals_one_clean_run(tmp_path):
    clean, killed = links_config(tmp_path / "clean"), links_config(tmp_path / "killed")
    synthetic_spool(partial(write_spool, clean.root))
    synthetic_spool(partial(write_spool, killed.root))
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
    # Killed before its one push (at the end of the files): the committed sites wait, dirty, in
    # the state, and no site queue has them yet.
    state = EmbeddedLinksState(killed.root / "links")
    assert state.generation >= 2 and state.dirty_sites()
    state.close()
    assert snapshot(killed.root, 2) == ({}, {})
    with LinkBatch(killed) as batch:               # it really stopped halfway
        assert batch.generation > 0 and batch.pending_files()
    rerun = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(killed.path)],
                           capture_output=True, text=True, timeout=120, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert snapshot(killed.root, 2, marks=True) == snapshot(clean.root, 2, marks=True)


def test_a_missing_slice_is_a_clear_error(tmp_path):
    cfg = links_config(tmp_path)
    write_spool(cfg.root, "0-20261122000000-00001.tsv", ["http://a.test/\thttp://x.test\t20261122000000"])
    assert run_batch(cfg, once=True).new_urls == 1
    (cfg.root / "links" / "slice-2of4-1.bloom").unlink()
    done = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "slice-2of4-1.bloom is missing" in done.stderr
    assert "archiver links reshard" in done.stderr


def test_a_missing_or_damaged_slice_is_rebuilt_by_the_reshard_its_error_names(tmp_path):
    cfg = links_config(tmp_path)
    write_spool(cfg.root, "0-20261122000000-00001.tsv", ["http://a.test/\thttp://x.test\t20261122000000"])
    assert run_batch(cfg, once=True).new_urls == 1
    (cfg.root / "links" / "slice-2of4-1.bloom").unlink()
    (cfg.root / "links" / "slice-0of4-1.bloom").write_bytes(b"damaged")
    run = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 1 and "`archiver links reshard`" in run.stderr
    reshard = subprocess.run([*ARCHIVER, "links", "reshard", "--slices", "4", "--config",
                              str(cfg.path)], capture_output=True, text=True, timeout=60, check=False)
    assert reshard.returncode == 0, reshard.stderr
    assert reshard.stderr.count("event=slice-unreadable") == 2
    write_spool(cfg.root, "0-20261122000000-00002.tsv", ["http://a.test/\thttp://x.test\t20261122000000",
                                                         "http://b.test/\thttp://x.test\t20261122000000"])
    assert run_batch(cfg, once=True).new_urls == 1          # a.test/ is in the rebuilt slices


def test_a_slice_cut_short_is_a_one_line_error_when_the_run_reads_it(tmp_path):
    cfg = links_config(tmp_path)
    write_spool(cfg.root, "0-20261122000000-00001.tsv", ["http://a.test/\thttp://x.test\t20261122000000"])
    assert run_batch(cfg, once=True).new_urls == 1
    with (cfg.root / "links" / "slice-1of4-1.bloom").open("r+b") as f:
        f.truncate(100)                                  # found out only once the run loads it
    write_spool(cfg.root, "0-20261122000000-00002.tsv", ["http://b.test/\thttp://x.test\t20261122000000"])
    done = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"archiver: links: {cfg.root / 'links' / 'slice-1of4-1.bloom'}: not a slice this batch "
        "wrote: Bloom layer: truncated bits; restore it, or rebuild every slice from the spool files "
        "done with `archiver links reshard`")
    assert "Traceback" not in done.stderr


# -- two crawler processes fed by the batch -----------------------------------------------

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
        # The rounds counted below depend on the pace: at the tests' usual 10 ms rests the web
        # was sometimes archived in 2 or 3 rounds; at 50 ms, always in 4.
        path = write_config(tmp_path, web, processes=2, min_rest=0.05)
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


def test_a_second_crawler_with_the_same_process_number_is_refused(tmp_path):
    cfg = links_config(tmp_path)
    first = Crawler(cfg, process=1)
    try:
        done = subprocess.run([*ARCHIVER, "crawl", "run", "--process", "1", "--until-idle", "--config",
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
