"""A cluster of crawler processes, each with its own local directory, sharing one PostgreSQL
store and one S3 bucket. One is killed with SIGKILL part-way and its directory deleted, as if its
machine vanished; the survivors take over its sites once its leases expire, and finish the crawl,
with nothing lost: also when the loss of its unshipped bundle is found after its sites finished.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections import Counter, defaultdict

import psycopg

from archiver.store.catalog_maintenance import ObjectWarcs
from archiver.store.objectstore import open_object
from archiver.store.postgres.catalog import PgCatalog
from archiver.store.s3.objectstore import S3Store
from archiver.store.warcindex import index_stream
from demoweb import WebSpec, run_demo_process
from tests.support.cluster import (
    AGENT,
    Cluster,
    archivable,
    check_archive,
    install_write_log,
    lease_breaches,
    overlapping,
    requests,
    shared_config,
    wait_for,
)
from tests.support.crawls import FAST, load, warcio_check, write_seeds
from tests.support.repo import ARCHIVER

LEASE_TTL = 3.0
# What a kill may cost in fetches made twice: see docs/cluster.md.
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
            return subprocess.Popen([*ARCHIVER, "crawl", "run", "--config", str(configs[n]),
                                     "--process", str(n), *extra],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

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

    expected = archivable(web)
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
                   for n in re.findall(r"event=bundle-lost .*?requeued=(\d+)", err))
    refetched = sum(again[p] for p in (1, 2) if p not in stalled)
    assert refetched <= requeued, f"{refetched} survivors' captures made again, {requeued} refetches"
    kill = again[0] + refetched
    assert kill <= len(expected) // 4, f"{kill} captures made again of {len(expected)} URLs"
    for proc_config in configs[1:]:
        local = load(proc_config).root / "bundles"
        assert not list(local.glob("*.warc.gz")), "a closed bundle stayed on a survivor's disk"


def test_a_machine_lost_after_its_sites_finished_loses_nothing(tmp_path, pg_store_url, s3_bucket):
    """The doomed machine keeps its bundle open (``warc.max_age`` 600 s) while it crawls one site
    after another, and vanishes with some finished and one under way. The survivor takes that one
    over as its lease expires (2 s), and finishes every site well before it takes the doomed
    machine for gone (its own ``lease_ttl``, 9 s, is how old a heartbeat must be): the loss is
    found on finished sites, which become due again, and every URL the lost bundle held is
    fetched again, once; the survivor, ``--until-idle``, waits for that before it exits."""
    spec = WebSpec(sites=4, pages_per_site=30, port=0, trap=False)
    log = tmp_path / "requests.jsonl"
    install_write_log(pg_store_url)
    with run_demo_process(spec, log_path=log) as (web, _port, _proc):
        cluster = Cluster(tmp_path, web, store_url=pg_store_url, bucket=s3_bucket)
        try:
            cluster.configure(0, warc={"max_age": 600.0, "sync_interval": 0.5}, lease_ttl=2.0,
                              min_rest=0.05, sites_per_process=1)
            cluster.configure(1, warc=WARC, lease_ttl=9.0)
            cluster.seed([origin + "/" for origin in web.origins()])
            cluster.start(0)
            wait_for(lambda: finished_and_under_way(pg_store_url), "the doomed machine to finish a"
                     " site and be well into another")
            cluster.kill(0)
            cluster.start(1, "--until-idle")
            out = cluster.wait(1, timeout=180)
        finally:
            cluster.close()
        log_entries = requests(log)

    expected = archivable(web)
    check = check_archive(load(cluster.configs[1]), pg_store_url, expected, tmp_path / "bucket")
    assert check.missing == set(), (len(check.missing), sorted(check.missing)[:10])
    lost = [dict(re.findall(r"(\w+)=(\d+)", line)) for line in out.splitlines()
            if "event=bundle-lost" in line]
    assert len(lost) == 1 and int(lost[0]["woken"]) >= 1, lost        # found on finished sites
    assert not check.uncatalogued and not check.unserved and check.warcs_valid
    assert check.twice == {}, check.twice
    # What the loss cost: the survivor fetched each URL once (robots.txt aside, once a visit).
    fetched = Counter((e["host"], e["target"]) for e in log_entries
                      if e["agent"] == AGENT.format(1) and not e["target"].startswith("/robots"))
    assert max(fetched.values()) == 1, [key for key, n in fetched.items() if n > 1][:10]
    assert not overlapping(log_entries), overlapping(log_entries)[:3]
    roles = {AGENT.format(n): cluster.role(n) for n in (0, 1)}
    assert not lease_breaches(pg_store_url, log_entries, roles)
    assert cluster.faults(1) == {"bundle-lost": 1}


def finished_and_under_way(store_url: str) -> bool:
    """A site is finished (done, or waiting for a revisit) and another, active, has its cursor
    past its tenth URL."""
    with psycopg.connect(store_url, autocommit=True) as db:
        return db.execute(
            "SELECT count(*) FILTER (WHERE s.state IN ('done', 'revisit')) > 0 AND count(*) FILTER"
            " (WHERE s.state = 'active' AND c.cursor >= 10) > 0"
            " FROM sites AS s LEFT JOIN crawl_cursors AS c USING (origin)").fetchone()[0]


def bundle_process(name: str) -> int:
    """The crawler process that wrote a bundle (``<prefix>-<time>-<process>-<serial>.warc.gz``)."""
    return int(name.split("-")[-2])
