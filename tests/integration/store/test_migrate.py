"""`archiver store migrate` on real servers: a crawled demo archive moved into PostgreSQL and moto's
S3, every table and object compared with what the embedded stores hold, a migrate killed part-way
and run again, and every capture read back by byte range from the object store."""

from __future__ import annotations

import io
import shutil
import signal
import subprocess
from dataclasses import astuple
from pathlib import Path
from typing import Any

import psycopg
import pytest

from archiver import config, migrate
from archiver.queues.crawlqueue import CrawlQueue, EmbeddedCrawlQueues, queue_origin
from archiver.queues.sitequeue import SiteQueue, queue_path
from archiver.queues.spool import SpoolDirectory
from archiver.store.catalog import Capture, Catalog
from archiver.store.catalog_maintenance import ObjectWarcs, WarcFiles
from archiver.store.dnshistory import DnsHistory
from archiver.store.objectstore import S3Store
from archiver.store.pgcatalog import PgCatalog
from archiver.store.pgdnshistory import PgDnsHistory
from archiver.stores import EmbeddedStores, SharedStores, open_stores
from demoweb import WebSpec, run_demo_process
from tests.support.crawls import write_config
from tests.support.repo import ARCHIVER

# Small bundles: a demo crawl leaves a dozen of them, so a migrate spends a while on them.
MAX_BUNDLE = 8_192
INBOX = [("/late-a", 1), ("/late-b", 2)]
ACTIVE_ORIGIN = "http://unvisited.example:8080"


