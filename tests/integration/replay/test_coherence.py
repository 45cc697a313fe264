"""Temporal coherence over real HTTP: a page whose embeds were captured days, months or never
apart from it (WARCs written record by record), and an archive of the demo web crawled at two
dates. The banner shows the spread and flags the far embeds; ``?coherence=json`` gives each
embed's date as replay serves it (closest capture, archived redirects followed)."""

from __future__ import annotations

import json
import re

import pytest
import trio

from archiver.config import Config
from archiver.replay.coherence import EMBED_LIMIT
from archiver.replay.rewrite import prepare_html_text
from archiver.web.extract import decode_text
from tests.integration.replay.datedwarcs import Record, minimal_config, write_dated_archive
from tests.support.rawhttp import get
from tests.support.replayarchive import TwoDates, copy_of, serving

PAGE_TS = "20260301120000"
SITE = "http://site.test"
PAGE = f"{SITE}/page.html"
BODY = b"""<!DOCTYPE html><html><head><title>page</title>
<link rel="stylesheet" href="/style.css"><script src="/app.js"></script>
<style>body { background: url(/bg.png) }</style></head>
<body><a href="/other.html">other</a><img src="/old.png"><img src="/missing.png"><img src="/moved.png">
<img src="/old.png"><iframe src="/frame.html"></iframe>
<img src='/x"&gt;&lt;script&gt;alert(1)&lt;/script&gt;.png'></body></html>"""
MANY = EMBED_LIMIT + 50
RECORDS = [
    Record(PAGE, PAGE_TS, BODY),
    Record(f"{SITE}/style.css", "20260301120500", b"p { color: red }", "text/css"),  # 5 min later
    Record(f"{SITE}/app.js", "20260302120000", b"1", "text/javascript"),  # a day later exactly
    Record(f"{SITE}/app.js", "20260501000000", b"2", "text/javascript"),
    Record(f"{SITE}/bg.png", PAGE_TS, b"png", "image/png"),
    Record(f"{SITE}/old.png", "20260201000000", b"png", "image/png"),  # 28.5 days earlier
    Record(f"{SITE}/moved.png", PAGE_TS, b"", "text/html", "301 Moved", "/new.png"),
    Record(f"{SITE}/new.png", "20260110000000", b"png", "image/png"),  # 50.5 days from the redirect
    Record(f"{SITE}/new.png", "20260420000000", b"png", "image/png"),  # 49.5 days: served
    Record(f"{SITE}/frame.html", "20260301120001", b"<p>frame</p>"),
    Record(f"{SITE}/other.html", "20200101000000", b"<p>far, but a link</p>"),
    Record(f"{SITE}/q?a=1", PAGE_TS, b'<img src="/old.png">'),
    Record(f"{SITE}/redirect", PAGE_TS, b'<img src="/old.png">', "text/html", "302 Found", "/page.html"),
    Record(f"{SITE}/many.html", PAGE_TS, "".join(f'<img src="/i{n}.png">' for n in range(MANY)).encode()),
    *(Record(f"{SITE}/i{n}.png", PAGE_TS, b"png", "image/png") for n in range(5)),  # its first embeds
    Record(f"{SITE}/plain.txt", PAGE_TS, b"text", "text/plain"),
]


@pytest.fixture(scope="module")
def dated(tmp_path_factory) -> Config:
    config = minimal_config(tmp_path_factory.mktemp("coherence"))
    write_dated_archive(config, RECORDS)
    return config


async def coherence_of(content: str, path: str) -> dict:
    status, headers, body = await get(content, path)
    assert status == 200, (path, body[:300])
    assert headers["content-type"] == "application/json"
    return json.loads(body)


def banner_of(page: str) -> str:
    found = re.search(r'<div id="archiver-banner".*?</div>', page)
    assert found is not None
    return found.group(0)


