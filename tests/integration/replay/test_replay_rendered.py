"""A rendered page through the replay service, in both modes (``tests.support.storemodes``): its
screenshot and text (``urn:screenshot:<url>``, ``urn:text:<url>`` resource records written with
``BundleWriter.write_resource``) served at their ``id_`` addresses, exact bytes and content type,
with the content isolation; the capture list's thumbnail beside the capture that has one and no
other; the banner's screenshot link; ``rendered`` in ``/cdx``; and ``why`` saying it."""

from __future__ import annotations

import contextlib
import json
import re
import struct
import zlib
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import trio

from archiver.config import WarcConfig, load
from archiver.replay.app import APP_CSP, CSP
from archiver.replay.why import explain, gather
from archiver.store.bundles import BundleWriter
from archiver.store.catalog_maintenance import WarcFiles, reindex
from archiver.web.timestamps import from_datetime
from tests.support import chromium
from tests.support.httpclient import get
from tests.support.replayarchive import serving
from tests.support.storemodes import DATE, ModeArchive, entries_of

PAGE = "http://example.org/app/"
OTHER = "http://example.org/static.html"
REQUEST = b"GET /app/ HTTP/1.1\r\nHost: example.org\r\n\r\n"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
TEXT = "Le menu déroulant\nItems: 3\n".encode()
REASON = "auto: empty app root #app"
STEP = 10.0  # seconds allowed for a page to load in Chromium (it takes well under one)
RENDERED_AT, PLAIN_AT = from_datetime(DATE), from_datetime(DATE + timedelta(seconds=2))


def write_archive(folder: Path) -> list[Path]:
    """The page rendered at RENDERED_AT (response, screenshot, text, labels), fetched over HTTP
    alone at PLAIN_AT, and another page at RENDERED_AT without a rendering."""
    with BundleWriter(folder, WarcConfig(prefix="r")) as writer:
        page = writer.write_exchange(url=PAGE, ip="127.0.0.1", date=DATE, request=REQUEST,
                                     response_head=HEAD, response_body=b"<div id=app></div>")
        writer.write_resource(url="urn:screenshot:" + PAGE, date=DATE, refers_to=page.record_id,
                              content_type="image/png", payload=PNG)
        writer.write_resource(url="urn:text:" + PAGE, date=DATE, refers_to=page.record_id,
                              content_type="text/plain; charset=utf-8", payload=TEXT)
        writer.write_labels(url=PAGE, date=DATE, refers_to=page.record_id, labels={"rendered": REASON})
        writer.write_exchange(url=OTHER, ip="127.0.0.1", date=DATE, request=REQUEST,
                              response_head=HEAD, response_body=b"<p>static</p>")
        writer.write_exchange(url=PAGE, ip="127.0.0.1", date=DATE + timedelta(seconds=2),
                              request=REQUEST, response_head=HEAD, response_body=b"<div id=app></div>")
    return sorted(folder.glob("*.warc.gz"))