def archiver(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARCHIVER, *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def crawled_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo web crawled into an embedded archive; then an inbox filled and a site left active."""
    directory = tmp_path_factory.mktemp("crawled")
    spec = WebSpec(sites=4, pages_per_site=12, port=0, trap=False)
    with run_demo_process(spec) as (web, _port, _proc):
        path = write_config(directory, web)
        path.write_text(path.read_text() + f"[warc]\nmax_size = {MAX_BUNDLE}\n")
        seeds = directory / "seeds.txt"
        seeds.write_text("".join(o + "/\n" for o in web.origins()))
        done = archiver("crawl", "--config", str(path), "--seeds", str(seeds), "--until-idle")
    assert done.returncode == 0, done.stderr
    cfg = config.load(path)
    first = web.origins()[0]
    EmbeddedCrawlQueues(cfg.root, bloom_bits=1024, max_fp=0.01).append(
        first, [(first + url, depth) for url, depth in INBOX])
    with SiteQueue(queue_path(cfg.root, 0), recover=False) as queue:
        queue.add(ACTIVE_ORIGIN)
        while queue.claim(include_deferred=True, now=float("inf")) != ACTIVE_ORIGIN:
            pass
    return directory


@pytest.fixture
def old(crawled_archive: Path, tmp_path: Path) -> config.Config:
    """A copy of the crawled archive for one test (a migrate writes its state file there)."""
    shutil.copytree(crawled_archive, tmp_path / "old")
    return config.load(tmp_path / "old" / "archiver.toml")


def new_config(tmp_path: Path, url: str, bucket: Any) -> Path:
    path = tmp_path / "new.toml"
    path.write_text(f'[archive]\nroot = "{tmp_path / "new"}"\n[store]\nurl = "{url}"\n'
                    f'[warc]\nstore = "s3://{bucket.name}/crawl"\n'
                    f'[s3]\nendpoint_url = "{bucket.endpoint}"\nregion = "us-east-1"\n')
    return path


def objects(bucket: Any) -> S3Store:
    return S3Store(bucket.client, bucket.name, "crawl")


def queue_facts(root: Path) -> dict[str, tuple[list[tuple[str, int]], int, tuple[int, int]]]:
    """Per origin, as the embedded CrawlQueue sees it: its entries, how many are finished, (pages,
    bytes). Read on a copy without the inboxes, since opening a queue merges its inbox."""
    copy = root.parent / "queues-copy"
    shutil.copytree(root / "frontier", copy / "frontier")
    facts = {}
    for directory in sorted((copy / "frontier").glob("*/*")):
        (directory / "inbox").unlink(missing_ok=True)
        with CrawlQueue.open(directory, bloom_bits=1024, max_fp=0.01) as queue:
            pending = [(e.url, e.depth) for e, _ in queue.pending_entries()]
            finished, totals = len(queue) - queue.pending, (queue.pages, queue.bytes)
            queue.restart()  # back to the first entry, to list them all
            listed = []
            while (entry := queue.next(merge=False)) is not None:
                listed.append((entry.url, entry.depth))
            assert listed[finished:] == pending
            facts[queue_origin(directory)] = (listed, finished, totals)
    shutil.rmtree(copy)
    return facts


def _capture_key(capture: Capture) -> tuple[str, str, str, int]:
    return capture.urlkey, capture.timestamp, capture.filename, capture.offset


def check_everything(old: config.Config, url: str, bucket: Any) -> None:
    """Every table and object of NEW against the embedded archive they came from."""
    root = old.root
    with psycopg.connect(url) as db:
        # Sites: every column, 'active' now 'waiting', no holder.
        old_sites = []
        with SiteQueue(queue_path(root, 0), recover=False) as queue:
            for row in queue.rows():
                state = "waiting" if row.state == "active" else row.state
                old_sites.append((row.origin, state, row.due, row.inlinks, row.attempts, row.added,
                                  row.visits, row.note, row.restart, None, 0, None))
        new_sites = db.execute("SELECT origin, state, due, inlinks, attempts, added, visits, note, restart,"
                               " holder, epoch, lease_until FROM sites ORDER BY origin").fetchall()
        assert new_sites == sorted(old_sites) and len(new_sites) >= 5
        assert dict(db.execute("SELECT origin, state FROM sites").fetchall())[ACTIVE_ORIGIN] == "waiting"

        # Crawl queues: entries in log order from seq 1, the cursor at the finished entries, the inbox.
        facts = queue_facts(root)
        assert len(facts) >= 4
        for origin, (entries, finished, pages_bytes) in facts.items():
            rows = db.execute("SELECT seq, url, depth FROM crawl_entries WHERE origin = %s ORDER BY seq",
                              (origin,)).fetchall()
            assert rows == [(n, u, d) for n, (u, d) in enumerate(entries, 1)]
            cursor = db.execute("SELECT cursor, pages, bytes, epoch FROM crawl_cursors WHERE origin = %s",
                                (origin,)).fetchone()
            assert cursor == (finished, *pages_bytes, 0)
        # Finished sites (cursor at their last entry), and the robots.txt-500 one still pending.
        assert any(finished == len(entries) > 1 and totals[0] > 0
                   for entries, finished, totals in facts.values())
        assert any(finished < len(entries) for entries, finished, _ in facts.values())
        inbox = db.execute("SELECT origin, url, depth, refetch FROM crawl_inbox ORDER BY id").fetchall()
        (origin,) = {row[0] for row in inbox}
        assert inbox == [(origin, origin + url, depth, False) for url, depth in INBOX]

        # DNS history: every row (with its number) and every name's state.
        with DnsHistory(root / "dns.sqlite", readonly=True) as before:
            rows = [astuple(r) for r in before.all_rows()]
            states = list(before.all_states())
        assert rows and states
        assert db.execute("SELECT row, id, value, type, entered, superseded, source FROM dns"
                          " ORDER BY row").fetchall() == rows
    with PgDnsHistory(url) as after:
        assert [after.state(s.name) for s in states] == states

    # Catalog: the same entries.
    with Catalog(root / "catalog", old.catalog.shards, readonly=True) as before, \
            PgCatalog(url, old.catalog.shards, readonly=True) as after:
        entries = sorted(before.iter_all(), key=_capture_key)
        assert entries and sorted(after.iter_all(), key=_capture_key) == entries

    # Objects: exactly the bundles and the closed spool files, byte for byte.
    store = objects(bucket)
    bundles = sorted((root / "warcs").glob("*.warc.gz"))
    spool = [root / "outlinks" / name for name in SpoolDirectory(root / "outlinks").closed()]
    assert len(bundles) > 5 and spool
    expected = {p.name: p for p in bundles} | {f"outlinks/{p.name}": p for p in spool}
    assert store.list() == sorted(expected)
    for key, path in expected.items():
        data = path.read_bytes()
        assert store.read(key, 0, len(data)) == data


def check_shared_queues_continue(old: config.Config, new: Path) -> None:
    """The shared site queue and crawl queues of NEW take up the sites where OLD left them: every
    site claimable under a lease (the finished ones once queued again), each crawl queue opening at
    its cursor with its pending entries."""
    facts = queue_facts(old.root)
    with SiteQueue(queue_path(old.root, 0), recover=False) as queue:
        expected = queue.counts()
    expected["waiting"] += expected.pop("active")
    stores = open_stores(config.load(new))
    assert isinstance(stores, SharedStores)
    sites, queues = stores.site_queue(0), stores.crawl_queues()
    try:
        assert {k: v for k, v in sites.counts().items() if k != "active"} == expected
        assert sites.recrawl() == expected["done"]  # done sites are claimable again
        claimed = set()
        while (origin := sites.claim(include_deferred=True, now=float("inf"))) is not None:
            claimed.add(origin)
        assert claimed >= set(facts)
        for origin, (entries, finished, totals) in facts.items():
            with queues.open(origin) as queue:
                assert (queue.cursor, queue.pages, queue.bytes) == (finished, *totals)
                assert len(queue) == len(entries)
                ahead = []
                while (entry := queue.next(merge=False)) is not None:
                    ahead.append((entry.url, entry.depth))
                assert ahead == entries[finished:]
    finally:
        sites.close()
        queues.close()


def check_captures_read_back(old: config.Config, url: str, bucket: Any) -> int:
    """Every capture of the new catalog read by byte range from the object store: the same record,
    and the same bytes, as in the original WARC file."""
    store, warcs = objects(bucket), WarcFiles(old.root / "warcs")
    remote = ObjectWarcs(store)
    count = 0
    with PgCatalog(url, old.catalog.shards, readonly=True) as catalog:
        for capture in catalog.iter_all():
            original = (old.root / "warcs" / capture.filename).read_bytes()
            span = original[capture.offset:capture.offset + capture.length]
            assert store.read(capture.filename, capture.offset, capture.length) == span
            assert remote.read(capture.filename, capture.offset, capture.length) == \
                warcs.read(capture.filename, capture.offset, capture.length)
            count += 1
    return count


def test_migrate_moves_every_part_and_verifies_it(old: config.Config, pg_store_url: str, s3_bucket: Any,
                                                  tmp_path: Path) -> None:
    new = new_config(tmp_path, pg_store_url, s3_bucket)
    done = archiver("store", "migrate", "--from", str(old.path), "--to", str(new))
    assert done.returncode == 0, done.stderr
    for part in ("sites:", "crawl queues:", "DNS history:", "bundles:", "catalog:", "spool:", "done:"):
        assert f"store migrate: {part}" in done.stdout
    assert "store migrate: bundles: 1/" in done.stderr  # progress lines
    check_everything(old, pg_store_url, s3_bucket)
    assert check_captures_read_back(old, pg_store_url, s3_bucket) > 20

    again = archiver("store", "migrate", "--from", str(old.path), "--to", str(new))
    assert again.returncode == 0, again.stderr
    assert "sites: 0 copied" in again.stdout and "crawl queues: 0 copied" in again.stdout
    assert "bundles: 0 copied" in again.stdout
    check_everything(old, pg_store_url, s3_bucket)

    # NEW's crawlers take over (sites leased, so no longer as OLD has them): a migrate run now says so.
    check_shared_queues_continue(old, new)
    differs = archiver("store", "migrate", "--from", str(old.path), "--to", str(new))
    assert differs.returncode == 1
    assert "store migrate: sites: OLD has 1 waiting sites, NEW has 0" in differs.stderr


def test_a_migrate_killed_part_way_finishes_when_run_again(old: config.Config, pg_store_url: str,
                                                          s3_bucket: Any, tmp_path: Path) -> None:
    new = new_config(tmp_path, pg_store_url, s3_bucket)
    command = [*ARCHIVER, "store", "migrate", "--from", str(old.path), "--to", str(new)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("store migrate: bundles:"):
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    shipped = objects(s3_bucket).list()
    assert 0 < len(shipped) < len(list((old.root / "warcs").glob("*.warc.gz")))

    done = archiver("store", "migrate", "--from", str(old.path), "--to", str(new))
    assert done.returncode == 0, done.stderr
    check_everything(old, pg_store_url, s3_bucket)


def test_migrate_refuses_what_it_cannot_do(old: config.Config, pg_url: str, pg_store_url: str,
                                           s3_bucket: Any, tmp_path: Path) -> None:
    new = new_config(tmp_path, pg_store_url, s3_bucket)
    # NEW not PostgreSQL.
    embedded = tmp_path / "embedded.toml"
    embedded.write_text(f'[archive]\nroot = "{tmp_path / "other"}"\n')
    refused = archiver("store", "migrate", "--from", str(old.path), "--to", str(embedded))
    assert refused.returncode == 2 and "target of a migrate is a PostgreSQL database" in refused.stderr
    # OLD not embedded.
    refused = archiver("store", "migrate", "--from", str(new), "--to", str(new))
    assert refused.returncode == 2 and "only an embedded archive" in refused.stderr
    # NEW's schema not current.
    bare = tmp_path / "bare.toml"
    bare.write_text(new.read_text().replace(pg_store_url, pg_url))
    refused = archiver("store", "migrate", "--from", str(old.path), "--to", str(bare))
    assert refused.returncode == 2 and "archiver store init" in refused.stderr
    # A crawler running on OLD: its lock is held.
    lock = EmbeddedStores(old).lock("crawl", 0)
    try:
        refused = archiver("store", "migrate", "--from", str(old.path), "--to", str(new))
    finally:
        lock.release()
    assert refused.returncode == 2 and "crawler process 0 is already running" in refused.stderr
    # A bundle a crash left open.
    bundle = sorted((old.root / "warcs").glob("*.warc.gz"))[-1]
    bundle.rename(bundle.with_name(bundle.name + ".open"))
    refused = archiver("store", "migrate", "--from", str(old.path), "--to", str(new))
    assert refused.returncode == 2 and "left open" in refused.stderr
    bundle.with_name(bundle.name + ".open").rename(bundle)
    # Nothing was written by any of them.
    with psycopg.connect(pg_store_url) as db:
        assert db.execute("SELECT count(*) FROM sites").fetchone() == (0,)
    assert objects(s3_bucket).list() == []
    # A NEW that holds another archive's rows, or another object under a bundle's name.
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        db.execute("INSERT INTO sites (origin, added) VALUES ('http://other.example', 0)")
        refused = archiver("store", "migrate", "--from", str(old.path), "--to", str(new))
        assert refused.returncode == 2 and "table sites is not empty" in refused.stderr
        db.execute("DELETE FROM sites")
    foreign = tmp_path / "foreign"
    foreign.write_bytes(b"another archive's bundle")
    objects(s3_bucket).upload(foreign, bundle.name)
    refused = archiver("store", "migrate", "--from", str(old.path), "--to", str(new))
    assert refused.returncode == 2 and "holds another object" in refused.stderr
    assert objects(s3_bucket).read(bundle.name, 0, 24) == b"another archive's bundle"


class Interrupted(Exception):
    """Stands for a kill at a chosen point of an in-process migrate."""


class InterruptAt(io.StringIO):
    """A stderr that interrupts the migrate when it writes its first line about ``part``."""

    def __init__(self, part: str) -> None:
        super().__init__()
        self.part = part

    def write(self, text: str) -> int:
        if text.startswith(f"store migrate: {self.part}:"):
            raise Interrupted(text)
        return super().write(text)


def test_the_catalog_resumes_after_its_last_batch(old: config.Config, pg_store_url: str, s3_bucket: Any,
                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new = config.load(new_config(tmp_path, pg_store_url, s3_bucket))
    monkeypatch.setattr(migrate, "CATALOG_BATCH", 7)
    with pytest.raises(Interrupted, match="catalog: 7/"):
        migrate.Migration(old, new, out=io.StringIO(), err=InterruptAt("catalog")).run()
    with PgCatalog(pg_store_url, old.catalog.shards, readonly=True) as catalog:
        assert catalog.count() == 7
    out = io.StringIO()
    migrate.Migration(old, new, out=out, err=io.StringIO()).run()
    assert "bundles: 0 copied" in out.getvalue()
    check_everything(old, pg_store_url, s3_bucket)
