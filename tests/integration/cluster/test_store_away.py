"""The object store away while crawlers run: its endpoint is stopped part-way through a crawl of
the demo web and started again on the same port (tools.s3server.StoppableEndpoint; moto keeps
its objects meanwhile, as a real store does). The crawlers keep their closed bundles on their
own disks, go on fetching (up to ``warc.local_limit``, then pause), ship the bundles once the
store is back and delete each local copy only after the store holds its exact bytes; nothing is
lost and nothing catalogued twice. Replay answers 503 with Retry-After meanwhile, never 404."""

from __future__ import annotations

import contextlib
import http.client
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from demoweb import WebSpec, run_demo_process
from tests.support.cluster import archivable, check_archive, overlapping, requests, shared_config, wait_for
from tests.support.crawls import load, write_seeds
from tests.support.repo import ARCHIVER

WARC = {"max_age": 1.0, "sync_interval": 0.3, "max_size": 60_000}
OUTAGE = 6.0  # seconds the store is away at least (the 60, shortened for CI)
S3_TIMEOUT = 0.5  # s3.timeout: a hung store holds each attempt this long


def crawler(config: Path, process: int, *extra: str) -> subprocess.Popen[str]:
    """``archiver crawl``, its log in ``stderr_of(config)`` (a file: a pipe nobody reads while
    the test waits would fill and block it)."""
    with stderr_of(config).open("w") as stderr:
        return subprocess.Popen([*ARCHIVER, "crawl", "run", "--config", str(config),
                                 "--process", str(process), *extra],
                                stdout=subprocess.DEVNULL, stderr=stderr, text=True)


def stderr_of(config: Path) -> Path:
    return config.with_name("crawler.log")


def seed(config: Path, web, directory: Path) -> None:
    seeds = write_seeds(directory / "seeds.txt", [o + "/" for o in web.origins()])
    subprocess.run([*ARCHIVER, "seeds", "--config", str(config), str(seeds)], check=True,
                   capture_output=True, timeout=60)


def status(config: Path) -> str:
    return subprocess.run([*ARCHIVER, "status", "--config", str(config)], capture_output=True,
                          text=True, timeout=60, check=True).stdout


def closed_bundles(config: Path) -> dict[str, bytes]:
    """The closed bundles on a machine's disk, read now (one may be shipped meanwhile)."""
    found = {}
    for path in (load(config).root / "bundles").glob("*.warc.gz"):
        with contextlib.suppress(FileNotFoundError):
            found[path.name] = path.read_bytes()
    return found


@pytest.mark.parametrize("fault", ["stop", "hang"])  # connections refused; never answered
def test_crawlers_keep_their_bundles_while_the_store_is_away_and_lose_nothing(
        tmp_path, pg_store_url, stoppable_bucket, fault):
    bucket, endpoint = stoppable_bucket.bucket, stoppable_bucket.endpoint
    spec = WebSpec(sites=6, pages_per_site=40, port=0, trap=False)
    log = tmp_path / "requests.jsonl"
    with run_demo_process(spec, log_path=log) as (web, _port, _proc):
        configs = [shared_config(tmp_path / f"machine{n}", web, store_url=pg_store_url, bucket=bucket,
                                 warc=WARC, min_rest=0.1, user_agent=f"archiver-test-{n}",
                                 sites_per_process=3)  # each machine takes half the sites
                   for n in range(2)]
        for config in configs:  # spool files closed every 2 outlinks: some wait too
            config.write_text(config.read_text().replace('region = "us-east-1"\n', 'region = "us-east-1"\n'
                                                         f"timeout = {S3_TIMEOUT}\n")
                              + "[spool]\nmax_lines = 2\n")
        roots = [load(config).root for config in configs]
        seed(configs[0], web, tmp_path)
        crawlers = [crawler(config, n, "--until-idle") for n, config in enumerate(configs)]
        try:
            wait_for(lambda: bucket.client.list_objects_v2(Bucket=bucket.name).get("KeyCount", 0) >= 2
                     and len(requests(log)) >= 40, "the crawl to ship its first bundles")
            getattr(endpoint, fault)()
            stopped = time.time()
            waited: dict[str, bytes] = {}

            def bundles_wait_on_both_disks() -> bool:
                found = [closed_bundles(config) for config in configs]
                for one in found:
                    waited.update(one)
                return all(found)

            wait_for(bundles_wait_on_both_disks, "closed bundles to wait on both machines' disks")
            spool_waited = set()

            def spool_files_wait() -> bool:
                spool_waited.update(p.name for root in roots for p in (root / "spool").glob("*.tsv"))
                return bool(spool_waited)

            wait_for(spool_files_wait, "closed spool files to wait")
            wait_for(lambda: time.time() - stopped > OUTAGE, "the outage to last", timeout=OUTAGE + 5)
            fetched_while_away = [e for e in requests(log) if e["start"] > stopped]
            endpoint.start()
            outputs = []
            for proc, config in zip(crawlers, configs, strict=True):
                proc.wait(timeout=240)
                outputs.append(err := stderr_of(config).read_text())
                assert proc.returncode == 0, err[-3000:]
        finally:
            for proc in crawlers:
                proc.kill()
                proc.wait()

        log_entries = requests(log)

    # The crawl went on while the store was away, and the bundles it made waited on the disks.
    assert len(fetched_while_away) >= 20
    assert not overlapping(log_entries)
    for err in outputs:
        assert re.search(r"event=store-unavailable store=objects error=\S", err), err[-3000:]
        assert "event=bundle-waiting bundle=" in err and " cause=" in err
        assert re.search(r"event=store-recovered store=objects away_s=\d", err)
    # Nothing lost: every page is in the bucket's WARCs and the catalog; no record catalogued twice.
    config = load(configs[0])
    check = check_archive(config, config.store.url, archivable(web), tmp_path / "downloaded")
    assert check.warcs_valid and not check.missing and not check.duplicates
    assert not check.uncatalogued and not check.unserved
    # Each bundle that waited is in the store byte for byte: deleted only once the store had it.
    assert waited and all(check.bundles.get(name) == data for name, data in waited.items())
    for root in roots:
        assert not list((root / "bundles").glob("*.warc.gz*")), "a bundle stayed local"
        assert not list((root / "spool").glob("*.tsv*")), "a spool file stayed local"
    # The spool files that waited were shipped too.
    shipped_spool = {item["Key"].rsplit("/", 1)[1] for item in bucket.client.list_objects_v2(
        Bucket=bucket.name, Prefix="crawl/outlinks/").get("Contents", [])}
    assert spool_waited <= shipped_spool
    with psycopg.connect(pg_store_url) as db:
        assert db.execute("SELECT count(*) FROM pending_captures").fetchone() == (0,)