async def test_a_rendered_page_offers_its_screenshot_text_and_reason(mode_archive: ModeArchive,
                                                                     tmp_path: Path) -> None:
    bundles = write_archive(tmp_path / "new")
    entries = entries_of(bundles)
    mode_archive.keep(bundles)
    with mode_archive.stores.catalog() as catalog:
        catalog.add(entries)
    shot_path = f"/web/{RENDERED_AT}id_/urn:screenshot:{PAGE}"
    async with serving(mode_archive.config) as running:
        app, content = running.app, running.content
        shot = await get(content, shot_path)
        assert (shot.status, shot.body, shot.header("Content-Type")) == (200, PNG, "image/png")
        assert shot.header("Content-Security-Policy") == CSP  # isolated like any archived payload
        assert shot.header("X-Content-Type-Options") == "nosniff"
        text = await get(content, f"/web/{RENDERED_AT}id_/urn:text:{PAGE}")
        assert (text.status, text.body) == (200, TEXT)
        assert text.header("Content-Type") == "text/plain; charset=utf-8"
        # The nearest capture, as for any URL: another second redirects to the screenshot's own.
        moved = await get(content, f"/web/{PLAIN_AT}id_/urn:screenshot:{PAGE}")
        assert (moved.status, moved.header("Location")) == (302, shot_path)

        # A page without one: missing, the 404 page without a why (its records are of pages).
        missing = await get(content, f"/web/{RENDERED_AT}id_/urn:screenshot:{OTHER}")
        assert missing.status == 404 and "Not in the archive" in missing.body.decode()
        assert "never linked" not in missing.body.decode()

        listed = await get(app, f"/web/*/{PAGE}")
        page = listed.body.decode()
        thumbnails = re.findall(r'<img class="thumbnail" src="([^"]+)" loading="lazy"', page)
        assert thumbnails == [content + shot_path]  # beside the rendered capture, not the other
        assert page.count(f"/web/{PLAIN_AT}/{PAGE}") == 1 and page.count(f"/web/{RENDERED_AT}/{PAGE}") == 1
        policy = listed.header("Content-Security-Policy")
        assert policy == APP_CSP.format(content=content) and f"img-src 'self' data: {content};" in policy
        assert "<img" not in (await get(app, f"/web/*/{OTHER}")).body.decode()

        rendered = await get(content, f"/web/{RENDERED_AT}/{PAGE}")
        assert f'<a href="{shot_path}"' in rendered.body.decode()
        plain = await get(content, f"/web/{PLAIN_AT}/{PAGE}")
        assert plain.status == 200 and "urn:screenshot:" not in plain.body.decode()

        rows = await get(app, f"/cdx?url={quote(PAGE, safe='')}&output=json")
        assert [(r["timestamp"], r.get("rendered")) for r in map(json.loads, rows.body.decode().splitlines())
                ] == [(RENDERED_AT, REASON), (PLAIN_AT, None)]
        latest = await get(app, f"/cdx?url={quote(PAGE, safe='')}&sort=reverse&fl=timestamp,rendered"
                                "&output=text")
        assert latest.body.decode().splitlines() == [f"{PLAIN_AT} -", f"{RENDERED_AT} {REASON}"]
        shots = await get(app, "/cdx?sort=reverse&url=" + quote("urn:screenshot:" + PAGE, safe=""))
        assert shots.body.decode().split(" ", 3)[:3] == ["org,example)/app", "urn:screenshot",
                                                         RENDERED_AT]
        # The host's calendar counts pages: a page's rendering is none of its own.
        day = (await get(app, "/calendar/example.org?day=" + RENDERED_AT[:8])).body.decode()
        assert 'title="2 pages, 3 captures"' in day and "urn:" not in day
        host = await get(app, "/cdx?url=example.org&matchType=host&output=json&fl=url")
        assert [json.loads(line)["url"] for line in host.body.decode().splitlines()] == [
            PAGE, PAGE, "urn:screenshot:" + PAGE, "urn:text:" + PAGE, OTHER]

    stores = mode_archive.stores
    with contextlib.closing(stores.catalog()) as catalog:
        answer = explain(gather(stores, catalog, stores.warcs(), mode_archive.config, PAGE, RENDERED_AT))
        later = explain(gather(stores, catalog, stores.warcs(), mode_archive.config, PAGE, PLAIN_AT))
    assert answer.captured and answer.facts["rendered"] == REASON
    assert f"rendered in a browser ({REASON})" in answer.reason
    assert later.captured and "rendered" not in later.facts and "rendered" not in later.reason


def png(width: int, height: int) -> bytes:
    """A valid PNG of one colour, ``width`` x ``height``."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + b"\x20\x60\xa0" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


async def test_chromium_shows_the_thumbnail_from_the_content_origin(tmp_path: Path) -> None:
    """The capture list (the replay's origin) loads the screenshot from the content origin: the
    replay's CSP and the content origin's headers let the image through, at its CSS size."""
    (tmp_path / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    config = load(tmp_path / "archiver.toml")
    warcs = config.root / "warcs"
    shot = png(64, 40)
    with BundleWriter(warcs, WarcConfig(prefix="r")) as writer:
        page = writer.write_exchange(url=PAGE, ip="127.0.0.1", date=DATE, request=REQUEST,
                                     response_head=HEAD, response_body=b"<div id=app></div>")
        writer.write_resource(url="urn:screenshot:" + PAGE, date=DATE, refers_to=page.record_id,
                              content_type="image/png", payload=shot)
    files = WarcFiles(warcs)
    reindex(config.root, config.catalog.shards, files, files.names())
    async with (
        serving(config) as running,
        chromium.chromium(tmp_path / "chromium", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1") as browser,
        chromium.connect(browser.port, browser.path) as devtools,
    ):
        tab = await devtools.open_page()
        await tab.enable()
        with trio.fail_after(STEP):
            await tab.goto(f"{running.app}/web/*/{PAGE}")
            loaded = await tab.evaluate(
                "new Promise(done => { const img = document.querySelector('img.thumbnail');"
                " const size = () => done([img.naturalWidth, img.naturalHeight, img.width, img.height]);"
                " if (img.complete) size(); else { img.onload = size; img.onerror = () => done(null); } })")
        assert loaded == [64, 40, 120, 75]
        assert f"{running.content}/web/{RENDERED_AT}id_/urn:screenshot:{PAGE}" in tab.requests()
        await browser.quit(devtools)