async def test_coherence_json_gives_each_embeds_date_as_replay_serves_it(dated):
    async with serving(dated) as replay:
        report = await coherence_of(replay.content_at, f"/web/{PAGE_TS}/{PAGE}?coherence=json")
        inexact = await coherence_of(replay.content_at, f"/web/2026/{PAGE}?coherence=json")
    assert report == inexact  # the page replay serves for the date, as its redirect would lead to
    assert (report["url"], report["timestamp"], report["max_skew"]) == (PAGE, PAGE_TS, 86400)
    embeds = {e["url"].removeprefix(SITE): e for e in report["embeds"]}
    hostile = next(url for url in embeds if "script" in url)
    assert "<" not in hostile and '"' not in hostile
    assert list(embeds) == ["/style.css", "/app.js", "/bg.png", "/old.png", "/missing.png", "/moved.png",
                            "/frame.html", hostile]  # fmt: skip
    expected = {
        "/style.css": ("stylesheet", "20260301120500", 300, False),
        "/app.js": ("script", "20260302120000", 86400, False),
        "/bg.png": ("image", PAGE_TS, 0, False),
        "/old.png": ("image", "20260201000000", -(28 * 86400 + 12 * 3600), True),
        "/missing.png": ("image", None, None, False),
        "/moved.png": ("image", "20260420000000", 49 * 86400 + 12 * 3600, True),
        "/frame.html": ("frame", "20260301120001", 1, False),
    }
    for path, (kind, timestamp, skew, exceeds) in expected.items():
        got = embeds[path]
        got_values = (got["kind"], got["timestamp"], got["skew"], got["exceeds_max_skew"])
        assert got_values == (kind, timestamp, skew, exceeds), path
    assert embeds["/moved.png"]["served_url"] == f"{SITE}/new.png"
    assert (report["earliest"], report["latest"]) == ("20260201000000", "20260420000000")
    assert report["spread"] == 78 * 86400
    assert (report["embeds_found"], report["embeds_checked"], report["complete"]) == (8, 8, True)


async def test_the_banner_shows_the_spread_and_flags_far_embeds(dated):
    async with serving(dated) as replay:
        status, _, body = await get(replay.content_at, f"/web/{PAGE_TS}/{PAGE}")
    assert status == 200
    banner = banner_of(body.decode())
    assert "assembled from captures of <time>2026-02-01 00:00:00</time> to <time>2026-04-20 00:00:00</time>" \
        in banner and "(spread 78 days)" in banner
    assert "2 embeds captured more than 1 day from the page, 2 embeds not in the archive" in banner
    assert f'href="/web/20260201000000/{SITE}/old.png"' in banner and "28 days earlier" in banner
    assert f'href="/web/20260420000000/{SITE}/new.png"' in banner and "49 days later" in banner
    assert "missing.png</span>: not in the archive" in banner
    assert "style.css" not in banner and "app.js" not in banner and "other.html" not in banner
    assert "<script>" not in banner and "alert(1)" in banner  # the hostile URL, escaped
    assert "<details" in banner and " open>" not in banner  # four flagged: collapsed
    assert f'href="/web/{PAGE_TS}/{PAGE}?coherence=json"' in banner


async def test_max_skew_is_the_operators_choice(dated):
    async with serving(dated, max_skew=0) as replay:
        report = await coherence_of(replay.content_at, f"/web/{PAGE_TS}/{PAGE}?coherence=json")
    flagged = {e["url"].removeprefix(SITE) for e in report["embeds"] if e["exceeds_max_skew"]}
    assert flagged == {"/style.css", "/app.js", "/old.png", "/moved.png", "/frame.html"}
    assert report["max_skew"] == 0


async def test_a_page_with_many_embeds_checks_only_the_first(dated):
    async with serving(dated) as replay:
        start = trio.current_time()
        report = await coherence_of(replay.content_at, f"/web/{PAGE_TS}/{SITE}/many.html?coherence=json")
        status, _, body = await get(replay.content_at, f"/web/{PAGE_TS}/{SITE}/many.html")
        took = trio.current_time() - start
    counts = (report["embeds_found"], report["embeds_checked"], report["complete"])
    assert counts == (MANY, EMBED_LIMIT, False)
    assert [e["url"] for e in report["embeds"]] == [f"{SITE}/i{n}.png" for n in range(EMBED_LIMIT)]
    assert status == 200
    assert f"dates of the first {EMBED_LIMIT} of {MANY} embeds checked" in banner_of(body.decode())
    assert took < 10


