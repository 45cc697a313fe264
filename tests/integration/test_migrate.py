"""`archiver store migrate` on real servers: a crawled demo archive (with a links batch's state)
moved into PostgreSQL and moto's S3, every table and object compared with what the embedded stores
hold, a migrate killed part-way and run again, every capture read back by byte range from the object
store, and served by `archiver replay` on the new stores with the bytes of its original record."""

from __future__ import annotations

import http.client
import io
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
from contextlib import closing
from dataclasses import astuple
from pathlib import Path
from typing import Any

import psycopg
import pytest

from archiver import config, migrate
from archiver.links.slices import slice_name
from archiver.queues.decisions import read_all_decisions
from archiver.queues.embedded.crawlqueue import INBOX as INBOX_FILE
from archiver.queues.embedded.crawlqueue import (
    CrawlQueue,
    EmbeddedCrawlQueues,
    inbox_database,
    queue_dir,
    queue_origin,
    read_inbox,
)
from archiver.queues.embedded.inboxes import SiteInbox
from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.postgres.linksstate import PgLinksState
from archiver.queues.sites import gatekeepers_text
from archiver.queues.spool import SpoolDirectory
from archiver.store.catalog_maintenance import ObjectWarcs, WarcFiles
from archiver.store.embedded.catalog import Catalog
from archiver.store.embedded.dnshistory import DnsHistory
from archiver.store.models import Capture
from archiver.store.postgres.catalog import PgCatalog
from archiver.store.postgres.dnshistory import PgDnsHistory
from archiver.store.s3.objectstore import S3Store
from archiver.store.warcindex import read_record
from archiver.stores import EmbeddedStores, open_shared, open_stores
from demoweb import WebSpec, run_demo_process
from tests.support.crawls import write_config
from tests.support.postgres import PASSWORD, PASSWORD_ROLE, PostgresServer
from tests.support.repo import ARCHIVER, archiver_here_text
from tests.support.secrets import assert_no_secret

# Small bundles: a demo crawl leaves a dozen of them, so a migrate spends a while on them. Small
# spool files, so one can be closed after the links batch ran; a small bitmap for the batch.
SETTINGS = "[warc]\nmax_size = 32768\n[spool]\nmax_lines = 2\n[links]\nexpected_urls = 4000\n"
INBOX = [("/late-a", 1), ("/late-b", 2)]
ACTIVE_ORIGIN = "http://unvisited.example:8080"
INBOX_ONLY_ORIGIN = "http://linked-to.example"  # inbox rows, no crawl-queue folder
PAUSED_ORIGIN = "http://members.example"  # paused, with cookies and gatekeeper counts
BUDGET = (20_416, 3)  # the first site's daily budget count: (day, pages)


def archiver(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARCHIVER, *args], capture_output=True, text=True, timeout=300,
                          check=False, env=env)


def migrate_here(old: Path, new: Path) -> subprocess.CompletedProcess[str]:
    """``archiver store migrate`` run in this process; each test also runs one as a child."""
    return archiver_here_text("store", "migrate", "--source", str(old), "--target", str(new))


