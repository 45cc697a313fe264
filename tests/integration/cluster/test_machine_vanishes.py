"""A cluster of three crawler processes, each with its own local directory, sharing one PostgreSQL
store and one S3 bucket. One is killed with SIGKILL part-way and its directory deleted, as if its
machine vanished; the survivors take over its sites once its leases expire, and finish the crawl.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections import Counter, defaultdict

from archiver.store.catalog_maintenance import ObjectWarcs
from archiver.store.objectstore import S3Store, open_object
from archiver.store.pgcatalog import PgCatalog
from archiver.store.warcindex import index_stream
from demoweb import WebSpec, run_demo_process
from tests.support.cluster import overlapping, requests, shared_config, wait_for
from tests.support.crawls import FAST, load, warcio_check, write_seeds
from tests.support.repo import ARCHIVER

LEASE_TTL = 3.0
# What a kill may cost in fetches made twice: see README "Running on several machines".
WARC = {"max_age": 2.0, "sync_interval": 0.5}


def test_survivors_finish_the_sites_of_a_crawler_that_vanished(tmp_path, pg_store_url, s3_bucket):
    spec = WebSpec(sites=6, pages_per_site=40, port=0, trap=False)
    log = tmp_path / "requests.jsonl"
    with run_demo_process(spec, log_path=log) as (web, _port, _proc):
        # The doomed crawler's pace sets what its kill costs; the survivors crawl what is left at
        # the tests' usual pace.
        configs = [shared_config(tmp_path / f"machine{n}", web, store_url=pg_store_url, bucket=s3_bucket,
                                 warc=WARC, min_rest=min_rest, lease_ttl=LEASE_TTL, poll_interval=0.2)
                   for n, min_rest in enumerate([0.15, FAST["min_rest"], FAST["min_rest"]])]
        seeds = write_seeds(tmp_path / "seeds.txt", [o + "/" for o in web.origins()])
        queued = subprocess.run([*ARCHIVER, "seeds", "--config", str(configs[0]), str(seeds)],
                                capture_output=True, text=True, timeout=60, check=False)
        assert queued.returncode == 0, queued.stderr

        def crawler(n: int, *extra: str) -> subprocess.Popen[str]:
            return subprocess.Popen([*ARCHIVER, "crawl", "--config", str(configs[n]), "--process", str(n),
                                     *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

        doomed = crawler(0)
        try:
            wait_for(lambda: len(requests(log)) >= 60, "the first crawler to get going")
            survivors = [crawler(1, "--until-idle"), crawler(2, "--until-idle")]
            wait_for(lambda: len(requests(log)) >= 120, "the crawl to be well under way")
        finally:
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
        killed_at = time.time()
        shutil.rmtree(tmp_path / "machine0")
        outputs = []
        for proc in survivors:
            _, err = proc.communicate(timeout=240)
            outputs.append(err)
            assert proc.returncode == 0, err[-3000:]
        log_entries = requests(log)

    assert any("event=lease-expired" in err for err in outputs), "no survivor took over a site"
    assert not overlapping(log_entries), overlapping(log_entries)[:3]
    assert any(e["start"] > killed_at for e in log_entries)

    config = load(configs[1])
    store = S3Store.from_config(config.warc.store, config.s3)
    bundles = [name for name in store.list() if name.endswith(".warc.gz")]
    downloaded = tmp_path / "downloaded"
    downloaded.mkdir()
    indexed = set()
    for name in bundles:
        with open_object(store, name) as f:
            (downloaded / name).write_bytes(f.read())
        with open_object(store, name) as f:
            indexed |= {(c.filename, c.offset) for c in index_stream(f, name, name)}
    assert warcio_check(sorted(downloaded.iterdir())).returncode == 0

    catalog = PgCatalog(pg_store_url, config.catalog.shards, readonly=True)
    try:
        entries = list(catalog.iter_all())
    finally:
        catalog.close()
    # The catalog and the bucket agree both ways: every entry names bytes the store serves.
    assert {(c.filename, c.offset) for c in entries} == indexed
    reader = ObjectWarcs(store)
    for capture in entries[:: max(1, len(entries) // 50)]:
        assert reader.read(capture.filename, capture.offset, capture.length).url == capture.url

    expected = {u for u in web.expected("archiver") if "robots500" not in u}
    captured = Counter(c.url for c in entries if not c.url.endswith("/robots.txt"))
    assert set(captured) >= expected - {u for u in expected if u.endswith("/robots.txt")}
    # What the kill costs: URLs the vanished crawler captured (in a bundle it shipped) fetched
    # again by the survivors, from the cursor it last saved.
    by_url = defaultdict(list)
    for c in sorted(entries, key=lambda c: c.timestamp):
        if not c.url.endswith("/robots.txt"):
            by_url[c.url].append(bundle_process(c.filename))
    again = Counter(makers[0] for makers in by_url.values() for _ in makers[1:])
    # A survivor's capture is made again when its URL was also in a lost bundle of the vanished
    # crawler and the refetch came after the survivor had passed it: that counts as the kill's
    # cost too, and cannot exceed the URLs the lost bundles sent back. A survivor that stalled
    # past its lease TTL on this busy 2-core machine is taken for dead too: its own cost.
    stalled = {int(holder) for err in outputs
               for holder in re.findall(r"event=lease-expired site=\S+ holder=(\d+)", err)}
    requeued = sum(int(n) for err in outputs
                   for n in re.findall(r"event=bundle-lost bundle=\S+ requeued=(\d+)", err))
    refetched = sum(again[p] for p in (1, 2) if p not in stalled)
    assert refetched <= requeued, f"{refetched} survivors' captures made again, {requeued} refetches"
    kill = again[0] + refetched
    assert kill <= len(expected) // 4, f"{kill} captures made again of {len(expected)} URLs"
    for proc_config in configs[1:]:
        local = load(proc_config).root / "bundles"
        assert not list(local.glob("*.warc.gz")), "a closed bundle stayed on a survivor's disk"


def bundle_process(name: str) -> int:
    """The crawler process that wrote a bundle (``<prefix>-<time>-<process>-<serial>.warc.gz``)."""
    return int(name.split("-")[-2])
