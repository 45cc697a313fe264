"""Full-text search end to end: the demo web crawled at two dates (unchanged pages stored as revisits
the second time), indexed by ``archiver search index``, searched with ``archiver search --json`` and
in the replay, whose results link to captures that replay; and a small archive of hostile pages for
the replay page's escaping, bad input and paging."""

from __future__ import annotations

import json
import re
import subprocess
from urllib.parse import urlencode

import pytest

from archiver.config import Config, load
from archiver.replay.searchpages import PAGE_SIZE
from archiver.store.embedded.fulltext import FtsIndex
from archiver.store.models import Capture, SearchTimeout
from tests.support.rawhttp import get
from tests.support.replayarchive import TwoDates, copy_of, serving, write_archive
from tests.support.repo import ARCHIVER, archiver_here

PAGE1 = "/articles/0001.html"  # page 1 of a demo site: unchanged in version 1
STAMP = "20260101000000"
# A title whose text is markup: shown as text, never run.
HOSTILE = b"<title>Harbour &lt;script&gt;alert(1)&lt;/script&gt;</title><p>The harbour tides.</p>"


@pytest.fixture(scope="module")
def two(two_dates_crawled: TwoDates, tmp_path_factory) -> TwoDates:
    """The two-date archive, indexed by ``archiver search index`` run as a child process."""
    two = copy_of(two_dates_crawled, tmp_path_factory.mktemp("fulltext"))
    done = subprocess.run([*ARCHIVER, "search", "index", "--config", str(two.config.path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.search(r"[1-9]\d* pages extracted", done.stdout), done.stdout
    return two


def captures_of(two: TwoDates, path: str) -> tuple[Capture, Capture]:
    """The first site's capture of ``path`` in each crawl."""
    url = two.web0.origin(two.web0.hosts[0]) + path
    first, = (c for c in two.first if c.url == url)
    second, = (c for c in two.second if c.url == url)
    return first, second


def search(two: TwoDates, *words: str, at: str | None = None) -> dict[str, list[str]]:
    """``archiver search WORDS --json`` in this process: each result's URL and timestamps."""
    done = archiver_here("search", "query", *words, "--json", "--config", str(two.config.path),
                         *(["--at", at] if at else []))
    assert done.returncode in (0, 1), done.stderr
    return {hit["url"]: hit["timestamps"] for hit in json.loads(done.stdout)}


def phrase_only_in(ours: bytes, theirs: bytes) -> str:
    """Six words of prose that page ``ours`` has and page ``theirs`` lacks, quoted."""
    lines = set(theirs.decode().splitlines())
    line = next(x for x in ours.decode().splitlines() if x.startswith("<p>") and x not in lines)
    return '"' + " ".join(re.sub(r"<[^>]*>", " ", line).split()[:6]) + '"'


def test_the_json_of_a_search_run_as_a_child_process(two):
    first, second = captures_of(two, PAGE1)
    title = f"{two.web0.hosts[0]}: page 1"
    done = subprocess.run([*ARCHIVER, "search", "query", title, "--json", "--config", str(two.config.path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    assert hits[0]["url"] == first.url and hits[0]["title"] == title
    assert hits[0]["timestamps"] == [first.timestamp, second.timestamp]  # the revisit adds its date
    assert second.rectype == "revisit"
    for hit in hits:
        assert set(hit) == {"url", "title", "snippet", "timestamps"}
        assert hit["timestamps"] == sorted(hit["timestamps"]) and all(
            re.fullmatch(r"\d{14}", ts) for ts in hit["timestamps"])


def test_a_changed_page_is_found_by_the_words_of_each_version_at_its_dates(two):
    first, second = captures_of(two, "/")
    assert second.rectype == "response"  # page 0 changed
    old = two.web0.respond(two.web0.hosts[0], "/").body
    new = two.web1.respond(two.web1.hosts[0], "/").body
    assert search(two, phrase_only_in(old, new))[first.url] == [first.timestamp]
    assert search(two, phrase_only_in(new, old))[first.url] == [second.timestamp]
    assert first.url not in search(two, phrase_only_in(new, old), at=first.timestamp)


def test_at_keeps_the_captures_at_or_before_the_date(two):
    first, _ = captures_of(two, PAGE1)
    found = search(two, f"{two.web0.hosts[0]}: page 1", at=first.timestamp)
    assert found[first.url] == [first.timestamp]


def test_exit_codes_and_messages(two, tmp_path):
    config = str(two.config.path)
    nothing = archiver_here("search", "query", "zqxwvj", "--config", config)
    assert nothing.returncode == 1 and b"no page of the archive matches" in nothing.stderr
    for args, message in [
        (["query", "!!!"], b"nothing to search for"),
        (["query", "harbour", "--at", "2026-13"], b"month 13"),
        (["index", "--json"], b"unrecognized arguments: --json"),
        (["query", "harbour", "--rebuild"], b"unrecognized arguments: --rebuild"),
        (["query", "x" * 501], b"at most 500"),
    ]:
        done = archiver_here("search", *args, "--config", config)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
    (tmp_path / "empty.toml").write_text(f'[archive]\nroot = "{tmp_path / "none"}"\n')
    missing = archiver_here("search", "query", "harbour", "--config", str(tmp_path / "empty.toml"))
    assert missing.returncode == 2 and b"run `archiver search index` first" in missing.stderr


def test_a_second_index_run_extracts_nothing(two):
    done = archiver_here("search", "index", "--config", str(two.config.path))
    assert done.returncode == 0 and b"0 captures taken with their text" in done.stdout
    assert b" 0 pages extracted" in done.stdout


async def test_replay_results_link_to_captures_that_replay(two):
    first, second = captures_of(two, PAGE1)
    query = urlencode({"q": f"{two.web0.hosts[0]}: page 1"})
    async with serving(two.config) as replay:
        status, _, body = await get(replay.app, f"/fulltext?{query}")
        page = body.decode()
        assert status == 200
        links = re.findall(r'href="([^"]+)"', page)
        for capture in (first, second):
            assert f"{replay.content}/web/{capture.timestamp}/{first.url}" in links
        status, _, body = await get(replay.content, f"/web/{second.timestamp}/{first.url}")
        assert status == 200 and b"page 1" in body


# --- the replay page on a small archive -------------------------------------------------------


@pytest.fixture
def small(tmp_path) -> Config:
    """A hostile page and PAGE_SIZE + 5 harmless ones, all mentioning the harbour; no index yet."""
    (tmp_path / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    config = load(tmp_path / "archiver.toml")
    pages = {f"http://site.test/{n}": b"<title>Quay %d</title><p>harbour</p>" % n
             for n in range(PAGE_SIZE + 5)}
    write_archive(config, STAMP, {"http://hostile.test/": HOSTILE, **pages})
    return config


async def test_the_search_box_its_escaping_bad_input_and_pages(small):
    async with serving(small) as replay:
        status, _, body = await get(replay.app, "/fulltext?q=harbour")
        assert status == 503 and b"archiver search index" in body
        assert archiver_here("search", "index", "--config", str(small.path)).returncode == 0

        status, _, body = await get(replay.app, "/")
        home = body.decode()
        assert re.search(rf'<form method="get" action="{re.escape(replay.app)}/fulltext"', home)
        assert 'name="q"' in home and '<label for="home-fulltext">' in home

        status, _, body = await get(replay.app, "/fulltext?" + urlencode({"q": '"harbour tides"'}))
        page = body.decode()
        assert status == 200 and "http://hostile.test/" in page
        assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "<mark>harbour tides</mark>" in page or "<mark>harbour</mark> <mark>tides</mark>" in page
        query = urlencode({"q": "harbour <img src=x onerror=alert(2)>"})
        status, _, body = await get(replay.app, f"/fulltext?{query}")
        page = body.decode()
        assert status == 200 and "No archived page matches" in page
        assert "<img" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page

        for bad in ("", "q=", "q=%21%21%21", "q=" + "a" * 501, "q=harbour&at=2026-13",
                    "q=harbour&page=0", "q=harbour&page=x", "q=harbour&page=51"):
            status, _, body = await get(replay.app, f"/fulltext?{bad}")
            assert status == 400 and b'role="alert"' in body and b'name="q"' in body, bad

        status, _, body = await get(replay.app, "/fulltext?q=harbour")
        first = body.decode()
        assert first.count("<li>") == PAGE_SIZE and 'href="?q=harbour&amp;page=2"' in first
        status, _, body = await get(replay.app, "/fulltext?q=harbour&page=2")
        second = body.decode()
        assert second.count("<li>") == 6 and f'<ol start="{PAGE_SIZE + 1}">' in second
        assert 'rel="next"' not in second and 'href="?q=harbour&amp;page=1" rel="prev"' in second



async def test_a_search_past_the_deadline_answers_503(small, monkeypatch):
    """The deadline is ``replay.scan_deadline``; the store stops the search (the contract test
    shows both do), and the page says what to do."""
    assert archiver_here("search", "index", "--config", str(small.path)).returncode == 0
    asked = []

    def slow(self, query, **kwargs):
        asked.append(kwargs["deadline"])
        raise SearchTimeout("past")

    monkeypatch.setattr(FtsIndex, "search", slow)
    async with serving(small, scan_deadline=2.5) as replay:
        status, _, body = await get(replay.app, "/fulltext?q=harbour")
    assert status == 503 and b"more than 2.5 s" in body and b"a phrase" in body and asked == [2.5]