@pytest.fixture(scope="module")
def crawled_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo web crawled into an embedded archive; the links batch run over all its spool files
    but the last (closed after the batch ran); then an inbox filled (and an inbox file an earlier
    version left) and a site left active."""
    directory = tmp_path_factory.mktemp("crawled")
    spec = WebSpec(sites=4, pages_per_site=12, port=0, trap=False)
    with run_demo_process(spec) as (web, _port, _proc):
        path = write_config(directory, web)
        path.write_text(path.read_text() + SETTINGS)
        seeds = directory / "seeds.txt"
        seeds.write_text("".join(o + "/\n" for o in web.origins()))
        done = archiver("crawl", "run", "--config", str(path), "--seeds", str(seeds), "--until-idle")
    assert done.returncode == 0, done.stderr
    cfg = config.load(path)
    spool = cfg.root / "spool"
    last = spool / SpoolDirectory(spool).closed()[-1]
    last.rename(directory / last.name)
    links = archiver("links", "run", "--once", "--config", str(path))
    assert links.returncode == 0, links.stderr
    (directory / last.name).rename(last)
    first = web.origins()[0]
    with CrawlQueue.open(queue_dir(cfg.root, first), bloom_bits=1024, max_fp=0.01) as queue:
        for _ in range(BUDGET[1]):
            queue.count_day_page(BUDGET[0])
    with closing(EmbeddedCrawlQueues(cfg.root, bloom_bits=1024, max_fp=0.01)) as crawl_queues:
        crawl_queues.append(first, [(first + url, depth) for url, depth in INBOX])
        crawl_queues.append(INBOX_ONLY_ORIGIN, [(INBOX_ONLY_ORIGIN + "/", 0)])
    (queue_dir(cfg.root, first) / INBOX_FILE).write_text(f"3\t{first}/from-a-file\n")
    with SiteQueue(queue_path(cfg.root, 0), recover=False) as queue:
        queue.add(PAUSED_ORIGIN, inlinks=10**9)  # claimed first
        assert queue.claim(include_deferred=True, now=float("inf")) == PAUSED_ORIGIN
        queue.pause(PAUSED_ORIGIN, "session lost")
        queue.keep_cookies(PAUSED_ORIGIN, '[{"name": "session", "value": "s1"}]')
        queue.count_gatekeepers(PAUSED_ORIGIN, {"challenge": 4})
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
    shutil.copytree(root / "crawl-queues", copy / "crawl-queues")
    facts = {}
    for directory in sorted((copy / "crawl-queues").glob("*/*")):
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
                                  row.visits, row.note, row.restart, None, 0, None,
                                  queue.cookies(row.origin), gatekeepers_text(dict(row.gatekeepers))))
        new_sites = db.execute("SELECT origin, state, due, inlinks, attempts, added, visits, note, restart,"
                               " holder, epoch, lease_until, cookies, gatekeepers FROM sites"
                               " ORDER BY origin").fetchall()
        assert new_sites == sorted(old_sites) and len(new_sites) >= 5
        paused = next(site for site in new_sites if site[0] == PAUSED_ORIGIN)
        assert paused[1] == "paused" and paused[-2:] == ('[{"name": "session", "value": "s1"}]',
                                                         '{"challenge": 4}')
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
        # The daily budget count goes along: a migration mid-day does not grant a second budget.
        budgets = db.execute("SELECT origin, budget_day, budget_pages FROM crawl_cursors"
                             " WHERE budget_pages > 0").fetchall()
        assert budgets == [(queue_origin(budget.parent), *BUDGET)
                           for budget in (root / "crawl-queues").glob("*/*/budget")]
        # Finished sites (cursor at their last entry), and the robots.txt-500 one still pending.
        assert any(finished == len(entries) > 1 and totals[0] > 0
                   for entries, finished, totals in facts.values())
        assert any(finished < len(entries) for entries, finished, _ in facts.values())
        # Decision logs (robots.txt exclusions at least), each site's in its order.
        old_decisions = sorted((queue_origin(d), *decision)
                               for d in (root / "crawl-queues").glob("*/*")
                               for decision in read_all_decisions(d))
        new_decisions = db.execute("SELECT origin, at, kind, url, detail FROM crawl_decisions"
                                   " ORDER BY origin, at, kind, url").fetchall()
        assert any(row[2] == "robots" for row in old_decisions)
        assert [tuple(row) for row in new_decisions] == old_decisions
        # Inboxes: the links batch's new URLs, and the lines appended after it.
        inbox = db.execute("SELECT origin, url, depth, refetch FROM crawl_inbox ORDER BY id").fetchall()
        with closing(inbox_database(root)) as inboxes:
            directories = {queue_dir(root, origin) for origin in inboxes.origins()}
            directories.update((root / "crawl-queues").glob("*/*"))
            old_inbox = [(queue_origin(d), url, depth, False) for d in sorted(directories)
                         for url, depth in read_inbox(d, SiteInbox(inboxes, queue_origin(d)))]
        origins = {row[0] for row in old_inbox}
        assert any(url.endswith("/from-a-file") for _, url, _, _ in old_inbox)
        assert INBOX_ONLY_ORIGIN in origins and not queue_dir(root, INBOX_ONLY_ORIGIN).exists()
        assert len(origins) > 1
        assert [[row for row in inbox if row[0] == o] for o in sorted(origins)] == \
            [[row for row in old_inbox if row[0] == o] for o in sorted(origins)]
        assert any([row[1:3] for row in inbox if row[0] == o][-2:] == [(o + u, d) for u, d in INBOX]
                   for o in origins)

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

    # Objects: exactly the bundles, the closed spool files not done and the links bitmap's slices,
    # byte for byte.
    store = objects(bucket)
    bundles = sorted((root / "warcs").glob("*.warc.gz"))
    spool = [root / "spool" / name for name in SpoolDirectory(root / "spool").closed()]
    check_links_state(root, url)
    assert len(bundles) > 5 and len(spool) == 1
    expected = {p.name: p for p in bundles} | {f"outlinks/{p.name}": p for p in spool} | \
        {f"links/{p.name}": p for p in old_slices(root)}
    assert store.list() == sorted(expected)
    for key, path in expected.items():
        data = path.read_bytes()
        assert store.read(key, 0, len(data)) == data


def old_slices(root: Path) -> list[Path]:
    """OLD's slice files in force, slice 0 first (4: links.slices)."""
    with closing(sqlite3.connect(f"file:{root / 'links' / 'state.sqlite'}?mode=ro", uri=True)) as db:
        generations = [g for (g,) in db.execute("SELECT generation FROM slices ORDER BY slice")]
    assert len(generations) == 4
    return [root / "links" / slice_name(p, 4, g) for p, g in enumerate(generations)]


