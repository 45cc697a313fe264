"""A machine frozen (SIGSTOP) past its lease TTL and continued (SIGCONT): another machine took its
sites meanwhile, and found its open bundle lost; the late one neither fetches for those sites
again nor writes to their queues (fenced by the lease epoch: events ``lease-lost`` and
``fenced-write``), ships its bundle of that time, and the crawl ends with nothing lost."""

from __future__ import annotations

import re
from collections import Counter
from urllib.parse import urlsplit

import psycopg

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
    wait_for,
)
from tests.support.crawls import load

LEASE_TTL = 3.0


def test_a_machine_frozen_past_its_lease_ttl_writes_nothing_for_the_sites_it_lost(
        tmp_path, pg_store_url, s3_bucket):
    spec = WebSpec(sites=4, pages_per_site=50, port=0, trap=False)
    log = tmp_path / "requests.jsonl"
    install_write_log(pg_store_url)
    with run_demo_process(spec, log_path=log) as (web, _port, _proc):
        sites = {urlsplit(o).hostname for o in web.origins() if "robots500" not in o}  # that one defers

        def fetched_by(n: int, after: float = 0.0) -> list[dict]:
            return [e for e in requests(log) if e["agent"] == AGENT.format(n) and e["start"] > after]

        cluster = Cluster(tmp_path, web, store_url=pg_store_url, bucket=s3_bucket)
        try:
            # The frozen machine keeps one bundle open (warc.max_age), unshipped when it freezes,
            # and rests longer between fetches: a freeze that falls between a fetch's lease check
            # and its request would send that request after it is continued.
            cluster.configure(0, warc={"max_age": 600.0, "sync_interval": 0.5}, lease_ttl=LEASE_TTL,
                              min_rest=0.2)
            cluster.configure(1, warc={"max_age": 2.0, "sync_interval": 0.5}, lease_ttl=LEASE_TTL)
            cluster.seed([origin + "/" for origin in web.origins()])
            cluster.start(0, "--until-idle")
            wait_for(lambda: {e["host"] for e in fetched_by(0)} >= sites and len(fetched_by(0)) >= 30,
                     "the first machine to crawl every site")
            frozen = cluster.freeze(0)
            cluster.start(1, "--until-idle")
            wait_for(lambda: {e["host"] for e in fetched_by(1)} >= sites
                     and "event=bundle-lost" in cluster.log(1),
                     "the other machine to take every site and find the frozen one's bundle lost",
                     timeout=90)
            thawed = cluster.thaw(0)
            late = cluster.wait(0, timeout=180)
            cluster.wait(1, timeout=180)
        finally:
            cluster.close()
        log_entries = requests(log)

    # Nothing lost, nothing catalogued twice, and the frozen machine's bundle shipped and indexed.
    expected = archivable(web)
    check = check_archive(load(cluster.configs[1]), pg_store_url, expected, tmp_path / "bucket")
    assert check.missing == set(), (len(check.missing), sorted(check.missing)[:10])
    assert not check.duplicates and not check.uncatalogued and not check.unserved, check
    assert check.warcs_valid
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        bundles = db.execute("SELECT process, state FROM bundles").fetchall()
        stale = db.execute("SELECT c.origin FROM crawl_cursors c JOIN sites s USING (origin)"
                           " WHERE c.epoch <> s.epoch").fetchall()
    assert {state for _, state in bundles} == {"shipped"} and {0, 1} <= {p for p, _ in bundles}
    assert stale == []                 # every crawl queue last written under its site's newest lease
    # What the freeze cost: a URL of its lost bundle fetched again, once at most.
    fetched = Counter((e["host"], e["target"]) for e in log_entries if e["target"] != "/robots.txt")
    assert max(fetched.values()) <= 2, [key for key, n in fetched.items() if n > 2][:10]
    # The frozen machine's sites went to the other machine while it was frozen, and it fetched
    # nothing once continued: never two machines on one site, no write without the lease.
    assert min(e["start"] for e in fetched_by(1)) > frozen
    assert fetched_by(0, after=thawed) == []
    assert not overlapping(log_entries), overlapping(log_entries)[:3]
    roles = {AGENT.format(n): cluster.role(n) for n in (0, 1)}
    assert not lease_breaches(pg_store_url, log_entries, roles)
    # Each lease lost is reported once, each refused write too, and both are counted.
    lost = Counter(re.findall(r"event=lease-lost site=http://([^:/]+)", late))
    fenced = re.findall(r"event=fenced-write ", late)
    assert set(lost) >= sites and set(lost.values()) == {1}, lost
    assert fenced, late[-3000:]
    faults = cluster.faults(0)
    assert faults["lease-lost"] == sum(lost.values()) and faults["fenced-write"] == len(fenced), faults
    assert cluster.faults(1)["bundle-lost"] >= 1
