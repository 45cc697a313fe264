"""Replay security over real HTTP on 127.0.0.1: the two origins and their headers, public URLs that
no Host header changes, and listings that cannot freeze the service (RE2 filters, row caps,
deadlines, other requests answered while a long listing runs)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import trio

from archiver.config import Config, CrawlConfig, load
from archiver.crawl.http import HttpClient
from archiver.replay.app import APP_CSP, CSP
from archiver.replay.memento import http_date
from archiver.store.catalogkeys import surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from tests.support.crawls import LOOPBACK
from tests.support.rawhttp import get
from tests.support.replayarchive import serving, write_archive
from tests.support.replayprocess import replay_process

STAMP = "20260101000000"
PAGE = "http://site.test/"
PAGES = {PAGE: b"<!DOCTYPE html><title>site</title><p>A page.</p>", "http://other.test/": b"<p>Other.</p>"}
# The big catalog: one URL captured MANY times, and MANY URLs under one folder.
MANY = 40_000
BUSY = "http://busy.test/"
FOLDER = "http://busy.test/dir/"
STAMPS = [time.strftime("%Y%m%d%H%M%S", time.gmtime(1_700_000_000 + n)) for n in range(MANY)]


def minimal_config(directory: Path) -> Config:
    (directory / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    return load(directory / "archiver.toml")


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Config:
    config = minimal_config(tmp_path_factory.mktemp("small"))
    write_archive(config, STAMP, PAGES)
    return config


def _capture(url: str, timestamp: str) -> Capture:
    return Capture(surt_key(url), timestamp, url, 200, "text/html", "sha1:AAAA", None, "none.warc.gz", 0, 10)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Config:
    """A catalog of 2 x MANY entries (no WARC files: listings never open them)."""
    config = minimal_config(tmp_path_factory.mktemp("big"))
    with Catalog(config.root / "catalog", config.catalog.shards) as catalog:
        catalog.add(_capture(BUSY, stamp) for stamp in STAMPS)
        catalog.add(_capture(f"{FOLDER}{n:06d}", STAMPS[0]) for n in range(MANY))
    return config


# --- origins and headers ---------------------------------------------------------------------


async def test_every_response_carries_the_security_headers(small):
    async with serving(small) as replay:
        answers = [
            (replay.app, path, APP_CSP.format(content=replay.content))
            for path in ("/", "/search?url=site.test", f"/web/*/{PAGE}", f"/web/{PAGE}",
                         f"/timemap/link/{PAGE}", f"/cdx?url={PAGE}", "/status", "/metrics", "/dns/site.test",
                         "/nowhere", "/web/2026/ftp://x/", f"/web/{STAMP}/{PAGE}")
        ] + [
            (replay.content, path, CSP)
            for path in (f"/web/{STAMP}/{PAGE}", f"/web/{STAMP}id_/{PAGE}", f"/web/2026/{PAGE}",
                         "/web/2026/http://absent.test/", "/web/2026/ftp://x/", "/metrics", "/")
        ]  # fmt: skip
        for origin, path, policy in answers:
            status, headers, _ = await get(origin, path)
            assert status in (200, 302, 400, 404), (origin, path, status)
            assert headers["x-content-type-options"] == "nosniff", (origin, path)
            assert headers["referrer-policy"] == "no-referrer", (origin, path)
            assert headers["content-security-policy"] == policy, (origin, path)
    assert "frame-ancestors 'none'" in APP_CSP and "frame-ancestors 'self'" in CSP
    sandbox = CSP.split(";")[0].split()
    assert sandbox[0] == "sandbox" and "allow-scripts" in sandbox and "allow-same-origin" not in sandbox


async def test_each_origin_serves_only_its_own_pages(small):
    async with serving(small) as replay:
        for path in ("/status", "/metrics", "/dns/site.test", "/cdx?url=site.test", "/", "/search?url=a.b",
                     f"/timemap/link/{PAGE}"):
            assert (await get(replay.content, path))[0] == 404, path
        for path in (f"/web/*/{PAGE}", f"/web/{PAGE}", f"/web/2026*/{PAGE}"):
            status, headers, _ = await get(replay.content, path)
            assert (status, headers["location"]) == (302, f"{replay.app}{path}"), path
        # An archived page asked of the replay's own origin is sent to the content origin.
        status, headers, body = await get(replay.app, f"/web/{STAMP}/{PAGE}")
        assert (status, headers["location"]) == (302, f"{replay.content}/web/{STAMP}/{PAGE}")
        status, headers, body = await get(replay.content, f"/web/{STAMP}/{PAGE}")
        assert status == 200 and b"<p>A page.</p>" in body
        assert (await get(replay.app, "/metrics"))[0] == 200


async def test_no_other_origin_may_read_archived_content(small):
    """A page of any other origin, asking with the visitor's credentials (as behind an
    authenticating proxy), gets no CORS header that lets a browser show it the answer; a
    replayed page (Origin: null) may read, never with credentials."""
    async with serving(small) as replay:
        path = f"/web/{STAMP}id_/{PAGE}"
        for origin in ("http://evil.example", replay.app, "https://intranet.example:8443"):
            asked = {"Origin": origin, "Cookie": "session=visitor", "Authorization": "Basic dmlzaXRvcg=="}
            status, headers, _ = await get(replay.content, path, **asked)
            assert status == 200, origin
            cors = {name for name in headers if name.startswith("access-control-")}
            assert cors == set(), (origin, cors)
            preflight = {"Origin": origin, "Access-Control-Request-Method": "GET",
                         "Access-Control-Request-Headers": "authorization"}
            status, headers, _ = await get(replay.content, path, "OPTIONS", **preflight)
            assert {name for name in headers if name.startswith("access-control-")} == set(), origin
        status, headers, _ = await get(replay.content, path, Origin="null", Cookie="session=visitor")
        assert headers["access-control-allow-origin"] == "null"
        assert "access-control-allow-credentials" not in headers
        assert headers["vary"] == "Origin"


async def test_public_urls_come_from_the_config_never_from_the_host_header(small):
    base, content = "https://archive.example.org/wayback", "https://content.example.org"
    async with serving(small, base_url=base + "/", content_origin=content) as replay:
        evil = {"Host": "evil.example"}
        status, headers, _ = await get(replay.app_at, f"/web/{PAGE}", **evil)
        assert (status, headers["location"]) == (302, f"{content}/web/{STAMP}/{PAGE}")
        assert f"<{base}/timemap/link/{PAGE}>" in headers["link"]
        status, headers, body = await get(replay.content_at, f"/web/{STAMP}/{PAGE}", **evil)
        assert status == 200
        assert f'<{base}/web/{PAGE}>; rel="timegate"' in headers["link"]
        assert f'<{content}/web/{STAMP}/{PAGE}>; rel="first last memento"' in headers["link"]
        assert f'href="{base}/web/*/{PAGE}"'.encode() in body  # the banner's capture list
        _, _, link = await get(replay.app_at, f"/timemap/link/{PAGE}", **evil)
        _, _, json_map = await get(replay.app_at, f"/timemap/json/{PAGE}", **evil)
        _, _, listing = await get(replay.app_at, f"/web/*/{PAGE}", **evil)
        for body in (link, json_map, listing, headers["link"].encode()):
            assert b"evil.example" not in body
        assert f"<{content}/web/{STAMP}/{PAGE}>".encode() in link
        assert f'"uri": "{content}/web/{STAMP}/{PAGE}"'.encode() in json_map
        assert f'href="{content}/web/{STAMP}/{PAGE}"'.encode() in listing


# --- listings that cannot freeze the service -------------------------------------------------


async def test_a_backtracking_filter_is_answered_at_once(tmp_path):
    """Python's re needs 2^n steps for this pattern on a URL of n characters that does not end in
    Z (1.15 s for a 30-character URL); RE2 answers in linear time. The service runs as
    ``archiver replay`` in its own process, so a frozen server fails this test instead of
    freezing it."""
    long_url = "http://site.test/" + "a" * 60
    (tmp_path / "archiver.toml").write_text(
        '[archive]\nroot = "archive"\n[replay]\nlisten = "127.0.0.1:0"\ncontent_listen = "127.0.0.1:0"\n'
    )
    config = load(tmp_path / "archiver.toml")
    with Catalog(config.root / "catalog", config.catalog.shards) as catalog:
        catalog.add([_capture(long_url, STAMP)])
    async with replay_process(config.path) as replay:
        with trio.fail_after(30):  # the old engine would take years here, not seconds
            status, _, body = await get(replay.app, "/cdx?url=site.test/*&filter=~url:.{3}(.|.)%2BZ")
            assert (status, body) == (200, b"")
            query = "/cdx?url=site.test/*&filter=~url:.{3}(.|.)%2Ba$&fl=url&output=text"
            status, _, body = await get(replay.app, query)
            assert (status, body.decode().split()) == (200, [long_url])


@pytest.mark.parametrize(
    ("pattern", "message"),
    [("(a)%5C1", "bad regular expression for RE2"), ("(%3F%3Dx)", "bad regular expression for RE2"),
     ("a{1001}", "bad regular expression for RE2"), ("a" * 257, "longer than 256 characters")],
)  # fmt: skip
async def test_what_re2_cannot_run_is_a_400(small, pattern, message):
    async with serving(small) as replay:
        status, headers, body = await get(replay.app, f"/cdx?url={PAGE}&filter=~url:{pattern}")
    assert (status, headers["content-type"]) == (400, "text/plain; charset=utf-8")
    assert message in body.decode()


@pytest.mark.parametrize(
    "path",
    [f"/cdx?url={FOLDER}*", f"/cdx?url={BUSY}&filter=~url:nothing", f"/web/*/{BUSY}", f"/web/*/{BUSY}*",
     f"/timemap/link/{BUSY}", f"/timemap/json/{BUSY}"],
)  # fmt: skip
async def test_listings_stop_at_the_row_cap_with_a_400(big, path):
    async with serving(big, scan_max_rows=MANY // 4, timemap_page=MANY) as replay:
        status, _, body = await get(replay.app, path)
    assert status == 400, (path, body[:200])
    assert f"examines more than {MANY // 4} catalog rows".encode() in body


async def test_a_memento_timegate_and_timemap_page_read_no_more_than_they_answer(big):
    """Under a row cap far below the URL's captures, a memento, the TimeGate and a TimeMap page
    are answered: they read by index seeks and one page, not every capture."""
    middle = time.strftime("%Y%m%d%H%M%S", time.gmtime(1_700_000_000 + MANY // 2))
    async with serving(big, scan_max_rows=MANY // 40, timemap_page=MANY // 100) as replay:
        gate, headers, _ = await get(replay.app, f"/web/{BUSY}")
        assert gate == 302 and headers["location"] == f"{replay.content}/web/{STAMPS[-1]}/{BUSY}"
        assert f'rel="first memento"; datetime="{http_date(STAMPS[0])}"' in headers["link"]
        status, headers, _ = await get(replay.content, f"/web/{middle}id_/{BUSY}")
        assert status == 404  # the catalog's rows point at no WARC: found, then its record missing
        status, _, body = await get(replay.app, f"/timemap/link/{BUSY}")
        assert status == 200 and body.count(b'; datetime="') == MANY // 100
        status, _, body = await get(replay.app, f"/timemap/json/{BUSY}")
        assert status == 200 and len(json.loads(body)["mementos"]["list"]) == MANY // 100


async def test_listings_stop_at_their_deadline_with_a_503(big):
    async with serving(big, scan_deadline=0.05, scan_slice_rows=100, timemap_page=MANY) as replay:
        for path in (f"/cdx?url={BUSY}&filter=~url:nothing", f"/timemap/link/{BUSY}", f"/web/*/{BUSY}*"):
            status, _, body = await get(replay.app, path)
            assert status == 503, (path, body[:200])
            assert b"ran past its deadline of 0.05 s" in body
        # Within its limits the same listing is whole.
    async with serving(big) as replay:
        status, _, body = await get(replay.app, f"/cdx?url={BUSY}&fl=timestamp&output=text")
    assert status == 200 and len(body.split()) == MANY


async def test_other_requests_are_answered_while_a_long_listing_runs(big):
    """A CDX query that examines every row of the big catalog and keeps few, against quick
    requests sent one after another meanwhile: they keep being answered while it runs. With the
    scan on the event loop, at most the one that came before it is."""
    client = HttpClient(CrawlConfig(user_agent="replay-test", total_timeout=60), allowed_networks=LOOPBACK)
    answered_during: list[int] = []
    heavy = f"/cdx?url={FOLDER}*&filter=~url:.*9999$&fl=url&output=text"
    async with serving(big) as replay:
        done = trio.Event()
        found: list[bytes] = []

        async def long_listing() -> None:
            result = await client.fetch(replay.app + heavy, "127.0.0.1")
            assert result.status == 200, result.body[:200]
            found.append(result.body)
            done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_listing)
            quick = HttpClient(CrawlConfig(user_agent="replay-test", total_timeout=60),
                               allowed_networks=LOOPBACK)
            while not done.is_set():
                first = f"{replay.app}/cdx?url={BUSY}&limit=1&fl=url&output=text"
                result = await quick.fetch(first, "127.0.0.1")
                assert (result.status, result.body) == (200, f"{BUSY}\n".encode())
                if not done.is_set():
                    answered_during.append(result.status)
            await quick.aclose()
    await client.aclose()
    assert found[0].decode().split() == [f"{FOLDER}{n:06d}" for n in range(MANY) if n % 10_000 == 9999]
    assert len(answered_during) >= 5, answered_during


HEAVY = 50  # more than trio's 40 default worker threads


async def test_heavy_listings_past_their_bound_are_refused_and_replay_keeps_its_pace(big):
    """50 heavy CDX listings at once (each examines every capture of BUSY and keeps none) while
    the TimeGate is asked again and again: replay.scan_listings (8) of them run and the rest are
    refused at once with 503 and Retry-After, and every TimeGate is answered within 2 s. Before,
    each listing held one of trio's 40 worker threads while it waited for the catalog: past 40 the
    catalog stopped for everyone until the listings' deadline (30 s)."""
    heavy = f"/cdx?url={BUSY}&filter=~url:nothing"
    answers: list[tuple[int, dict[str, str], bytes]] = []
    waits: list[float] = []
    async with serving(big) as replay:

        async def listing() -> None:
            answers.append(await get(replay.app, heavy))

        async with trio.open_nursery() as nursery:
            for _ in range(HEAVY):
                nursery.start_soon(listing)
            while len(answers) < HEAVY:
                start = trio.current_time()
                status, headers, _ = await get(replay.app, f"/web/{BUSY}")
                if len(answers) < HEAVY:
                    waits.append(trio.current_time() - start)
                assert status == 302 and headers["location"].endswith(f"/web/{STAMPS[-1]}/{BUSY}")
    refused = [a for a in answers if a[0] == 503]
    assert len(refused) == HEAVY - 8, [a[0] for a in answers]
    assert all(h["retry-after"] == "5" and b"listings are running" in body for _, h, body in refused)
    assert [a[0] for a in answers if a[0] != 503] == [200] * 8
    assert len(waits) >= 3 and max(waits) < 2.0, waits
