"""The replay service in both modes (``tests.support.storemodes``), over real HTTP: real WARC
bundles kept in the WARC folder or shipped to the S3 bucket, their entries in the SQLite or the
PostgreSQL catalog, every capture served with the bytes of its record; the status page names
each crawler process of the cluster."""

from __future__ import annotations

import dataclasses
import html
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from archiver.replay.app import SITE_COUNTED, SITES_PAGE
from archiver.store.catalogkeys import surt_key
from archiver.store.warcindex import read_record
from tests.support.httpclient import get
from tests.support.replayarchive import serving
from tests.support.statusrows import register, status_of
from tests.support.storemodes import ModeArchive, entries_of, write_bundles

PAGES = {
    "http://example.org/": b"<!doctype html><title>home</title><a href=/a>a</a>" * 20,
    "http://example.org/a": b"<!doctype html><title>a</title><p>" + "caf\u00e9 ".encode() * 300,
    "http://example.org/data.bin": bytes(range(256)) * 12,
    "http://example.org/a?page=2": b"<!doctype html><p>second page</p>",
    "https://other.example.net/": b"<!doctype html><p>another host</p>" * 50,
}


async def test_every_capture_is_served_with_its_record_bytes(mode_archive: ModeArchive,
                                                             tmp_path: Path) -> None:
    local = tmp_path / "new"
    bundles = write_bundles(local, PAGES, max_size=3000)
    assert len(bundles) >= 2
    entries = entries_of(bundles)
    records = {c.url: read_record(local, c.filename, c.offset, c.length) for c in entries}
    mode_archive.keep(bundles)
    with mode_archive.stores.catalog() as catalog:
        catalog.add(entries)
    register(mode_archive.stores, 3, "crawl-c.example", pid=4321)
    status = mode_archive.stores.status()
    try:
        status.write(3, status_of(3, 77))
    finally:
        status.close()

    async with serving(mode_archive.config) as running:
        content, app = running.content, running.app
        for capture in entries:
            served = await get(content, f"/web/{capture.timestamp}id_/{capture.url}")
            assert served.status == 200, capture.url
            assert served.body == records[capture.url].payload == PAGES[capture.url]
            assert served.header("Content-Type") == "text/html"
        page = await get(content, f"/web/{entries[0].timestamp}/{entries[0].url}")
        assert page.status == 200 and b"<title>home</title>" in page.body
        cdx = await get(app, "/cdx?url=example.org/*&output=json")
        assert cdx.body.count(b'"http://example.org/') == 4
        missing = await get(content, f"/web/{entries[0].timestamp}id_/http://example.org/never")
        assert missing.status == 404
        status_page = (await get(app, "/status")).body.decode()
    where = " on crawl-c.example" if mode_archive.mode == "shared" else ""
    assert f"Process 3{where} (pid " in status_page and "77" in status_page


LATER = datetime(2027, 1, 1, tzinfo=UTC)


async def test_the_home_page_lists_every_site_a_page_at_a_time(mode_archive: ModeArchive,
                                                               tmp_path: Path) -> None:
    """Each site once across the pages, with its captures (counted up to SITE_COUNTED), its
    latest capture and a link to its front page's latest capture."""
    bundles = write_bundles(tmp_path / "new", PAGES, max_size=3000)
    entries = entries_of(bundles)
    mode_archive.keep(bundles)
    root = next(c for c in entries if c.url == "http://example.org/")
    # Catalog rows alone (the home page reads no record): many sites, and one past the count.
    many = [dataclasses.replace(root, url=f"http://site{n:03d}.test/", urlkey=surt_key(f"http://site{n:03d}.test/"))
            for n in range(SITES_PAGE + 20)]
    busy = [dataclasses.replace(root, url=f"http://busy.test/{n}", urlkey=surt_key(f"http://busy.test/{n}"),
                                timestamp=f"{LATER + timedelta(seconds=n):%Y%m%d%H%M%S}")
            for n in range(SITE_COUNTED + 5)]
    with mode_archive.stores.catalog() as catalog:
        catalog.add([*entries, *many, *busy])
    seen: list[str] = []
    async with serving(mode_archive.config) as running:
        path: str | None = "/"
        while path is not None:
            answer = await get(running.app, path)
            page = answer.body.decode()
            assert answer.status == 200, page
            rows = re.findall(r'<tr><td class="url"><a href="[^"]*/calendar/([^"]+)">.*?</tr>', page, re.S)
            assert rows and len(rows) <= SITES_PAGE
            seen += rows
            more = re.search(r'<a href="([^"]+)">More sites</a>', page)
            path = html.unescape(more[1]).removeprefix(running.app) if more else None
            if "example.org" in rows:
                row = re.search(r'calendar/example.org">.*?</tr>', page, re.S)
                assert row and "<td>4</td>" in row[0]  # /, /a, /data.bin, /a?page=2
                assert f'href="{running.content}/web/{root.timestamp}/http://example.org/"' in row[0]
            if "busy.test" in rows:
                row = re.search(r'calendar/busy.test">.*?</tr>', page, re.S)
                assert row and f"<td>{SITE_COUNTED:,}+</td>" in row[0] and "or later" in row[0]
                assert "not captured" in row[0]  # no front page
        assert (await get(running.app, "/?after=%00")).status == 400
    expected = {"example.org", "other.example.net", "busy.test",
                *(f"site{n:03d}.test" for n in range(SITES_PAGE + 20))}
    assert sorted(seen) == sorted(expected)
