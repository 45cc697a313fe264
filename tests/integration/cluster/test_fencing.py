"""A lease holder paused (SIGSTOP) past its TTL and resumed: another process took its sites
meanwhile, and the late holder neither fetches for them again nor writes to their queues."""

from __future__ import annotations

import signal
import subprocess
import time
from urllib.parse import urlsplit

import psycopg

from demoweb import WebSpec, run_demo_process
from tests.support.cluster import overlapping, requests, shared_config, wait_for
from tests.support.crawls import FAST, write_seeds
from tests.support.repo import ARCHIVER

LEASE_TTL = 3.0


def test_a_holder_that_comes_back_late_is_fenced_off(tmp_path, pg_store_url, s3_bucket):
    spec = WebSpec(sites=4, pages_per_site=60, port=0, trap=False)
    log = tmp_path / "requests.jsonl"
    with run_demo_process(spec, log_path=log) as (web, _port, _proc):
        # The holder rests longer between fetches: a pause (SIGSTOP) that falls between a fetch's
        # lease check and its request would send that request after the resume. The taker crawls
        # the rest of the web at the tests' usual pace.
        configs = [shared_config(tmp_path / f"machine{n}", web, store_url=pg_store_url, bucket=s3_bucket,
                                 warc={"max_age": 2.0, "sync_interval": 0.5}, min_rest=min_rest,
                                 lease_ttl=LEASE_TTL, poll_interval=0.2, user_agent=f"archiver-test-{n}")
                   for n, min_rest in enumerate([0.2, FAST["min_rest"]])]
        seeds = write_seeds(tmp_path / "seeds.txt", [o + "/" for o in web.origins()])
        sites = {urlsplit(o).hostname for o in web.origins() if "robots500" not in o}  # that one defers
        subprocess.run([*ARCHIVER, "seeds", "--config", str(configs[0]), str(seeds)], check=True,
                       capture_output=True, timeout=60)

        def crawler(n: int, *extra: str) -> subprocess.Popen[str]:
            return subprocess.Popen([*ARCHIVER, "crawl", "--config", str(configs[n]), "--process", str(n),
                                     *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

        def fetched_by(n: int, after: float = 0.0) -> list[dict]:
            return [e for e in requests(log) if e["agent"] == f"archiver-test-{n}" and e["start"] > after]

        late = crawler(0)
        try:
            wait_for(lambda: {e["host"] for e in fetched_by(0)} >= sites
                     and len(fetched_by(0)) >= 30, "the first holder to crawl every site")
            late.send_signal(signal.SIGSTOP)
            paused = time.time()
            taker = crawler(1, "--until-idle")
            wait_for(lambda: {e["host"] for e in fetched_by(1)} >= sites,
                     "the other process to take every site", timeout=90)
            late.send_signal(signal.SIGCONT)
            resumed = time.time()
            _, taker_err = taker.communicate(timeout=240)
            assert taker.returncode == 0, taker_err[-3000:]
        finally:
            late.send_signal(signal.SIGCONT)
            late.send_signal(signal.SIGTERM)
            _, late_err = late.communicate(timeout=60)
        log_entries = requests(log)

    # Every site went to the taker while the holder was paused (its leases expired meanwhile).
    assert min(e["start"] for e in fetched_by(1)) > paused
    # The late holder fetched nothing after it came back: every site had gone to the taker.
    assert fetched_by(0, after=resumed) == []
    assert not overlapping(log_entries), overlapping(log_entries)[:3]
    assert "event=lease-lost" in late_err or "event=site-lost" in late_err
    assert late.returncode == 0, late_err[-3000:]
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        # Every crawl queue was last written under the newest lease of its site: no late write won.
        stale = db.execute("SELECT c.origin, c.epoch, s.epoch FROM crawl_cursors c JOIN sites s"
                           " USING (origin) WHERE c.epoch <> s.epoch").fetchall()
        assert stale == []
        assert db.execute("SELECT count(*) FROM sites"
                          " WHERE state NOT IN ('done', 'revisit', 'deferred')").fetchone() == (0,)
        holders = db.execute("SELECT DISTINCT holder FROM sites").fetchall()
        assert holders == [(None,)]