def check_links_state(root: Path, url: str) -> int:
    """NEW's links tables hold OLD's ledger, sites, slices and generation (read from OLD's SQLite
    file as it is); the generation."""
    old = sqlite3.connect(f"file:{root / 'links' / 'state.sqlite'}?mode=ro", uri=True)
    try:
        ledger = old.execute("SELECT name, generation, lines, new_urls, bad, done FROM ledger"
                             " ORDER BY name").fetchall()
        sites = old.execute("SELECT origin, inlinks, dirty FROM sites ORDER BY origin").fetchall()
        (generation,) = old.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        slices = old.execute("SELECT slice, generation FROM slices ORDER BY slice").fetchall()
    finally:
        old.close()
    assert generation >= 1 and ledger and sites
    assert {name for name, *_ in ledger} == {p.name for p in (root / "spool" / "done").iterdir()}
    assert sum(inlinks for _, inlinks, _ in sites) > 0
    with psycopg.connect(url) as db:
        assert db.execute("SELECT name, generation, lines, new_urls, bad, done FROM links_ledger"
                          " ORDER BY name").fetchall() == ledger
        assert db.execute("SELECT origin, inlinks, dirty FROM links_sites"
                          " ORDER BY origin").fetchall() == sites
        assert db.execute("SELECT generation FROM links_meta").fetchall() == [(generation,)]
        assert db.execute("SELECT slice, generation FROM links_slices ORDER BY slice").fetchall() \
            == slices
    return int(generation)


def check_links_batch_takes_over(old: config.Config, new: Path) -> None:
    """The shared links state opens at OLD's generation with OLD's slices, bit for bit, the
    spool files OLD's batch did as done and the same sites still to push."""
    stores = open_shared(config.load(new))
    state = stores.links_state()
    assert isinstance(state, PgLinksState)
    try:
        store = stores.objects()
        for p, generation in enumerate(state.slice_generations()):
            held = old.root / "links" / slice_name(p, 4, generation)
            data = held.read_bytes()
            assert store.read(f"links/{held.name}", 0, len(data)) == data
        assert state.files_done() == {p.name for p in (old.root / "spool" / "done").iterdir()}
        with closing(sqlite3.connect(f"file:{old.root / 'links' / 'state.sqlite'}?mode=ro", uri=True)) as db:
            dirty = db.execute("SELECT origin, inlinks, dirty = 2 FROM sites WHERE dirty > 0").fetchall()
        assert sorted(state.dirty_sites()) == sorted((o, i, bool(w)) for o, i, w in dirty)
    finally:
        state.close()