@contextlib.contextmanager
def replay(config: Path) -> Iterator[tuple[str, str]]:
    """``archiver replay``: the (host:port) of its own pages and of archived content."""
    proc = subprocess.Popen([*ARCHIVER, "replay", "run", "--config", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        stderr = proc.stderr
        running = []
        for line in stderr:
            if found := re.search(r"Running on http://(127\.0\.0\.1:\d+)", line):
                running.append(found.group(1))
                if len(running) == 2:
                    break
        assert len(running) == 2, f"archiver replay exited with {proc.wait()}"
        threading.Thread(target=stderr.read, daemon=True).start()  # drained
        yield running[0], running[1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def get(where: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of a GET."""
    conn = http.client.HTTPConnection(where, timeout=60)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        body = answer.read()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, body
    finally:
        conn.close()


def test_past_its_local_limit_a_crawler_pauses_and_replay_answers_503_until_the_store_is_back(
        tmp_path, pg_store_url, stoppable_bucket):
    bucket, endpoint = stoppable_bucket.bucket, stoppable_bucket.endpoint
    spec = WebSpec(sites=3, pages_per_site=60, port=0, trap=False)
    log = tmp_path / "requests.jsonl"
    limit = 200_000
    with run_demo_process(spec, log_path=log) as (web, _port, _proc):
        config = shared_config(tmp_path / "machine0", web, store_url=pg_store_url, bucket=bucket,
                               warc={**WARC, "local_limit": limit}, min_rest=0.1)
        config.write_text(config.read_text() + '[replay]\nlisten = "127.0.0.1:0"\n'
                          'content_listen = "127.0.0.1:0"\n')
        seed(config, web, tmp_path)
        proc = crawler(config, 0, "--until-idle")
        db = psycopg.connect(pg_store_url, autocommit=True)
        try:
            with replay(config) as (pages, content):
                wait_for(lambda: db.execute("SELECT count(*) FROM catalog_captures"
                                            " WHERE status = 200").fetchone()[0] > 0,
                         "a bundle to be shipped and catalogued")
                endpoint.stop()
                stopped = time.time()
                wait_for(lambda: "waiting_for=objects" in status(config), "fetching to pause")
                paused = len(requests(log))
                # Replay meanwhile: a capture catalogued before, whose store is away, and a URL
                # whose captures wait in bundles on the crawler's disk: 503, never 404.
                timestamp, catalogued = db.execute("SELECT ts, url FROM catalog_captures"
                                                   " WHERE status = 200 AND NOT revisit LIMIT 1").fetchone()
                waiting = db.execute("SELECT url FROM pending_captures WHERE capture ->> 'status' = '200'"
                                     " AND capture ->> 'urlkey' NOT IN (SELECT urlkey FROM catalog_captures)"
                                     " LIMIT 1").fetchone()[0]
                away = [get(content, f"/web/{timestamp}id_/{catalogued}"),
                        get(pages, f"/web/{waiting}"), get(pages, f"/web/*/{waiting}"),
                        get(pages, f"/timemap/link/{waiting}")]
                wait_for(lambda: time.time() - stopped > OUTAGE, "the outage to last", timeout=OUTAGE + 60)
                fetched_while_paused = len(requests(log)) - paused
                endpoint.start()
                resumed = time.time()
                proc.wait(timeout=240)
                err = stderr_of(config).read_text()
                assert proc.returncode == 0, err[-3000:]
                back = [get(content, f"/web/{timestamp}id_/{catalogued}")[0],
                        get(pages, f"/web/{waiting}")[0]]
                metrics = get(pages, "/metrics")[2].decode()
        finally:
            db.close()
            proc.kill()
            proc.wait()
        log_entries = requests(log)

    assert not overlapping(log_entries)
    assert [answer[0] for answer in away] == [503] * 4
    assert all(int(answer[1]["retry-after"]) > 0 for answer in away)
    assert back == [200, 302]
    # Paused past the limit (a fetch in flight per site at most), resumed by itself once shipped.
    assert fetched_while_paused <= spec.sites
    assert any(e["start"] > resumed for e in log_entries)
    pause = re.search(r"event=local-limit bytes=(\d+) local_limit=(\d+)", err)
    assert pause and int(pause[1]) > int(pause[2]) == limit
    assert "event=local-limit-ok" in err and "event=store-recovered store=objects" in err
    for name in ("store-unavailable", "bundle-waiting", "store-recovered"):  # counted on /metrics
        assert re.search(rf'archiver_faults_total{{process="0",event="{name}"}} [1-9]', metrics), metrics
    loaded = load(config)
    check = check_archive(loaded, loaded.store.url, archivable(web), tmp_path / "downloaded")
    assert check.warcs_valid and not check.missing and not check.duplicates


def test_a_crawler_stopped_while_the_store_is_away_keeps_its_bundles_for_its_next_start(
        tmp_path, pg_store_url, stoppable_bucket):
    bucket, endpoint = stoppable_bucket.bucket, stoppable_bucket.endpoint
    spec = WebSpec(sites=3, pages_per_site=40, port=0, trap=False)
    log = tmp_path / "requests.jsonl"
    with run_demo_process(spec, log_path=log) as (web, _port, _proc):
        config = shared_config(tmp_path / "machine0", web, store_url=pg_store_url, bucket=bucket,
                               warc=WARC, min_rest=0.1, lease_ttl=2.0)
        root = load(config).root
        seed(config, web, tmp_path)
        proc = crawler(config, 0, "--until-idle")
        db = psycopg.connect(pg_store_url, autocommit=True)
        try:
            wait_for(lambda: "event=bundle-shipped" in stderr_of(config).read_text(),
                     "a bundle to be shipped")
            endpoint.stop()
            wait_for(lambda: "event=bundle-waiting" in stderr_of(config).read_text(),
                     "a bundle to wait on the disk")
            proc.terminate()  # SIGTERM: the crawler drains and closes its open files
            assert proc.wait(timeout=120) == 75  # EX_TEMPFAIL: try again later
            first = stderr_of(config).read_text()
            left = closed_bundles(config)
            endpoint.start()
            # Its number is taken until its heartbeat is older than crawl.lease_ttl.
            wait_for(lambda: db.execute("SELECT heartbeat < now() - interval '2 seconds' FROM crawlers"
                                        " WHERE process = 0").fetchone()[0], "the heartbeat to expire")
            again = crawler(config, 0, "--until-idle")
            assert again.wait(timeout=240) == 0, stderr_of(config).read_text()[-3000:]
            second = stderr_of(config).read_text()
        finally:
            db.close()
            for one in (proc, again) if "again" in locals() else (proc,):
                one.kill()
                one.wait()
        log_entries = requests(log)

    assert re.search(r"event=bundles-left bundles=[1-9]", first), first[-3000:]
    assert "archiver: crawl stopped because the object store did not take" in first
    # The next start shipped every bundle left, byte for byte, and the crawl lost nothing.
    assert left and re.search(rf"event=cluster-recovered process=0 repaired=0 shipped={len(left)} ", second)
    assert not overlapping(log_entries)
    loaded = load(config)
    check = check_archive(loaded, loaded.store.url, archivable(web), tmp_path / "downloaded")
    assert all(check.bundles.get(name) == data for name, data in left.items())
    assert check.warcs_valid and not check.missing and not check.duplicates
    assert not list((root / "bundles").glob("*.warc.gz*"))
