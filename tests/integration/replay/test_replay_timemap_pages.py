"""Paged TimeMaps over real HTTP (RFC 7089 TimeMaps split into pages): followed from the first page
by their links, in link format and in JSON, they list every memento exactly once, in time order;
each page links the pages before and after it with the dates they cover; a page starts at any
date asked. Also the calendar's pages of captures. The catalog is written directly (no WARC:
TimeMaps and calendars never read one)."""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archiver.config import Config, load
from archiver.replay.calendar import LISTED
from archiver.replay.memento import http_date, parse_http_date
from archiver.store.catalogkeys import surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from tests.support.rawhttp import get
from tests.support.replayarchive import serving

URL = "http://paged.test/"
SIZE = 7
# 40 seconds with a capture, two of them twice (from two WARCs), a minute apart from 2024 on.
SECONDS = [f"{datetime(2024, 12, 31, 23, 50, tzinfo=UTC) + timedelta(minutes=n):%Y%m%d%H%M%S}"
           for n in range(40)]
TWICE = {SECONDS[6], SECONDS[7]}
# A day of the calendar with more captures than its page lists, and one more the day after.
BUSY_DAY = [f"{datetime(2023, 3, 1, tzinfo=UTC) + timedelta(seconds=n):%Y%m%d%H%M%S}"
            for n in range(LISTED + 150)]


def _capture(url: str, timestamp: str, filename: str = "a.warc.gz") -> Capture:
    return Capture(surt_key(url), timestamp, url, 200, "text/html", "sha1:A", None, filename, 0, 10)


