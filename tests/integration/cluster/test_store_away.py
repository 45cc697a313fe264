"""The object store away while crawlers run: its endpoint is stopped part-way through a crawl of
the demo web and started again on the same port (tools.s3server.StoppableEndpoint; moto keeps
its objects meanwhile, as a real store does). The crawlers keep their closed bundles on their
own disks, go on fetching (up to ``warc.local_limit``, then pause), ship the bundles once the
store is back and delete each local copy only after the store holds its exact bytes; nothing is
lost and nothing catalogued twice. Replay answers 503 with Retry-After meanwhile, never 404."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from pathlib import Path

import psycopg

from demoweb import WebSpec, run_demo_process
from tests.support.cluster import archived, overlapping, requests, shared_config, wait_for
from tests.support.crawls import load, write_seeds
from tests.support.repo import ARCHIVER

WARC = {"max_age": 1.0, "sync_interval": 0.3, "max_size": 60_000}
OUTAGE = 6.0  # seconds the store is away at least (the 60, shortened for CI)


def crawler(config: Path, process: int, *extra: str) -> subprocess.Popen[str]:
    """``archiver crawl``, its log in ``stderr_of(config)`` (a file: a pipe nobody reads while
    the test waits would fill and block it)."""
    with stderr_of(config).open("w") as stderr:
        return subprocess.Popen([*ARCHIVER, "crawl", "--config", str(config), "--process", str(process),
                                 *extra], stdout=subprocess.DEVNULL, stderr=stderr, text=True)


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


def expected(web) -> set[str]:
    return {u for u in web.expected("archiver") if "robots500" not in u}


def test_crawlers_keep_their_bundles_while_the_store_is_away_and_lose_nothing(
        tmp_path, pg_store_url, stoppable_bucket):
    bucket, endpoint = stoppable_bucket.bucket, stoppable_bucket.endpoint
    spec = WebSpec(sites=6, pages_per_site=40, port=0, trap=False)
    log = tmp_path / "requests.jsonl"
    with run_demo_process(spec, log_path=log) as (web, _port, _proc):
        configs = [shared_config(tmp_path / f"machine{n}", web, store_url=pg_store_url, bucket=bucket,
                                 warc=WARC, min_rest=0.1, user_agent=f"archiver-test-{n}",
                                 sites_per_process=3)  # each machine takes half the sites
                   for n in range(2)]
        seed(configs[0], web, tmp_path)
        crawlers = [crawler(config, n, "--until-idle") for n, config in enumerate(configs)]
        try:
            wait_for(lambda: bucket.client.list_objects_v2(Bucket=bucket.name).get("KeyCount", 0) >= 2
                     and len(requests(log)) >= 40, "the crawl to ship its first bundles")
            endpoint.stop()
            stopped = time.time()
            waited: dict[str, bytes] = {}

            def bundles_wait_on_both_disks() -> bool:
                found = [closed_bundles(config) for config in configs]
                for one in found:
                    waited.update(one)
                return all(found)

            wait_for(bundles_wait_on_both_disks, "closed bundles to wait on both machines' disks")
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
    archive = archived(config, tmp_path / "downloaded")
    assert archive.valid
    assert not archive.missing(expected(web))
    assert not archive.duplicates()
    assert {(c.filename, c.offset) for c in archive.entries} == archive.records
    # Each bundle that waited is in the store byte for byte: deleted only once the store had it.
    assert waited and all(archive.bundles.get(name) == data for name, data in waited.items())
    for one in configs:
        assert not list((load(one).root / "bundles").glob("*.warc.gz*")), "a bundle stayed local"
    with psycopg.connect(pg_store_url) as db:
        assert db.execute("SELECT count(*) FROM pending_captures").fetchone() == (0,)
