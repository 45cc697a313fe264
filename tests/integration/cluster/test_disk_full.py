"""A crawler machine's disk fills in the shared mode (PostgreSQL and an object store): the
crawler stops fetching, keeps what it has written, ships what it can, and resumes by itself once
space returns, as the embedded mode does (tests/integration/store/test_full_disk.py). The "disk"
is the crawler process's file-size limit (RLIMIT_FSIZE, lowered and raised from outside with
prlimit, no privileges needed): past it every write fails with EFBIG, as a full file system
fails with ENOSPC. CPython ignores SIGXFSZ, so the process is not killed by it."""

from __future__ import annotations

import contextlib
import re
import resource
import subprocess
import threading
import time

import psycopg

from demoweb import WebSpec, run_demo_process
from tests.support.cluster import archivable, check_archive, overlapping, requests, shared_config, wait_for
from tests.support.crawls import load, write_seeds
from tests.support.repo import ARCHIVER

WARC = {"max_age": 1.0, "sync_interval": 0.3, "max_size": 60_000}
FULL = 1  # bytes a file may hold while the disk is full: no write to a file succeeds


def closed_bundles(root) -> list[str]:
    return sorted(p.name for p in (root / "bundles").glob("*.warc.gz"))


def test_a_full_disk_pauses_a_shared_crawler_which_ships_what_it_can_and_resumes(
        tmp_path, pg_store_url, stoppable_bucket):
    bucket, endpoint = stoppable_bucket.bucket, stoppable_bucket.endpoint
    spec = WebSpec(sites=3, pages_per_site=60, port=0, trap=False)
    log = tmp_path / "requests.jsonl"
    with run_demo_process(spec, log_path=log) as (web, _port, _proc):
        path = shared_config(tmp_path / "machine0", web, store_url=pg_store_url, bucket=bucket,
                             warc=WARC, min_rest=0.1)
        config = load(path)
        seeds = write_seeds(tmp_path / "seeds.txt", [o + "/" for o in web.origins()])
        subprocess.run([*ARCHIVER, "seeds", "--config", str(path), str(seeds)], check=True,
                       capture_output=True, timeout=60)
        # The log goes to a pipe (no file-size limit on a pipe), read as it comes.
        proc = subprocess.Popen([*ARCHIVER, "crawl", "run", "--config", str(path), "--process", "0",
                                 "--until-idle"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        lines: list[str] = []
        assert proc.stderr is not None
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
        reader.start()
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        try:
            wait_for(lambda: any("event=bundle-shipped" in line for line in lines)
                     and len(requests(log)) >= 30, "the crawl to ship its first bundle")
            # The store away first, so that closed bundles wait on the disk as it fills.
            endpoint.stop()
            wait_for(lambda: any("event=bundle-waiting" in line for line in lines),
                     "a closed bundle to wait on the disk")
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (FULL, hard))
            wait_for(lambda: any("event=disk-full" in line for line in lines), "the disk to be full")
            held = {name: (config.root / "bundles" / name).read_bytes()
                    for name in closed_bundles(config.root)}
            fetched = len(requests(log))
            # The store back while the disk is still full: what waits is shipped (and deleted).
            endpoint.start()
            # The spool's files may bring the store back before the bundles' round ends.
            wait_for(lambda: any("event=store-recovered store=objects" in line for line in lines)
                     and not closed_bundles(config.root), "the waiting bundles to be shipped")
            status = subprocess.run([*ARCHIVER, "status", "--config", str(path)], capture_output=True,
                                    text=True, timeout=60, check=True).stdout
            paused = len(requests(log))
            assert paused <= fetched + spec.sites  # a fetch in flight per site at most
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (hard, hard))  # space returns
            space_back = time.time()
            proc.wait(timeout=240)
            reader.join(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
            (tmp_path / "crawler.log").write_text("".join(lines))  # for a look after a failure
        log_entries = requests(log)
    err = "".join(lines)
    assert proc.returncode == 0, err[-3000:]
    assert "waiting_for=disk" in status, status
    assert re.search(r"event=disk-ok resumed=True", err), err[-3000:]
    assert any(e["start"] > space_back for e in log_entries)  # resumed by itself
    assert not overlapping(log_entries)
    expected = archivable(web)
    check = check_archive(config, config.store.url, expected, tmp_path / "downloaded")
    assert check.warcs_valid and not check.missing and not check.duplicates
    assert not check.uncatalogued and not check.unserved
    assert held and all(check.bundles.get(name) == data for name, data in held.items())
    assert not list((config.root / "bundles").glob("*.warc.gz*")), "a bundle stayed local"
    with psycopg.connect(pg_store_url) as db:
        assert db.execute("SELECT count(*) FROM pending_captures").fetchone() == (0,)