@pytest.fixture(scope="module")
def paged(tmp_path_factory: pytest.TempPathFactory) -> Config:
    directory: Path = tmp_path_factory.mktemp("paged")
    (directory / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    config = load(directory / "archiver.toml")
    with Catalog(config.root / "catalog", config.catalog.shards) as catalog:
        catalog.add(_capture(URL, ts) for ts in SECONDS)
        catalog.add(_capture(URL, ts, "b.warc.gz") for ts in sorted(TWICE))
        catalog.add(_capture("http://calendar.test/", ts) for ts in [*BUSY_DAY, "20230302000000"])
    return config


def link_entries(body: str) -> list[tuple[str, str, dict[str, str]]]:
    """(URI, rel, other attributes) of each entry of a link-format TimeMap."""
    found = []
    for uri, params in re.findall(r"<([^>]*)>((?:;\s*[a-z]+=\"[^\"]*\")*)", body):
        attributes = dict(re.findall(r'([a-z]+)="([^"]*)"', params))
        found.append((uri, attributes.pop("rel"), attributes))
    return found


async def test_link_timemap_pages_list_every_memento_once_and_link_each_other(paged):
    async with serving(paged, timemap_page=SIZE) as replay:
        path, pages = f"/timemap/link/{URL}", []
        while path:
            status, headers, body = await get(replay.app, path)
            assert status == 200 and headers["content-type"] == "application/link-format"
            entries = link_entries(body.decode())
            pages.append((path, entries))
            until = parse_http_date(entries[1][2]["until"])  # the self link's
            following = [uri for uri, rel, attrs in entries
                         if rel == "timemap" and parse_http_date(attrs["from"]) > until]
            path = following[0].removeprefix(replay.app) if following else ""
    listed = [parse_http_date(attrs["datetime"]) for _, entries in pages for _, rel, attrs in entries
              if rel.endswith("memento")]
    assert listed == SECONDS  # every second once, those captured twice too
    assert len(pages) == -(-len(SECONDS) // SIZE)
    for number, (path, entries) in enumerate(pages):
        mementos = [(rel, attrs["datetime"]) for _, rel, attrs in entries if rel.endswith("memento")]
        assert [parse_http_date(d) for _, d in mementos] == SECONDS[number * SIZE:(number + 1) * SIZE]
        original, own, gate = entries[:3]
        assert (original[:2], gate[:2]) == ((URL, "original"), (f"{replay.app}/web/{URL}", "timegate"))
        assert (own[0], own[1]) == (replay.app + path, "self")
        assert (own[2]["from"], own[2]["until"]) == (mementos[0][1], mementos[-1][1])
        assert (mementos[0][0] == "first memento") == (number == 0)
        assert (mementos[-1][0] == "last memento") == (number == len(pages) - 1)
        others = {uri.removeprefix(replay.app): attrs for uri, rel, attrs in entries if rel == "timemap"}
        expected = {}
        if number > 0:  # the page before, with the dates of its first and last mementos
            start, end = SECONDS[(number - 1) * SIZE], SECONDS[number * SIZE - 1]
            expected[f"/timemap/link/{start}/{URL}"] = {"type": "application/link-format",
                                                        "from": http_date(start), "until": http_date(end)}
        if number < len(pages) - 1:  # the page after, with where it starts
            start = SECONDS[(number + 1) * SIZE]
            expected[f"/timemap/link/{start}/{URL}"] = {"type": "application/link-format",
                                                        "from": http_date(start)}
        assert others == expected


async def test_json_timemap_pages_name_prev_and_next_and_list_every_memento_once(paged):
    async with serving(paged, timemap_page=SIZE) as replay:
        path, pages = f"/timemap/json/{URL}", []
        while path:
            status, _, body = await get(replay.app, path)
            assert status == 200
            pages.append(json.loads(body))
            path = pages[-1].get("pages", {}).get("next", {}).get("uri", "").removeprefix(replay.app)
    assert [len(page["mementos"]["list"]) for page in pages] == [SIZE] * 5 + [len(SECONDS) - 5 * SIZE]
    listed = [m["datetime"] for page in pages for m in page["mementos"]["list"]]
    assert listed == [f"{ts[:4]}-{ts[4:6]}-{ts[6:8]}T{ts[8:10]}:{ts[10:12]}:{ts[12:14]}Z" for ts in SECONDS]
    assert "prev" not in pages[0].get("pages", {}) and "next" not in pages[-1].get("pages", {})
    assert pages[0]["mementos"]["first"] == pages[0]["mementos"]["list"][0]
    assert pages[-1]["mementos"]["last"] == pages[-1]["mementos"]["list"][-1]
    assert not any("first" in p["mementos"] for p in pages[1:])
    assert not any("last" in p["mementos"] for p in pages[:-1])
    for before, after in itertools.pairwise(pages):
        back = after["pages"]["prev"]
        assert (back["from"], back["until"]) == (before["mementos"]["list"][0]["datetime"],
                                                  before["mementos"]["list"][-1]["datetime"])
        assert before["pages"]["next"]["from"] == after["mementos"]["list"][0]["datetime"]
        assert after["timemap_uri"]["json_format"] == before["pages"]["next"]["uri"]
        link_form = before["pages"]["next"]["uri"].replace("/json/", "/link/")
        assert after["timemap_uri"]["link_format"] == link_form


async def test_a_timemap_page_starts_at_any_date_asked(paged):
    async with serving(paged, timemap_page=SIZE) as replay:
        # Between two captures: the page starts at the next one, and its page before ends just before.
        status, _, body = await get(replay.app, f"/timemap/link/{SECONDS[20][:12]}30/{URL}")
        assert status == 200
        entries = link_entries(body.decode())
        dates = [parse_http_date(a["datetime"]) for _, rel, a in entries if rel.endswith("memento")]
        assert dates == SECONDS[21:28]
        spans = {uri.removeprefix(replay.app): attrs for uri, rel, attrs in entries if rel == "timemap"}
        assert spans[f"/timemap/link/{SECONDS[14]}/{URL}"]["until"] == http_date(SECONDS[20])
        assert spans[f"/timemap/link/{SECONDS[28]}/{URL}"]["from"] == http_date(SECONDS[28])
        # A year: from its first second on.
        status, _, body = await get(replay.app, f"/timemap/json/2025/{URL}")
        assert json.loads(body)["mementos"]["list"][0]["datetime"] == "2025-01-01T00:00:00Z"
        status, _, body = await get(replay.app, f"/timemap/link/2030/{URL}")
        assert status == 404 and b"no capture at or after 20300101000000" in body
        status, _, body = await get(replay.app, f"/timemap/link/2024130/{URL}")
        assert status == 400


async def test_the_calendar_lists_a_page_of_captures_and_links_the_next(paged):
    async with serving(paged) as replay:
        status, _, first = await get(replay.app, "/web/20230301*/http://calendar.test/")
        assert status == 200
        text = first.decode()
        shown = re.findall(r'/web/(2023030\d{7})/http://calendar\.test/"', text)
        assert shown == BUSY_DAY[:LISTED]
        found = re.search(r'<a href="([^"]*)" rel="next">Next page, from ([^<]*)</a>', text)
        assert found is not None and found.group(2) == "2023-03-01 00:16:40"
        status, _, second = await get(replay.app, found.group(1).removeprefix(replay.app))
        assert status == 200
        shown = re.findall(r'/web/(2023030\d{7})/http://calendar\.test/"', second.decode())
        assert shown == BUSY_DAY[LISTED:]  # the day's rest, not the day after
        assert 'rel="next"' not in second.decode() and "First page" in second.decode()
        assert f"{LISTED + 150} capture" in text
