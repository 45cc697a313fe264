"""Crash safety: kill -9 at random points, torn bundles repaired at start, drain and reload."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from datetime import UTC, datetime

from archiver.config import WarcConfig, from_dict
from archiver.crawl.recovery import recover
from archiver.store.bundles import BundleWriter
from archiver.store.embedded.catalog import Catalog
from archiver.store.warcindex import read_record
from archiver.stores import open_stores
from demoweb import WebSpec, run_demo_process
from tests.support.crashes import kill_and_restart, kill_costs, run_until_fetches
from tests.support.crawls import captures, load, records, warc_files, warcio_check, write_config
from tests.support.repo import ARCHIVER

SYNC = 0.2
MIN_REST = 0.02


def test_kill_9_at_random_points_costs_only_the_fetches_in_flight(tmp_path):
    spec = WebSpec(sites=4, pages_per_site=30, port=0, trap=False)
    requests = tmp_path / "requests.jsonl"
    with run_demo_process(spec, requests) as (web, _port, _proc):
        cfg = write_config(tmp_path, web, min_rest=MIN_REST)
        # Small bundles: a kill also finds records past the commit point in rotated bundles.
        cfg.write_text(cfg.read_text() + f"[warc]\nsync_interval = {SYNC}\nmax_size = 100000\n")
        root = load(cfg).root
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(o + "/\n" for o in web.origins()))
        # Every third kill lands while the crawler starts, in the middle of its recovery.
        runs, final = kill_and_restart(cfg, seeds, kills=12, max_fetches=40,
                                       rng=random.Random(20261122), early_every=3)
    assert final.returncode == 0, final.stderr
    costs = kill_costs(requests, runs)
    assert len(costs) >= 10, f"only {len(costs)} kills before the crawl ended: make the web bigger"
    # What a kill costs: the fetch each active site had in flight, and the robots.txt each
    # interrupted visit fetches again when it starts over.
    for cost in costs:
        assert cost.pages <= cost.active and cost.robots <= cost.active, costs
    assert sum(cost.active for cost in costs) > 0

    # A page fetched again after a restart may be stored as a revisit (same payload).
    got = captures(root) + Counter(r.rec_headers.get_header("WARC-Target-URI")
                                   for r, _ in records(root, "revisit"))
    expected = {u for u in web.expected("archiver") if "robots500" not in u}  # retried by design
    assert expected <= set(captures(root))
    twice = {u: n - 1 for u, n in got.items() if n > 1 and "robots500" not in u}
    assert sum(n for u, n in twice.items() if "/robots" not in u) <= sum(c.pages for c in costs)

    warcs = warc_files(root)
    assert len(warcs) > 10
    assert not [p for p in warcs if p.name.endswith((".open", ".corrupt"))]
    assert warcio_check(warcs).returncode == 0
    config = load(cfg)
    with Catalog(root / "catalog", config.catalog.shards) as catalog:
        entries = list(catalog.iter_all())
    responses = Counter()
    for capture in entries:
        stored = read_record(root / "warcs", capture.filename, capture.offset, capture.length)
        assert stored.url == capture.url and stored.rectype == capture.rectype
        responses[capture.url] += 1
    assert responses == got                             # every complete record is indexed


def test_a_torn_open_bundle_is_repaired_and_its_records_indexed_at_start(tmp_path):
    warcs = tmp_path / "warcs"
    writer = BundleWriter(warcs, WarcConfig(), process=3)
    for n in range(3):
        writer.write_exchange(url=f"http://a.test/{n}", ip="127.0.0.1",
                              date=datetime(2026, 11, 22, 0, 0, n, tzinfo=UTC),
                              request=b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
                              response_head=b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
                              response_body=b"page %d " % n * 100)
    writer.flush()
    path = writer.current_path
    assert path is not None and path.name.endswith(".open")
    size = path.stat().st_size
    with path.open("r+b") as f:                         # a kill in the middle of the last record
        f.truncate(size - 40)
    other = warcs / "ARCHIVER-20261122000000-4-00000.warc.gz.open"
    other.write_bytes(b"another process's bundle")
    config = from_dict({"archive": {"root": str(tmp_path)}})
    with Catalog(tmp_path / "catalog", 10) as catalog:
        assert recover(config, open_stores(config), 3, catalog).bundles_repaired == 1
        entries = list(catalog.iter_all())
    assert other.exists()                               # never another process's file
    assert sorted(e.url for e in entries) == ["http://a.test/0", "http://a.test/1", "http://a.test/2"]
    closed = path.with_name(path.name.removesuffix(".open"))
    assert closed.exists() and not path.exists()
    assert warcio_check([closed]).returncode == 0


def test_sigterm_drains_within_the_configured_time_and_sighup_reloads(tmp_path):
    spec = WebSpec(sites=3, pages_per_site=40, port=0, trap=False)
    with run_demo_process(spec) as (web, _port, _proc):
        cfg = write_config(tmp_path, web, min_rest=20.0, max_rest=30.0, drain_timeout=5.0)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(o + "/\n" for o in web.origins()))
        proc = subprocess.Popen([*ARCHIVER, "crawl", "run", "--config", str(cfg), "--seeds", str(seeds)],
                                stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        try:
            assert run_until_fetches(proc, 3)        # each site rests 20 s after robots.txt
            good = cfg.read_text()
            cfg.write_text(good + "[bogus]\n")         # a broken config: refused, the old one stays
            proc.send_signal(signal.SIGHUP)
            assert wait_line(proc, "event=reload-refused") and "unknown section [bogus]" in proc.last
            cfg.write_text(good.replace("min_rest = 20.0", "min_rest = 0.05")
                           .replace('level = "debug"', 'level = "info"'))
            proc.send_signal(signal.SIGHUP)
            assert wait_line(proc, "event=reloaded")
            # With the new rest the sites go on at once (progress lines are info level).
            assert wait_line(proc, "event=progress", pages_over=10)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            rest = proc.stderr.read()
            assert proc.wait(timeout=30) == 0
            drained = time.monotonic() - started
        finally:
            proc.kill()
    assert "event=stopping signal=SIGTERM" in rest
    assert drained < 5.0 + 3.0                         # drain_timeout plus flushing
    assert "event=fetched" not in rest                 # log level info after the reload
    root = load(cfg).root
    assert not list((root / "warcs").glob("*.open"))


def wait_line(proc: subprocess.Popen[str], needle: str, pages_over: int | None = None) -> bool:
    """Read log lines until one holds ``needle`` (and, for progress, pages= above a number)."""
    assert proc.stderr is not None
    for line in proc.stderr:
        proc.last = line  # type: ignore[attr-defined]
        if needle in line:
            if pages_over is None:
                return True
            pages = int(line.split("pages=")[1].split()[0].strip('"'))
            if pages > pages_over:
                return True
    return False


def test_the_dns_links_and_replay_services_reload_on_sighup_and_stop_cleanly(tmp_path):
    # Both replay listeners on free ports: the defaults may be taken (the demo's replay).
    good = ('[archive]\nroot = "archive"\n[dns]\nhosts_file = ""\nnameservers = ["127.0.0.1:9"]\n'
            'timeout = 0.2\n[replay]\nlisten = "127.0.0.1:0"\ncontent_listen = "127.0.0.1:0"\n'
            '[log]\nlevel = "info"\n')
    services = {}
    try:
        # The three start together (their start-ups overlap), each on an archive and a config
        # file of its own, which the test then edits under it.
        for command, ready in ((("dns", "run"), "event=dns-pass"),
                               (("links", "run"), "event=service-ready"),
                               (("replay", "run"), "Running on")):
            cfg = tmp_path / command[0] / "archiver.toml"
            cfg.parent.mkdir()
            cfg.write_text(good)
            Catalog(cfg.parent / "archive" / "catalog", 1000).close()
            proc = subprocess.Popen([*ARCHIVER, *command, "--config", str(cfg)],
                                    stderr=subprocess.PIPE, text=True)
            services[command] = (cfg, ready, proc)
        for command, (cfg, ready, proc) in services.items():
            assert wait_line(proc, ready), command
            cfg.write_text(good + "[bogus]\n")
            proc.send_signal(signal.SIGHUP)
            assert wait_line(proc, "event=reload-refused"), command
            cfg.write_text(good.replace('"info"', '"warning"'))
            proc.send_signal(signal.SIGHUP)
            assert wait_line(proc, "event=reloaded"), command
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, command
    finally:
        for _, _, proc in services.values():
            proc.kill()


def test_a_fetch_that_hangs_is_cancelled_when_the_drain_time_runs_out(tmp_path):
    spec = WebSpec(sites=1, pages_per_site=3, port=0, trap=False, hostile=True)
    with run_demo_process(spec) as (web, _port, _proc):
        cfg = write_config(tmp_path, web, min_rest=0.02, first_byte_timeout=60.0,
                           total_timeout=120.0, drain_timeout=1.0)
        hostile = next(o for o in web.origins() if "//hostile." in o)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"{hostile}/hang\n")
        proc = subprocess.Popen([*ARCHIVER, "crawl", "run", "--config", str(cfg), "--seeds", str(seeds)],
                                stderr=subprocess.PIPE, text=True)
        try:
            status = load(cfg).root / "state" / "crawl-0.json"
            deadline = time.monotonic() + 30
            while f"{hostile}/hang" not in (status.read_text() if status.exists() else ""):
                assert time.monotonic() < deadline, "the crawler never reached /hang"
                time.sleep(0.05)                       # the crawler is another process: poll
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
            stopped = time.monotonic() - started
            log = proc.stderr.read()
        finally:
            proc.kill()
    assert stopped < 1.0 + 4.0                         # drain_timeout, then closing: not 60 s
    assert "event=drain-timeout" in log
    assert not list((load(cfg).root / "warcs").glob("*.open"))