def check_shared_queues_continue(old: config.Config, new: Path) -> None:
    """The shared site queue and crawl queues of NEW take up the sites where OLD left them: every
    site claimable under a lease (the finished ones once queued again), each crawl queue opening at
    its cursor with its pending entries."""
    facts = queue_facts(old.root)
    with SiteQueue(queue_path(old.root, 0), recover=False) as queue:
        expected = queue.counts()
    expected["waiting"] += expected.pop("active")
    stores = open_shared(config.load(new))
    sites, queues = stores.site_queue(0), stores.crawl_queues()
    try:
        assert {k: v for k, v in sites.counts().items() if k != "active"} == expected
        assert sites.recrawl() == expected["done"] + expected["revisit"]  # finished: claimable again
        claimed = set()
        while (origin := sites.claim(include_deferred=True, now=float("inf"))) is not None:
            claimed.add(origin)
        assert claimed >= set(facts)
        for origin, (entries, finished, totals) in facts.items():
            # Opening a queue to crawl merges its inbox: the URLs there it has not seen follow.
            with psycopg.connect(stores.url) as db:
                inbox = db.execute("SELECT url, depth FROM crawl_inbox WHERE origin = %s ORDER BY id",
                                   (origin,)).fetchall()
            seen, merged = {url for url, _ in entries}, []
            for url, depth in inbox:
                if url not in seen:
                    seen.add(url)
                    merged.append((url, depth))
            with queues.open(origin) as queue:
                assert (queue.cursor, queue.pages, queue.bytes) == (finished, *totals)
                assert len(queue) == len(entries) + len(merged)
                ahead = []
                while (entry := queue.next(merge=False)) is not None:
                    ahead.append((entry.url, entry.depth))
                assert ahead == entries[finished:] + merged
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
    done = archiver("store", "migrate", "--source", str(old.path), "--target", str(new))
    assert done.returncode == 0, done.stderr
    for part in ("sites:", "crawl queues:", "DNS history:", "bundles:", "catalog:", "spool:",
                 "links bitmap: 4 copied", "links:", "done:"):
        assert f"store migrate: {part}" in done.stdout
    assert "store migrate: bundles: 1/" in done.stderr  # progress lines
    assert "warning" not in done.stderr
    check_everything(old, pg_store_url, s3_bucket)
    check_links_batch_takes_over(old, new)
    assert check_captures_read_back(old, pg_store_url, s3_bucket) > 20

    again = migrate_here(old.path, new)
    assert again.returncode == 0, again.stderr
    assert "sites: 0 copied" in again.stdout and "crawl queues: 0 copied" in again.stdout
    assert "bundles: 0 copied" in again.stdout and "links: 0 ledger rows and 0 sites copied" in again.stdout
    check_everything(old, pg_store_url, s3_bucket)

    # NEW's crawlers take over (sites leased, so no longer as OLD has them): a migrate run now says so.
    check_shared_queues_continue(old, new)
    differs = migrate_here(old.path, new)
    assert differs.returncode == 1
    with SiteQueue(queue_path(old.root, 0), recover=False) as queue:
        counts = queue.counts()
    waiting = counts["waiting"] + counts["active"]  # the sites the links batch woke, and the active one
    assert f"store migrate: sites: OLD has {waiting} waiting sites, NEW has 0" in differs.stderr


def expected_payloads(old: config.Config) -> dict[tuple[str, str], list[tuple[int, bytes]]]:
    """(status, payload) of every capture of OLD by (timestamp, URL), read from the original WARC
    files; a revisit's payload is that of the response it names (same URL and digest)."""
    warcs = old.root / "warcs"
    with Catalog(old.root / "catalog", old.catalog.shards, readonly=True) as catalog:
        captures = list(catalog.iter_all())
    originals = {(c.url, c.digest): c for c in captures if c.rectype == "response"}
    expected: dict[tuple[str, str], list[tuple[int, bytes]]] = {}
    for capture in captures:
        source = originals[capture.url, capture.digest] if capture.rectype == "revisit" else capture
        record = read_record(warcs, source.filename, source.offset, source.length)
        assert capture.status is not None
        expected.setdefault((capture.timestamp, capture.url), []).append((capture.status, record.payload))
    return expected


def replay_listeners(proc: subprocess.Popen[str], logged: list[str] | None = None) -> tuple[str, int]:
    """The content listener's (host, port) of a starting `archiver replay` (Hypercorn reports the
    replay's own pages first, then archived content); the rest of its log is drained meanwhile,
    every line appended to ``logged`` if given."""
    assert proc.stderr is not None
    stderr = proc.stderr
    lines = [] if logged is None else logged
    running = []
    for line in stderr:
        lines.append(line)
        if found := re.search(r"Running on http://(127\.0\.0\.1):(\d+)", line):
            running.append((found.group(1), int(found.group(2))))
            if len(running) == 2:
                break
    assert len(running) == 2, f"archiver replay exited with {proc.wait()}"
    threading.Thread(target=lambda: lines.extend(stderr), daemon=True).start()
    return running[1]


