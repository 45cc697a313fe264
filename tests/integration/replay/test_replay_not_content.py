"""Captures that are not content through the replay service, in both modes
(``tests.support.storemodes``): real bundles where a page's newest captures are challenges (with
``cf-mitigated: challenge``, and a 200 challenge page), labelled ``gatekeeper`` as the crawler
labels them (``BundleWriter.write_labels``). Replay shows the page captured before them; a URL
captured only as a challenge is not in the archive, and its reasons say what it got; the TimeMap,
the capture list, the host's calendar and the home page's front-page link leave the challenges
out; /cdx lists them with their label."""

from __future__ import annotations

import html
import json
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

from archiver.config import WarcConfig
from archiver.store.bundles import BundleWriter
from archiver.web.timestamps import from_datetime
from tests.support.httpclient import get
from tests.support.replayarchive import serving
from tests.support.storemodes import DATE, ModeArchive, entries_of

FRONT = "http://example.org/"
PAGE = "http://example.org/news.html"
ONLY = "http://example.org/gated.html"
REQUEST = b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n"
BODY = b"<html><p>The news itself.</p></html>"
CHALLENGE = b"<html><title>Just a moment...</title><script>window._cf_chl_opt={}</script></html>"
HEADS = {403: b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/html\r\ncf-mitigated: challenge\r\n\r\n",
         200: b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"}
PAGE_AT, GATED_AT, GATED_200_AT = (from_datetime(DATE + timedelta(seconds=s)) for s in (0, 10, 20))


def write_archive(folder: Path) -> list[Path]:
    """The page at PAGE_AT, challenges of it at GATED_AT (403) and GATED_200_AT (200), a URL
    answered only with a challenge, at GATED_AT, and the front page at PAGE_AT and challenged at
    GATED_AT."""
    with BundleWriter(folder, WarcConfig(prefix="g")) as writer:
        def exchange(url: str, seconds: int, status: int, body: bytes, gate: bool) -> None:
            date = DATE + timedelta(seconds=seconds)
            record = writer.write_exchange(url=url, ip="127.0.0.1", date=date, request=REQUEST,
                                           response_head=HEADS[status], response_body=body)
            if gate:
                writer.write_labels(url=url, date=date, refers_to=record.record_id,
                                    labels={"gatekeeper": "challenge"})

        exchange(FRONT, 0, 200, BODY, False)
        exchange(FRONT, 10, 403, CHALLENGE, True)
        exchange(PAGE, 0, 200, BODY, False)
        exchange(PAGE, 10, 403, CHALLENGE, True)
        exchange(ONLY, 10, 403, CHALLENGE, True)
        exchange(PAGE, 20, 200, CHALLENGE, True)
    return sorted(folder.glob("*.warc.gz"))


async def test_replay_shows_the_page_not_the_challenges_captured_after_it(
        mode_archive: ModeArchive, tmp_path: Path) -> None:
    bundles = write_archive(tmp_path / "new")
    entries = entries_of(bundles)
    mode_archive.keep(bundles)
    with mode_archive.stores.catalog() as catalog:
        catalog.add(entries)
    async with serving(mode_archive.config) as running:
        app, content = running.app, running.content
        page = await get(content, f"/web/{PAGE_AT}id_/{PAGE}")
        assert (page.status, page.body) == (200, BODY)
        for asked in (GATED_AT, GATED_200_AT, "20991231000000"):  # a challenge's second, or later
            moved = await get(content, f"/web/{asked}id_/{PAGE}")
            assert (moved.status, moved.header("Location")) == (302, f"/web/{PAGE_AT}id_/{PAGE}")

        missing = await get(content, f"/web/{GATED_AT}/{ONLY}")
        text = html.unescape(missing.body.decode())
        assert missing.status == 404 and "Not in the archive" in text
        assert f"At {GATED_AT} it was captured as gatekeeper=challenge (status 403)" in text

        timemap = (await get(app, f"/timemap/link/{PAGE}")).body.decode()
        assert PAGE_AT in timemap and GATED_AT not in timemap and GATED_200_AT not in timemap
        listed = (await get(app, f"/web/*/{PAGE}")).body.decode()
        assert f"/web/{PAGE_AT}/{PAGE}" in listed and f"/web/{GATED_AT}/" not in listed

        day = (await get(app, f"/calendar/example.org?day={PAGE_AT[:8]}")).body.decode()
        assert f"/web/{PAGE_AT}/{PAGE}" in day and f"/web/{PAGE_AT}/{FRONT}" in day
        assert ONLY not in day and f"/web/{GATED_AT}/" not in day  # no page of that day
        home = (await get(app, "/")).body.decode()  # the front page's latest capture: the page
        assert f"/web/{PAGE_AT}/{FRONT}" in home and f"/web/{GATED_AT}/" not in home

        rows = await get(app, f"/cdx?url={quote(PAGE, safe='')}&output=json&fl=timestamp,status,"
                              "label.gatekeeper")
        assert [json.loads(line) for line in rows.body.decode().splitlines()] == [
            {"timestamp": PAGE_AT, "status": "200"},
            {"timestamp": GATED_AT, "status": "403", "label.gatekeeper": "challenge"},
            {"timestamp": GATED_200_AT, "status": "200", "label.gatekeeper": "challenge"}]
        content_only = await get(app, f"/cdx?url={quote(PAGE, safe='')}&filter=!~label.gatekeeper:."
                                      "&fl=timestamp&output=text")
        assert content_only.body.decode().split() == [PAGE_AT]
