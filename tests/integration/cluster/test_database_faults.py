"""Two crawler processes, each with its own local directory, sharing PostgreSQL and an S3 bucket,
crawl the demo web while PostgreSQL restarts (``pg_ctl restart -m immediate``) or its primary
fails over to a streaming standby behind a multi-host URL: each crawler waits for the database
and goes on, and the crawl finishes with nothing lost and nothing catalogued twice.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from archiver.store.postgres.status import PgStatus
from demoweb import WebSpec, run_demo_process
from tests.support.cluster import archivable, check_archive, overlapping, requests, shared_config, wait_for
from tests.support.crawls import load, write_seeds
from tests.support.objectstore import S3Bucket
from tests.support.postgres import store_database
from tests.support.repo import ARCHIVER

# Long next to an outage (a second or two): no lease expires while the database is away.
LEASE_TTL = 10.0
WARC = {"max_age": 2.0, "sync_interval": 0.5}


def crawl_through_fault(tmp_path: Path, url: str, bucket: S3Bucket,
                        fault: Callable[[list[Path], list[Path]], None]
                        ) -> tuple[list[str], list[dict], float]:
    """Two crawlers crawl the demo web; ``fault(their configs, their stderr files)`` runs once
    they are well under way. Checks that the bucket and the catalog hold every page the web
    serves, once, in valid WARCs, and that no host saw two connections at once; the crawlers'
    stderr, the web's request log, and the time the fault was over."""
    spec = WebSpec(sites=4, pages_per_site=30, port=0, trap=False)
    log = tmp_path / "requests.jsonl"
    with run_demo_process(spec, log_path=log) as (web, _port, _proc):
        configs = [shared_config(tmp_path / f"machine{n}", web, store_url=url, bucket=bucket,
                                 warc=WARC, min_rest=0.1, lease_ttl=LEASE_TTL, poll_interval=0.2,
                                 sites_per_process=2)  # the two share the sites
                   for n in range(2)]
        seeds = write_seeds(tmp_path / "seeds.txt", [o + "/" for o in web.origins()])
        queued = subprocess.run([*ARCHIVER, "seeds", "--config", str(configs[0]), str(seeds)],
                                capture_output=True, text=True, timeout=60, check=False)
        assert queued.returncode == 0, queued.stderr
        errs = [config.parent / "stderr.log" for config in configs]
        crawlers = []
        for n, (config, err) in enumerate(zip(configs, errs, strict=True)):
            with err.open("w") as out:
                crawlers.append(subprocess.Popen(
                    [*ARCHIVER, "crawl", "run", "--config", str(config), "--process", str(n),
                     "--until-idle"], stdout=subprocess.DEVNULL, stderr=out))
        try:
            wait_for(lambda: len(requests(log)) >= 30, "the crawl to be under way")
            fault(configs, errs)
            over = time.time()
        finally:
            for proc in crawlers:
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:  # (the test fails; no crawler outlives it)
                    proc.kill()
                    proc.wait()
                    raise
        outputs = [err.read_text() for err in errs]
        entries = requests(log)
    for proc, err in zip(crawlers, outputs, strict=True):
        assert proc.returncode == 0, err[-3000:]
    assert not overlapping(entries), overlapping(entries)[:3]

    expected = archivable(web)
    check = check_archive(load(configs[0]), url, expected, tmp_path / "downloaded")
    assert check.warcs_valid and not check.duplicates, "a capture was catalogued twice"
    assert not check.uncatalogued and not check.unserved  # the catalog and the bucket agree
    assert not check.missing, sorted(check.missing)[:5]
    for config_path in configs:  # nothing left behind on a machine's disk
        assert not list((load(config_path).root / "bundles").glob("*.warc.gz*"))
    return outputs, entries, over


def assert_waited_for_the_database(outputs: list[str], url: str) -> None:
    """Each crawler logged the outage with its cause, and its end, and counted both in its
    status (``archiver status``, /metrics ``archiver_faults_total``)."""
    for err in outputs:
        unavailable = re.findall(r"event=store-unavailable (.*)", err)
        assert unavailable and "store=database" in unavailable[0] and "cause=" in unavailable[0], err[-3000:]
        assert re.search(r"event=store-recovered .*after=", err), err[-3000:]
        assert len(unavailable) == err.count("event=store-recovered") == 1  # one outage, once
    status = PgStatus(url)
    try:
        rows = status.read_all()
    finally:
        status.close()
    assert len(rows) == 2 and all(row["pages"] > 0 for row in rows)  # both crawled
    faults = [row["faults"] for row in rows]
    assert all(f.get("store-unavailable") == f.get("store-recovered") == 1 for f in faults), faults


def test_crawlers_wait_out_a_database_crash_restart_and_lose_nothing(tmp_path, own_postgres, s3_bucket):
    url = store_database(own_postgres)
    outputs, entries, over = crawl_through_fault(
        tmp_path, url, s3_bucket, lambda _configs, _errs: own_postgres.restart("immediate"))
    assert_waited_for_the_database(outputs, url)
    assert any(e["start"] > over for e in entries), "the crawl did not go on after the restart"


def test_crawlers_follow_a_failover_to_the_promoted_standby_and_lose_nothing(
        tmp_path, replicated_postgres, s3_bucket):
    primary, standby, url = replicated_postgres

    def fail_over(configs: list[Path], errs: list[Path]) -> None:
        """The primary stops; the standby is promoted once every crawler says, on its progress
        line and in its local status (its status in the database cannot be written meanwhile),
        that it waits for the database."""
        primary.stop("fast")
        wait_for(lambda: all(re.search(r"event=progress .*waiting_for=database", err.read_text())
                             for err in errs), "the crawlers to say they wait for the database")
        status = subprocess.run([*ARCHIVER, "status", "--config", str(configs[0])],
                                capture_output=True, text=True, timeout=60, check=False)
        assert status.returncode == 2 and "from their local status files" in status.stderr, status
        assert "waiting_for=database" in status.stdout, status.stdout
        standby.promote()

    outputs, entries, over = crawl_through_fault(tmp_path, url, s3_bucket, fail_over)
    assert not primary.is_running()
    assert_waited_for_the_database(outputs, url)
    assert any(e["start"] > over for e in entries), "the crawl did not go on after the failover"