def test_replay_from_the_new_stores_serves_every_capture_with_its_bytes(
        old: config.Config, pg_store_url: str, s3_bucket: Any, tmp_path: Path) -> None:
    new = new_config(tmp_path, pg_store_url, s3_bucket)
    new.write_text(new.read_text() + '[replay]\nlisten = "127.0.0.1:0"\ncontent_listen = "127.0.0.1:0"\n')
    done = archiver("store", "migrate", "--source", str(old.path), "--target", str(new))
    assert done.returncode == 0, done.stderr
    expected = expected_payloads(old)
    assert sum(len(group) for group in expected.values()) > 100
    shutil.rmtree(old.root)  # every byte served now comes from the new stores
    with subprocess.Popen([*ARCHIVER, "replay", "run", "--config", str(new)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as proc:
        try:
            host, port = replay_listeners(proc)
            for (timestamp, url), captures in expected.items():
                web = http.client.HTTPConnection(host, port, timeout=30)
                try:
                    web.request("GET", f"/web/{timestamp}id_/{url}")
                    served = web.getresponse()
                    status, body = served.status, served.read()
                finally:
                    web.close()
                # Two captures of one URL in one second share an address: one is served, and each
                # has the payload served.
                assert all(capture == (status, body) for capture in captures), (url, status)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert proc.returncode == 0


def test_a_password_given_in_pgpassword_is_in_no_output_log_line_or_state_file(
        old: config.Config, postgres_server: PostgresServer, pg_store_url: str, s3_bucket: Any,
        tmp_path: Path) -> None:
    """A migrate to a role with a password (given the allowed way, in PGPASSWORD), then a links
    batch, a verify, a status and a replay on the new stores, logging at debug: the password is
    in no output, no log line, not in migrate.json nor any other file of the state folders."""
    url = postgres_server.url(pg_store_url.rsplit("/", 1)[1], user=PASSWORD_ROLE)
    new = new_config(tmp_path, url, s3_bucket)
    new.write_text(new.read_text() + '[replay]\nlisten = "127.0.0.1:0"\ncontent_listen = "127.0.0.1:0"\n'
                   '[log]\nlevel = "debug"\n')
    env = {**os.environ, "PGPASSWORD": PASSWORD}
    runs = [archiver("store", "migrate", "--source", str(old.path), "--target", str(new), env=env)]
    assert runs[0].returncode == 0, runs[0].stderr
    for verb in (["links", "run", "--once"], ["catalog", "verify"], ["status"]):
        runs.append(archiver(*verb, "--config", str(new), env=env))
        assert runs[-1].returncode in (0, 1), runs[-1].stderr
    with subprocess.Popen([*ARCHIVER, "replay", "run", "--config", str(new)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env=env) as proc:
        logged: list[str] = []
        try:
            host, port = replay_listeners(proc, logged)
            web = http.client.HTTPConnection(host, port, timeout=30)
            web.request("GET", "/web/2/http://nowhere.example/")
            assert web.getresponse().status == 404
            web.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    state = [p for root in (old.root, tmp_path / "new") for p in (root / "state").rglob("*")
             if p.is_file()]
    assert old.root / "state" / "migrate.json" in state
    texts = [text for run in runs for text in (run.stdout, run.stderr)] + logged
    assert assert_no_secret(PASSWORD, texts=texts, files=state) > 50


def test_a_migrate_killed_part_way_finishes_when_run_again(old: config.Config, pg_store_url: str,
                                                          s3_bucket: Any, tmp_path: Path) -> None:
    new = new_config(tmp_path, pg_store_url, s3_bucket)
    command = [*ARCHIVER, "store", "migrate", "--source", str(old.path), "--target", str(new)]
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

    done = migrate_here(old.path, new)
    assert done.returncode == 0, done.stderr
    check_everything(old, pg_store_url, s3_bucket)


def test_migrate_refuses_what_it_cannot_do(old: config.Config, pg_url: str, pg_store_url: str,
                                           s3_bucket: Any, tmp_path: Path) -> None:
    new = new_config(tmp_path, pg_store_url, s3_bucket)
    # NEW not PostgreSQL.
    embedded = tmp_path / "embedded.toml"
    embedded.write_text(f'[archive]\nroot = "{tmp_path / "other"}"\n')
    refused = migrate_here(old.path, embedded)
    assert refused.returncode == 2 and "target of a migrate is a PostgreSQL database" in refused.stderr
    # OLD not embedded.
    refused = migrate_here(new, new)
    assert refused.returncode == 2 and "only an embedded archive" in refused.stderr
    # NEW's schema not current.
    bare = tmp_path / "bare.toml"
    bare.write_text(new.read_text().replace(pg_store_url, pg_url))
    refused = migrate_here(old.path, bare)
    assert refused.returncode == 2 and "archiver store init" in refused.stderr
    # NEW's server unreachable (nothing listens on port 9): a clear error, not a traceback.
    gone = tmp_path / "gone.toml"
    gone.write_text(new.read_text().replace(pg_store_url, "postgresql://migrator@127.0.0.1:9/archive"))
    failed = archiver("store", "migrate", "--source", str(old.path), "--target", str(gone))  # a child
    assert failed.returncode == 1 and "cannot connect to the PostgreSQL store" in failed.stderr
    assert "Traceback" not in failed.stderr
    # A crawler running on OLD: its lock is held.
    lock = EmbeddedStores(old).lock("crawl", 0)
    try:
        refused = migrate_here(old.path, new)
    finally:
        lock.release()
    assert refused.returncode == 2 and "crawler process 0 is already running" in refused.stderr
    # A links batch running in NEW's cluster: it holds the links state's lock.
    batch = open_stores(config.load(new)).links_state()
    try:
        refused = migrate_here(old.path, new)
    finally:
        batch.close()
    assert refused.returncode == 2 and "a links batch is already running in this cluster" in refused.stderr
    # A bundle a crash left open.
    bundle = sorted((old.root / "warcs").glob("*.warc.gz"))[-1]
    bundle.rename(bundle.with_name(bundle.name + ".open"))
    refused = migrate_here(old.path, new)
    assert refused.returncode == 2 and "left open" in refused.stderr
    bundle.with_name(bundle.name + ".open").rename(bundle)
    # Nothing was written by any of them.
    with psycopg.connect(pg_store_url) as db:
        assert db.execute("SELECT count(*) FROM sites").fetchone() == (0,)
    assert objects(s3_bucket).list() == []
    # A NEW that holds another archive's rows, or another object under a bundle's name.
    with psycopg.connect(pg_store_url, autocommit=True) as db:
        db.execute("INSERT INTO sites (origin, added) VALUES ('http://other.example', 0)")
        refused = migrate_here(old.path, new)
        assert refused.returncode == 2 and "table sites is not empty" in refused.stderr
        db.execute("DELETE FROM sites")
    foreign = tmp_path / "foreign"
    foreign.write_bytes(b"another archive's bundle")
    objects(s3_bucket).upload(foreign, bundle.name)
    refused = migrate_here(old.path, new)
    assert refused.returncode == 2 and "holds another object" in refused.stderr
    assert objects(s3_bucket).read(bundle.name, 0, 24) == b"another archive's bundle"
    # OLD's links ledger names a slice it lacks: refused before the ledger is written.
    objects(s3_bucket).delete(bundle.name)
    bitmap = old_slices(old.root)[2]
    bitmap.rename(tmp_path / bitmap.name)
    refused = migrate_here(old.path, new)
    assert refused.returncode == 2 and f"{bitmap} is missing" in refused.stderr
    with psycopg.connect(pg_store_url) as db:
        assert db.execute("SELECT count(*) FROM links_ledger").fetchone() == (0,)
        assert db.execute("SELECT generation FROM links_meta").fetchone() == (0,)
    (tmp_path / bitmap.name).rename(bitmap)
    done = migrate_here(old.path, new)
    assert done.returncode == 0, done.stderr
    check_everything(old, pg_store_url, s3_bucket)


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


def test_the_links_state_resumes_after_its_bitmap(old: config.Config, pg_store_url: str, s3_bucket: Any,
                                                  tmp_path: Path) -> None:
    new = config.load(new_config(tmp_path, pg_store_url, s3_bucket))
    with pytest.raises(Interrupted, match="links bitmap: 1/4 files"):
        migrate.Migration(old, new, out=io.StringIO(), err=InterruptAt("links bitmap")).run()
    with psycopg.connect(pg_store_url) as db:  # a slice is up, the ledger not written yet
        assert db.execute("SELECT count(*) FROM links_ledger").fetchone() == (0,)
        assert db.execute("SELECT generation FROM links_meta").fetchone() == (0,)
    assert [key for key in objects(s3_bucket).list() if key.startswith("links/")] == \
        [f"links/{old_slices(old.root)[0].name}"]
    out = io.StringIO()
    migrate.Migration(old, new, out=out, err=io.StringIO()).run()
    assert "links bitmap: 3 copied, 1 there already" in out.getvalue()
    check_everything(old, pg_store_url, s3_bucket)
