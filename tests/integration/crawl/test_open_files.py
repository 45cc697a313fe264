"""A crawl of many sites runs within a small limit of open files (``ulimit -n 256``).

The crawler runs as a child process with ``RLIMIT_NOFILE`` 256, soft and hard, over a demo web of
more sites than shard connections fit in that limit: a first pass, then a recrawl (whose lookups
open the catalog's shards in a second handle). Both finish with every page captured, and the
descriptors the process held, sampled from ``/proc``, stay under the limit."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from archiver.crawl.openfiles import FileLimitError, budget
from demoweb import WebSpec, run_demo_process
from tests.support.crawls import captures, load, records, write_config

LIMIT = 256
SITES = 120  # about 110 shards of the 1000 touched, in each of the two catalog handles
# 16 sites at once: before the budget, two handles of 32 shard connections and the sites' files
# went past 256 (EMFILE in the recrawl).
GUARD = 300  # seconds: a hung crawl fails instead of hanging the suite


def _crawl(config: Path, seeds: Path, *more: str, hard: int = LIMIT
           ) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run ``archiver crawl --until-idle`` with RLIMIT_NOFILE ``LIMIT`` soft and ``hard`` hard:
    its outcome, and the most descriptors it held at once."""
    proc = subprocess.Popen([sys.executable, "-m", "archiver", "crawl", "run", "--config", str(config),
                             "--seeds", str(seeds), "--until-idle", *more], cwd=config.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                                  (LIMIT, hard)))
    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            with contextlib.suppress(OSError):
                peak[0] = max(peak[0], len(os.listdir(f"/proc/{proc.pid}/fd")))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=GUARD)
    finally:
        stop.set()
        sampler.join()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), peak[0]


def test_a_crawl_of_many_sites_finishes_under_ulimit_256(tmp_path):
    with run_demo_process(WebSpec(sites=SITES, pages_per_site=2, port=0, trap=False)) as (web, _, _):
        config = write_config(tmp_path, web, sites_per_process=16)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(f"{origin}/\n" for origin in web.origins()))
        first, first_peak = _crawl(config, seeds)
        again, again_peak = _crawl(config, seeds, "--recrawl")
    for run in (first, again):
        assert run.returncode == 0, run.stderr[-3000:]
        assert "Too many open files" not in run.stderr
        assert "event=open-files limit=256" in run.stderr
    expected = web.expected("archiver") - {u for u in web.expected("archiver") if "robots500" in u}
    # Every page twice: once a pass (the recrawl writes a response or a revisit for each).
    root = load(config).root
    seen = captures(root) + Counter(r.rec_headers.get_header("WARC-Target-URI")
                                    for r, _ in records(root, "revisit"))
    assert {url for url in expected if seen[url] < 2} == set()
    assert max(first_peak, again_peak) < LIMIT, (first_peak, again_peak)


def test_a_limit_too_low_for_the_sites_is_refused_with_what_to_raise(tmp_path):
    with run_demo_process(WebSpec(sites=3, pages_per_site=2, port=0, trap=False)) as (web, _, _):
        config = write_config(tmp_path, web)  # 64 sites at once: more than 256 descriptors
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"{web.origins()[0]}/\n")
        run, _ = _crawl(config, seeds)
    assert run.returncode == 2
    assert "crawl.sites_per_process = 64 needs at least 695" in run.stderr
    assert "Traceback" not in run.stderr
    with pytest.raises(FileLimitError):  # the same rule, as the crawler applies it
        budget(LIMIT, 64, 1000)


def test_the_soft_limit_is_raised_to_the_hard_one(tmp_path):
    with run_demo_process(WebSpec(sites=3, pages_per_site=2, port=0, trap=False)) as (web, _, _):
        config = write_config(tmp_path, web)  # 64 sites at once: too many for 256, not for 4096
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"{web.origins()[0]}/\n")
        run, _ = _crawl(config, seeds, hard=4096)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "event=open-files limit=4096 hard=4096 was=256 sites=64 catalog_connections=128" in (
        run.stderr)
