"""The reading verbs of ``archiver`` in both modes (``tests.support.storemodes``): the catalog's
queries, ``get``, ``verify``, ``reindex`` and ``export-cdxj`` over bundles in the WARC folder or the
object store, and ``status`` over status files or the cluster's table of crawlers."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.support.repo import ARCHIVER, archiver_here
from tests.support.statusrows import register, status_of
from tests.support.storemodes import ModeArchive, entries_of, write_bundles

PAGES = {f"http://example.org/doc/{i}": b"%d: " % i + bytes(range(256)) * (i + 1) for i in range(9)}


def archiver(archive: ModeArchive, *args: str) -> subprocess.CompletedProcess[bytes]:
    """On the shared stores, the verb run as a child process, as an operator runs it; on the
    embedded ones in this process (``here``), as tests/integration/test_cli.py and
    store/test_catalog_crawl.py run these verbs as children on an embedded archive."""
    if archive.mode == "embedded":
        return here(archive, *args)
    return subprocess.run([*ARCHIVER, *args, "--config", str(archive.path)], capture_output=True,
                          timeout=120, check=False)


def here(archive: ModeArchive, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The verb run in this process (``archiver_here``): the same code without a child's start-up."""
    return archiver_here(*args, "--config", str(archive.path))


def test_catalog_verbs(mode_archive: ModeArchive, tmp_path: Path) -> None:
    bundles = write_bundles(tmp_path / "new", PAGES, mime="application/octet-stream")
    contents = {path.name: path.read_bytes() for path in bundles}
    entries = entries_of(bundles)
    mode_archive.keep(bundles)
    with mode_archive.stores.catalog() as catalog:
        catalog.add(entries[1:])
    url = "http://example.org/doc/4"

    found = archiver(mode_archive, "catalog", "closest", url, "--at", "2030", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == next(c for c in entries if c.url == url).to_json()
    out = tmp_path / "payload"
    got = here(mode_archive, "catalog", "get", url, "--at", "2026", "-o", str(out))
    assert got.returncode == 0, got.stderr
    assert out.read_bytes() == PAGES[url]

    differs = archiver(mode_archive, "catalog", "verify")
    assert differs.returncode == 1
    assert f"not indexed: {entries[0].filename}:{entries[0].offset} ".encode() in differs.stdout
    assert f"DIFFERENCES FOUND: {len(entries) - 1} entries, {len(entries)} response/revisit records in " \
           f"{len(bundles)} file(s)".encode() in differs.stdout

    rebuilt = archiver(mode_archive, "catalog", "reindex")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert f"reindexed {len(bundles)} WARC file(s): {len(entries)} entries".encode() in rebuilt.stdout
    assert b"reindex:" in rebuilt.stderr
    verified = here(mode_archive, "catalog", "verify")
    assert verified.returncode == 0 and b"OK: " in verified.stdout, verified.stdout
    exported = here(mode_archive, "catalog", "export-cdxj")
    assert len(exported.stdout.splitlines()) == len(entries)

    last = sorted(contents)[-1]
    mode_archive.overwrite(last, contents[last][:-1])
    refused = here(mode_archive, "catalog", "reindex")
    assert refused.returncode == 2
    assert last.encode() in refused.stderr and b"catalog left as it was" in refused.stderr
    assert here(mode_archive, "catalog", "verify").returncode == 1
    assert here(mode_archive, "catalog", "get", url, "--at", "2026", "-o", str(out)).returncode == 0


def test_status_shows_every_process(mode_archive: ModeArchive) -> None:
    stores = mode_archive.stores
    nothing = here(mode_archive, "status")
    assert nothing.returncode == 0 and nothing.stdout.startswith(b"no crawler status in ")
    register(stores, 0, "crawl-a.example", pid=1234)
    register(stores, 1, "crawl-b.example", pid=999, heartbeat_ago=1000)
    status = stores.status()
    try:
        status.write(0, status_of(0, 10, active={"http://a.example": {"queued": 4, "url": "http://a.example/x"}}))
        status.write(1, status_of(1, 20))
    finally:
        status.close()
    text = archiver(mode_archive, "status")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.decode().splitlines()
    heads = [line for line in lines if line.startswith("process ")]
    # No crawler holds an embedded process's lock; in a cluster the heartbeat tells.
    assert [line.split(", pid")[0].split(" (last seen ")[0] for line in heads] == (
        ["process 0: stopped", "process 1: stopped"] if mode_archive.mode == "embedded"
        else ["process 0 on crawl-a.example: running", "process 1 on crawl-b.example: stopped"])
    assert "pages=10 " in text.stdout.decode() and "pages=20 " in text.stdout.decode()
    assert "  http://a.example  queued=4  http://a.example/x" in lines
    if mode_archive.mode == "shared":
        assert re.search(r", heartbeat \d+s ago$", heads[0])  # well within crawl.lease_ttl
        assert re.search(r", heartbeat 1\d\d\ds ago \(past crawl.lease_ttl: gone\?\)$", heads[1])
    as_json = json.loads(here(mode_archive, "status", "--json").stdout)
    assert [(s["process"], s["pages"]) for s in as_json] == [(0, 10), (1, 20)]
    assert [s["running"] for s in as_json] == [mode_archive.mode == "shared", False]
    if mode_archive.mode == "shared":
        assert [s["host"] for s in as_json] == ["crawl-a.example", "crawl-b.example"]
        assert as_json[1]["heartbeat_age"] >= 1000


LOST = "session lost: http://members.example/p7 did not contain 'Log out'"


def test_a_paused_site_in_status_why_and_site_resume(mode_archive: ModeArchive) -> None:
    stores, origin = mode_archive.stores, "http://members.example"
    queue = stores.site_queue(stores.site_queue_of(origin))
    try:
        for site in (origin, "http://open.example"):
            queue.add(site, now=0)
        assert queue.claim(include_deferred=False, now=0) == origin
        queue.pause(origin, LOST)
        queue.count_gatekeepers(origin, {"challenge": 12})
    finally:
        queue.close()
    with stores.catalog():  # made (empty), for why
        pass
    text = here(mode_archive, "status", "--sites").stdout.decode().splitlines()
    assert [line for line in text if line.startswith(origin)] == [
        f"{origin}  paused  visits=1  inlinks=0  hops=0  priority=0.0  gatekeepers=challenge:12"
        f"  note={LOST!r}"]
    listed = here(mode_archive, "status", "--sites", "--json").stdout
    sites = [json.loads(line) for line in listed.splitlines()]
    paused = next(site for site in sites if site["origin"] == origin)
    assert (paused["state"], paused["note"], paused["gatekeepers"]) == ("paused", LOST, {"challenge": 12})
    why = here(mode_archive, "why", origin + "/p7")
    assert why.returncode == 1 and f"is paused ({LOST})".encode() in why.stdout

    resumed = archiver(mode_archive, "site", "resume", origin)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.decode() == (f"site resume: {origin} was paused ({LOST}); it waits for a "
                                       "crawler now, and its next visit goes on from its cursor\n")
    again = here(mode_archive, "site", "resume", "members.example")
    assert again.returncode == 1 and again.stdout == b""
    assert again.stderr == f"archiver: site resume: {origin} is waiting, not paused; nothing to do\n".encode()
    unknown = here(mode_archive, "site", "resume", "https://members.example")
    assert unknown.returncode == 2
    assert unknown.stderr == b"archiver: site resume: no site queue holds https://members.example\n"
    bad = here(mode_archive, "site", "resume", "mailto:x@y")
    assert bad.returncode == 2 and b"site resume: 'mailto:x@y' names no site" in bad.stderr
    assert b"Traceback" not in again.stderr + unknown.stderr + bad.stderr
