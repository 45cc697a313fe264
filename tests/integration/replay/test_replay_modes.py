"""The replay service in both modes (``tests.support.storemodes``), over real HTTP: real WARC
bundles kept in the WARC folder or shipped to the S3 bucket, their entries in the SQLite or the
PostgreSQL catalog, every capture served with the bytes of its record; the status page names
each crawler process of the cluster."""

from __future__ import annotations

from pathlib import Path

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
