"""The ``archiver`` command as operators run it: real processes, signals, exit codes."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from demoweb import WebSpec, run_demo_process
from tests.support.crawls import (
    captures,
    load,
    records,
    warc_files,
    warcio_check,
    write_config,
    write_seeds,
)
from tests.support.repo import ARCHIVER, archiver_here, archiver_here_text
from tests.support.storemodes import LOOKED_UP, lookup_archive


def archiver(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARCHIVER, *args], capture_output=True, text=True, timeout=120, **kw)


def wait_for(condition, timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``condition`` until it holds (the crawler is another process)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def pages_reported(root: Path) -> int:
    try:
        return json.loads((root / "state" / "crawl-0.json").read_text())["pages"]
    except (OSError, ValueError):
        return 0


def test_crawl_until_idle_then_status(tmp_path):
    spec = WebSpec(sites=3, pages_per_site=10, port=0, trap=False)
    with run_demo_process(spec) as (web, _port, _proc):
        cfg = write_config(tmp_path, web)
        hosts = [o.split("://")[1] for o in web.origins()]
        seeds = write_seeds(tmp_path / "seeds.txt", [*hosts[:1], *(o + "/" for o in web.origins())])
        done = archiver("crawl", "run", "--config", str(cfg), "--seeds", str(seeds), "--until-idle")
    assert done.returncode == 0, done.stderr
    root = load(cfg).root
    assert "WARCs in" in done.stdout and str(root / "warcs") in done.stdout
    assert set(captures(root)) >= web.expected("archiver") - {
        u for u in web.expected("archiver") if "robots500" in u}
    assert warcio_check(warc_files(root)).returncode == 0
    assert "level=info event=progress" in done.stderr or "event=crawler-stop" in done.stderr
    pages = sum(captures(root).values()) + sum(1 for _ in records(root, "revisit"))
    status = archiver("status", "--config", str(cfg))
    assert status.returncode == 0 and f"pages={pages}" in status.stdout
    as_json = json.loads(archiver_here("status", "--config", str(cfg), "--json").stdout)  # in this process
    assert as_json[0]["pages"] == pages


def test_warc_store_names_another_folder_for_the_bundles(tmp_path):
    spec = WebSpec(sites=1, pages_per_site=5, port=0, trap=False)
    with run_demo_process(spec) as (web, _port, _proc):
        cfg = write_config(tmp_path, web)
        cfg.write_text(cfg.read_text() + '[warc]\nstore = "bundles"\n')
        seeds = write_seeds(tmp_path / "seeds.txt", [o + "/" for o in web.origins()])
        done = archiver("crawl", "run", "--config", str(cfg), "--seeds", str(seeds), "--until-idle")
    assert done.returncode == 0, done.stderr
    bundles = sorted((tmp_path / "bundles").glob("*.warc.gz"))
    assert bundles and str(tmp_path / "bundles") in done.stdout
    assert not (load(cfg).root / "warcs").exists()
    assert warcio_check(bundles).returncode == 0
    verified = archiver_here("catalog", "verify", "--config", str(cfg))  # a child's in test_catalog_crawl
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.parametrize("text, needle", [
    ('[store]\nurl = "postgresql://archiver@127.0.0.1:1/archive"\n',
     "cannot connect to the PostgreSQL store"),
    ('[warc]\nstore = "s3://bundles/crawl"\n', "warc.store: object storage needs the shared state"),
])  # fmt: skip
def test_stores_that_cannot_be_used_are_refused_before_anything_runs(tmp_path, text, needle):
    cfg = tmp_path / "archiver.toml"
    cfg.write_text('[archive]\nroot = "archive"\n' + text)
    done = archiver("status", "--config", str(cfg))
    assert done.returncode == 2 and needle in done.stderr
    assert not (tmp_path / "archive").exists()


def test_sigterm_stops_cleanly_and_a_restart_resumes(tmp_path):
    spec = WebSpec(sites=4, pages_per_site=20, port=0, trap=False)
    with run_demo_process(spec) as (web, _port, _proc):
        cfg = write_config(tmp_path, web)
        root = load(cfg).root
        seeds = write_seeds(tmp_path / "seeds.txt", [o + "/" for o in web.origins()])
        daemon = subprocess.Popen([*ARCHIVER, "crawl", "run", "--config", str(cfg), "--seeds", str(seeds)],
                                  stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: pages_reported(root) >= 20, what="20 pages in the status file")
        except AssertionError:
            daemon.kill()
            raise
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
        log = daemon.stderr.read()
        assert "event=stopping signal=SIGTERM" in log
        assert not list((root / "warcs").glob("*.open"))
        assert not list((root / "spool").glob("*.open"))
        first = captures(root)
        assert warcio_check(warc_files(root)).returncode == 0
        queue = SiteQueue(queue_path(root, 0))
        assert queue.counts()["active"] == 0 and queue.counts()["waiting"] >= 1
        queue.close()

        again = archiver("crawl", "run", "--config", str(cfg), "--until-idle")
    assert again.returncode == 0, again.stderr
    caps = captures(root)
    expected = web.expected("archiver") - {u for u in web.expected("archiver") if "robots500" in u}
    assert set(caps) - {u for u in caps if "robots500" in u} == expected
    # Only fetches in flight at the stop (one per site) may be fetched twice.
    twice = [u for u, n in caps.items() if n > 1 and "robots500" not in u]
    assert len(twice) <= len(web.origins()), twice
    assert sum(first.values()) < sum(caps.values())


@pytest.mark.parametrize("text, needle, run", [
    ("[crawl]\nsites_per_proces = 3\n", "crawl.sites_per_proces: unknown key", archiver),
    ("[warc]\nmax_size = 'big'\n", "warc.max_size: expected an integer", archiver_here_text),
])
def test_bad_config_exits_2_naming_the_key(tmp_path, text, needle, run):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    seeds = write_seeds(tmp_path / "seeds.txt", ["http://a.demo/"])
    result = run("crawl", "run", "--config", str(cfg), "--seeds", str(seeds), "--until-idle")
    assert result.returncode == 2
    assert needle in result.stderr and str(cfg) in result.stderr
    assert not (tmp_path / "archive").exists()


def test_bad_seeds(tmp_path):
    cfg = tmp_path / "ok.toml"
    cfg.write_text('[archive]\nroot = "archive"\n[dns]\nhosts_file = ""\nnameservers = ["127.0.0.1:9"]\n')
    empty = write_seeds(tmp_path / "seeds.txt", ["mailto:someone@example.org", "::::"])
    result = archiver("crawl", "run", "--config", str(cfg), "--seeds", str(empty), "--until-idle")
    assert result.returncode == 2 and "no usable seed" in result.stderr
    assert "event=bad-seed" in result.stderr and "line=3" in result.stderr
    missing = archiver_here_text("crawl", "run", "--config", str(cfg), "--seeds", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "cannot read seeds" in missing.stderr


@pytest.mark.parametrize(("verb", "named"), [(["links", "run", "--once"], "links"),
                                             (["links", "reshard", "--slices", "2"], "links reshard")])
def test_a_store_that_fails_is_named_with_exit_status_1(tmp_path, verb, named):
    (tmp_path / "archive" / "links").mkdir(parents=True)
    (tmp_path / "archive" / "links" / "state.sqlite").write_bytes(b"not a database " * 20)
    config = tmp_path / "archiver.toml"
    config.write_text(f'[archive]\nroot = "{tmp_path / "archive"}"\n')
    done = archiver_here_text(*verb, "--config", str(config))
    assert (done.returncode, done.stdout) == (1, "")
    state = tmp_path / "archive" / "links" / "state.sqlite"
    assert done.stderr == f"archiver: {named}: {state}: file is not a database\n"


def test_a_crawler_whose_site_queue_is_not_a_database_names_it_with_exit_status_1(tmp_path):
    queue = queue_path(tmp_path / "archive", 0)
    queue.parent.mkdir(parents=True)
    queue.write_bytes(b"not a database " * 20)
    config = tmp_path / "archiver.toml"
    config.write_text(f'[archive]\nroot = "{tmp_path / "archive"}"\n')
    done = archiver_here_text("crawl", "run", "--until-idle", "--config", str(config))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == f"archiver: crawl: {queue}: file is not a database"
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("verb", "damaged"), [
    (["catalog", "closest", LOOKED_UP, "--at", "2030"], "catalog"),
    (["dns", "lookup", "example.org", "--at", "2030"], "dns"),
])
def test_a_lookup_in_a_file_that_is_no_longer_a_database_is_one_line_naming_it(tmp_path, verb,
                                                                                damaged):
    config = lookup_archive(tmp_path)
    files = {"catalog": next((tmp_path / "archive" / "catalog").glob("*.sqlite")),
             "dns": tmp_path / "archive" / "dns.sqlite"}
    assert archiver_here_text(*verb, "--config", str(config)).returncode == 0
    with files[damaged].open("r+b") as f:
        f.write(b"no longer a database")                       # over SQLite's header
    done = archiver_here_text(*verb, "--config", str(config))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (f"archiver: {verb[0]}: {files[damaged]}: file is not "
                                            "a database")
    assert "Traceback" not in done.stderr


def test_a_listing_cut_short_by_its_reader_ends_quietly(tmp_path):
    (tmp_path / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    with SiteQueue(queue_path(tmp_path / "archive", 0)) as queue:
        for n in range(3000):                        # far more than a pipe holds
            queue.add(f"http://site-{n}.test", now=0)
    listing = subprocess.Popen([*ARCHIVER, "status", "--sites", "--config",
                                str(tmp_path / "archiver.toml")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert listing.stdout is not None and listing.stderr is not None
    first = listing.stdout.readline()                 # `| head -1`
    listing.stdout.close()
    errors = listing.stderr.read().decode()
    assert listing.wait(timeout=60) == 141 and first.startswith(b"http://site-")
    assert "Traceback" not in errors and "Broken pipe" not in errors
