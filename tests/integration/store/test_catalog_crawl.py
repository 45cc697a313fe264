"""The card catalog fed live by a crawl: equal to a reindex, to cdxj-indexer, and to what was served."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import trio

from archiver.store.embedded.catalog import Catalog
from demoweb import WebSpec
from tests.support.crawls import Crawled, warc_files
from tests.support.repo import ARCHIVER, archiver_here


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    result = Crawled(tmp_path_factory.mktemp("catalog"), WebSpec(sites=4, pages_per_site=12, port=0),
                     min_rest=0.02)
    trio.run(result.run)
    return result


def archiver(crawled, *args: str) -> subprocess.CompletedProcess[bytes]:
    cfg = str(crawled.tmp_path / "archiver.toml")
    verb, *rest = args
    return subprocess.run([*ARCHIVER, "catalog", verb, "--config", cfg, *rest],
                          capture_output=True, timeout=120, check=False)


def archiver_in_process(crawled, verb: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return archiver_here("catalog", verb, "--config", str(crawled.tmp_path / "archiver.toml"), *args)


def entries(crawled) -> list[dict]:
    with Catalog(crawled.root / "catalog", crawled.config.catalog.shards) as catalog:
        return [c.to_json() for c in catalog.iter_all()]


def test_live_catalog_equals_reindex_and_verifies(crawled):
    live = entries(crawled)
    assert len(live) == len(crawled.server.log)         # one entry per response fetched
    done = archiver(crawled, "reindex")
    assert done.returncode == 0, done.stderr
    assert b"reindex:" in done.stderr                  # progress on stderr
    assert entries(crawled) == live
    check = archiver(crawled, "verify")
    assert check.returncode == 0, check.stdout
    assert b"OK:" in check.stdout


def test_entries_match_cdxj_indexer(crawled):
    from cdxj_indexer.main import write_cdx_index

    ours = {(e["filename"], int(e["offset"])): e for e in entries(crawled)}
    theirs = {}
    for path in warc_files(crawled.root):
        out = crawled.tmp_path / (path.name + ".cdxj")
        write_cdx_index(str(out), [str(path)], {})
        for line in out.read_text().splitlines():
            urlkey, timestamp, fields = line.split(" ", 2)
            fields = json.loads(fields)
            theirs[(fields["filename"], int(fields["offset"]))] = (urlkey, timestamp, fields)
    assert ours.keys() == theirs.keys()
    for key, (urlkey, timestamp, fields) in theirs.items():
        mine = ours[key]
        assert (mine["urlkey"], mine["timestamp"]) == (urlkey, timestamp)
        assert int(mine["length"]) == int(fields["length"])
        assert mine["digest"] == fields["digest"] and mine["url"] == fields["url"]


def test_export_cdxj_is_sorted_and_complete(crawled, tmp_path):
    out = tmp_path / "all.cdxj"
    assert archiver(crawled, "export-cdxj", "-o", str(out)).returncode == 0
    lines = out.read_text().splitlines()
    assert lines == sorted(lines) and len(lines) == len(entries(crawled))


def test_get_returns_the_served_bytes(crawled):
    web = crawled.web
    checked = 0
    for record in crawled.server.log[:40]:
        reply = web.respond(record.host, record.target)
        if reply.status != 200 or reply.behaviour in ("gzip", "chunked"):
            continue
        url = web.origin(record.host) + record.target
        got = archiver_in_process(crawled, "get", url, "--at", "2100")
        assert got.returncode == 0, got.stderr
        assert got.stdout == reply.body, url
        checked += 1
    assert checked >= 5
    # The verb as a child process too: the payload through a pipe.
    head = archiver(crawled, "get", web.origin(web.hosts[0]) + "/", "--at", "1996", "--headers")
    assert head.stdout.startswith(b"HTTP/1.1 200")
    assert head.stdout.endswith(web.respond(web.hosts[0], "/").body)


def test_queries_from_the_command_line(crawled):
    web = crawled.web
    home = web.origin(web.hosts[0]) + "/"
    closest = archiver(crawled, "closest", home, "--at", "2026-01-01", "--json")
    assert closest.returncode == 0
    found = json.loads(closest.stdout)
    assert found["url"] == home and found["status"] in (200, "200")
    listed = archiver(crawled, "list", "--host", home, "--json")
    urls = [json.loads(line)["url"] for line in listed.stdout.splitlines()]
    assert home in urls and all(u.startswith(web.origin(web.hosts[0])) for u in urls)
    none = archiver(crawled, "captures", "http://never.example/", "--json")
    assert none.returncode == 1 and none.stdout == b""


@pytest.mark.parametrize("args, needle", [
    (("closest", "http://[::1", "--at", "2026"), b"URL"),
    (("closest", "http://a.demo/", "--at", "2026-13-01"), b"date"),
    (("captures", "http://a.demo/", "--from", "yesterday"), b"date"),
    (("get", "http://a.demo/", "--at", "123"), b"date"),
])
def test_bad_input_exits_2(crawled, args, needle):
    result = archiver_in_process(crawled, *args)
    assert result.returncode == 2
    assert needle.lower() in result.stderr.lower()


def test_reindex_refuses_a_truncated_or_foreign_file(crawled, tmp_path):
    before = entries(crawled)
    [first, *_] = warc_files(crawled.root)
    shutil.copy(first, tmp_path / "a-good.warc.gz")
    cases = {"torn": first.read_bytes()[: first.stat().st_size // 2],
             "foreign": b"this is not a WARC file\n" * 10}
    for (name, data), run in zip(cases.items(), (archiver, archiver_in_process), strict=True):
        bad = tmp_path / f"{name}.warc.gz"
        bad.write_bytes(data)
        result = run(crawled, "reindex", "--warcs", str(tmp_path / "*.warc.gz"))  # a child, then here
        assert result.returncode == 2, result
        assert str(bad).encode() in result.stderr and b"catalog left as it was" in result.stderr
        bad.unlink()
        assert entries(crawled) == before
        assert not (crawled.root / "catalog.reindex").exists()