async def test_a_listing_past_its_limits_leaves_the_page_without_the_dates(dated):
    async with serving(dated, scan_max_rows=3) as replay:
        status, _, body = await get(replay.content_at, f"/web/{PAGE_TS}/{SITE}/many.html")
        asked = f"/web/{PAGE_TS}/{SITE}/many.html?coherence=json"
        json_status, _, json_body = await get(replay.content_at, asked)
    assert status == 200 and "archiver-banner" in body.decode() and "assembled" not in body.decode()
    assert json_status == 400 and b"examines more than 3 catalog rows" in json_body


async def test_what_a_page_loads_nothing_from(dated):
    async with serving(dated) as replay:
        redirect = await coherence_of(replay.content_at, f"/web/{PAGE_TS}/{SITE}/redirect?coherence=json")
        plain = await coherence_of(replay.content_at, f"/web/{PAGE_TS}/{SITE}/plain.txt?coherence=json")
        image = await coherence_of(replay.content_at, f"/web/{PAGE_TS}im_/{SITE}/old.png?coherence=json")
    for report in (redirect, plain, image):
        assert report["embeds"] == [] and report["spread"] == 0 and report["complete"] is True
    assert image["timestamp"] == "20260201000000"


async def test_the_parameter_is_the_last_field_of_the_query(dated):
    async with serving(dated) as replay:
        report = await coherence_of(replay.content_at, f"/web/{PAGE_TS}/{SITE}/q?a=1&coherence=json")
        via_app = await get(replay.app_at, f"/web/{PAGE_TS}/{SITE}/q?a=1&coherence=json")
        page = await get(replay.content_at, f"/web/{PAGE_TS}/{SITE}/q?a=1")
    assert report["url"] == f"{SITE}/q?a=1" and [e["url"] for e in report["embeds"]] == [f"{SITE}/old.png"]
    assert via_app[0] == 302
    assert via_app[1]["location"].endswith(f"/web/{PAGE_TS}/{SITE}/q?a=1&coherence=json")
    assert f'href="/web/{PAGE_TS}/{SITE}/q?a=1&amp;coherence=json"' in banner_of(page[2].decode())


@pytest.mark.parametrize("query", ["coherence=xml", "coherence", "coherence=JSON", "a=1&coherence=1"])
async def test_other_values_of_coherence_are_a_400(dated, query):
    async with serving(dated) as replay:
        status, headers, body = await get(replay.content_at, f"/web/{PAGE_TS}/{PAGE}?{query}")
    assert status == 400 and headers["content-type"].startswith("text/plain")
    assert b"coherence=json" in body


async def test_coherence_of_what_is_not_archived_is_a_404(dated):
    async with serving(dated) as replay:
        status, _, _ = await get(replay.content_at, f"/web/{PAGE_TS}/http://nowhere.test/?coherence=json")
    assert status == 404


# --- a crawl at two dates ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def two(two_dates_crawled: TwoDates, tmp_path_factory) -> TwoDates:
    return copy_of(two_dates_crawled, tmp_path_factory.mktemp("coherence-two"))


async def test_a_crawled_page_is_coherent_and_its_embeds_are_what_the_rewriter_finds(two):
    origin = two.web0.origin(two.web0.hosts[0])
    first = next(c for c in two.first if c.url == f"{origin}/")
    second = next(c for c in two.second if c.url == f"{origin}/")
    async with serving(two.config) as replay:
        old = await coherence_of(replay.content_at, f"/web/{first.timestamp}/{first.url}?coherence=json")
        new = await coherence_of(replay.content_at, f"/web/{second.timestamp}/{first.url}?coherence=json")
        status, _, body = await get(replay.content_at, f"/web/{second.timestamp}/{first.url}")
    reply = two.web1.respond(two.web1.hosts[0], "/")
    text = decode_text(reply.body, None)
    found = prepare_html_text(text, url=first.url, timestamp=second.timestamp, prefix="").embeds
    assert [e["url"] for e in new["embeds"]] == list(dict.fromkeys(e.url for e in found)) != []
    for report, crawl in ((old, two.first), (new, two.second)):
        stamps = {c.timestamp for c in crawl}
        assert all(e["timestamp"] in stamps for e in report["embeds"])  # each crawl's own captures
        assert not any(e["exceeds_max_skew"] for e in report["embeds"]) and report["spread"] < 600
    assert status == 200 and "assembled from captures of" in banner_of(body.decode())
    assert "<details" not in banner_of(body.decode())
