"""The replay service over real HTTP: an archive of the demo web crawled at two dates, served by
Hypercorn's trio worker on 127.0.0.1 (the replay's pages on one port, archived content on another)
and read with archiver's own HTTP client."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
import trio

from archiver.config import CrawlConfig
from archiver.crawl.http import FetchResult, HttpClient
from archiver.replay.app import CLIENT_SRC, CSP
from archiver.replay.memento import http_date
from archiver.replay.rewrite import rewrite_html
from archiver.replay.serve import run
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from archiver.web.extract import Link, decode_text, extract_css, extract_html
from archiver.web.timestamps import from_datetime, to_datetime
from tests.support.crawls import LOOPBACK
from tests.support.replayarchive import TwoDates, copy_of, serving
from tests.support.repo import ROOT

PAGE1 = "/articles/0001.html"  # page 1 of a demo site (unchanged in version 1)


@pytest.fixture(scope="module")
def two(two_dates_crawled: TwoDates, tmp_path_factory) -> TwoDates:
    return copy_of(two_dates_crawled, tmp_path_factory.mktemp("replay"))


class Origin:
    """One of the service's origins, and a GET over a fresh connection each time."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    async def get(self, path: str, **headers: str) -> FetchResult:
        extra = [(name.replace("_", "-"), value) for name, value in headers.items()]
        client = HttpClient(CrawlConfig(user_agent="replay-test", total_timeout=10),
                            extra_headers=extra, allowed_networks=LOOPBACK)
        try:
            result = await client.fetch(self.origin + path, "127.0.0.1")
        finally:
            await client.aclose()
        assert result.error is None, result.error
        return result

    async def text(self, path: str, status: int = 200) -> str:
        result = await self.get(path)
        assert result.status == status, (path, result.status, result.body[:300])
        return result.body.decode()


class Replay(Origin):
    """The running service: GETs go to the replay's own pages, ``content`` is archived content."""

    def __init__(self, app: str, content: str) -> None:
        super().__init__(app)
        self.content = Origin(content)


@pytest.fixture
async def replay(two: TwoDates) -> AsyncIterator[Replay]:
    async with serving(two.config) as running:
        yield Replay(running.app, running.content)


def pair(two: TwoDates, path: str) -> tuple[Capture, Capture]:
    """The captures of ``path`` on the first site made by the first and by the second crawl."""
    url = two.web0.origin(two.web0.hosts[0]) + path
    first = [c for c in two.first if c.url == url]
    second = [c for c in two.second if c.url == url]
    assert len(first) == 1 and len(second) == 1, url
    return first[0], second[0]


def served(web, url: str) -> tuple[bytes, str]:
    """What the demo server sent for ``url`` to a client accepting gzip, and its behaviour."""
    parts = urlsplit(url)
    reply = web.respond(parts.hostname, parts.path + (f"?{parts.query}" if parts.query else ""))
    body = gzip.compress(reply.body, 6, mtime=0) if reply.behaviour == "gzip" else reply.body
    return body, reply.behaviour


def without_banner(body: str) -> str:
    return re.sub(r'<div id="archiver-banner".*?</div>', "", body, count=1)


def only_in(a: bytes, b: bytes) -> str:
    """A line of page ``a`` that page ``b`` lacks (changed prose)."""
    theirs = set(b.decode().splitlines())
    return next(line for line in a.decode().splitlines() if line not in theirs and line.startswith("<p>"))


# --- replay and redirects to the exact capture -----------------------------------------------


async def test_each_date_replays_its_own_version(two, replay):
    one, other = pair(two, "/")
    assert one.rectype == "response" and other.rectype == "response"  # page 0 changed
    v0, _ = served(two.web0, one.url)
    v1, _ = served(two.web1, one.url)
    old = await replay.content.text(f"/web/{one.timestamp}/{one.url}")
    new = await replay.content.text(f"/web/{other.timestamp}/{one.url}")
    assert only_in(v0, v1)[:60] in old and only_in(v0, v1)[:60] not in new
    assert only_in(v1, v0)[:60] in new and only_in(v1, v0)[:60] not in old


async def test_closest_capture_and_redirect_to_its_exact_timestamp(two, replay):
    one, other = pair(two, PAGE1)
    t1, t2 = to_datetime(one.timestamp), to_datetime(other.timestamp)
    half = (t2 - t1) // 2 // timedelta(seconds=1)
    for asked, chosen in (
        ("1999", one),
        ("2099", other),
        (one.timestamp[:12], one),
        (one.timestamp, one),
        (other.timestamp, other),
        (from_datetime(t1 + timedelta(seconds=half)), one),  # a tie goes to the earlier
        (from_datetime(t1 + timedelta(seconds=half + 1)), other),
    ):
        result = await replay.content.get(f"/web/{asked}im_/{one.url}")
        if asked == chosen.timestamp:
            assert result.status == 200
            assert result.header("Memento-Datetime") == http_date(chosen.timestamp)
        else:
            assert result.status == 302, asked
            assert result.header("Location") == f"/web/{chosen.timestamp}im_/{one.url}", asked


async def test_id_serves_the_bytes_the_server_sent(two, replay):
    site = two.web0.origin(two.web0.hosts[0])
    checked = set()
    for crawl, web in ((two.first, two.web0), (two.second, two.web1)):
        for capture in crawl:
            if not capture.url.startswith(site) or capture.status not in (200, 304):
                continue
            body, behaviour = served(web, capture.url)
            result = await replay.content.get(f"/web/{capture.timestamp}id_/{capture.url}")
            assert result.status == 200, capture.url
            assert result.body == body, capture.url
            assert (result.header("Content-Encoding") == "gzip") == (behaviour == "gzip")
            checked.add((capture.rectype, behaviour, capture.status))
    # Revisits of both profiles: the same payload again (200), and not modified (304).
    assert {
        ("response", "gzip", 200),
        ("response", "chunked", 200),
        ("revisit", "normal", 200),
        ("revisit", "gzip", 200),
        ("revisit", "normal", 304),
        ("revisit", "gzip", 304),
    } <= checked


async def test_revisit_is_served_with_the_payload_it_refers_to(two, replay):
    original, revisit = pair(two, "/frames/nav.html")
    assert original.rectype == "response" and revisit.rectype == "revisit"
    page = await replay.content.text(f"/web/{revisit.timestamp}/{revisit.url}")
    body = served(two.web1, revisit.url)[0]
    expected = rewrite_html(body, url=revisit.url, timestamp=revisit.timestamp, prefix="", client=CLIENT_SRC)
    assert without_banner(page) == expected.decode()
    assert f"/web/{revisit.timestamp}/{revisit.url[: -len('nav.html')]}content.html" in page


async def test_archived_redirects_lead_into_the_archive(two, replay):
    old, _ = pair(two, "/old")
    result = await replay.content.get(f"/web/{old.timestamp}/{old.url}")
    assert result.status == 301
    origin = two.web0.origin(two.web0.hosts[0])
    assert result.header("Location") == f"/web/{old.timestamp}/{origin}/moved/"
    assert result.header("X-Archive-Orig-Location") == f"{origin}/moved/"
    location, hops = result.header("Location"), 0
    while hops < 6:
        result = await replay.content.get(location)
        if result.status == 200:
            break
        assert result.status in (301, 302), result.status
        location, hops = result.header("Location"), hops + 1
    assert result.status == 200 and b"/moved/here.html" in result.body


# --- rewriting -------------------------------------------------------------------------------

MODIFIER = {
    "frame/src": "fr_",
    "iframe/src": "if_",
    "script/src": "js_",
    "a/href": "",
    "area/href": "",
    "meta/refresh": "",
    "embed/src": "oe_",
    "object/data": "oe_",
    "applet/code": "oe_",
}


async def test_every_link_kind_points_into_the_archive_at_the_same_date(two, replay):
    site = two.web0.origin(two.web0.hosts[0])
    kinds = set()
    for capture in two.first:
        if not capture.url.startswith(site) or capture.mime not in ("text/html", "text/css"):
            continue
        if capture.status != 200:
            continue
        result = await replay.content.get(f"/web/{capture.timestamp}/{capture.url}")
        assert result.status == 200
        assert result.header("Content-Security-Policy") == CSP
        if capture.mime == "text/css":
            links = extract_css(decode_text(result.body, None))
            assert result.header("Content-Type") == "text/css; charset=utf-8"
        else:
            found = extract_html(without_banner(result.body.decode()).encode())
            links = found.links
            assert found.base is None or found.base.startswith(f"/web/{capture.timestamp}/http://")
        if capture.mime == "text/html":  # every rewritten page loads the client script first
            assert links[0] == Link(CLIENT_SRC, "script/src"), capture.url
            links = links[1:]
        for link in links:
            if link.url.startswith(("mailto:", "javascript:")):
                continue
            match = re.fullmatch(rf"/web/{capture.timestamp}([a-z]{{2}}_)?/(http://[^#]*)(#.*)?", link.url)
            assert match, (capture.url, link)
            if link.kind in MODIFIER:
                assert (match.group(1) or "") == MODIFIER[link.kind], (capture.url, link)
            else:
                assert match.group(1) in ("im_", "cs_"), (capture.url, link)
            kinds.add(link.kind)
    assert kinds >= {
        "a/href", "area/href", "link/href", "script/src", "img/src", "img/lowsrc", "img/srcset",
        "style/url", "style-attr/url", "frame/src", "iframe/src", "embed/src", "object/data",
        "applet/code", "input/src", "body/background", "table/background", "td/background",
        "meta/refresh", "css/url", "css/import",
    }  # fmt: skip


async def test_banner_on_pages_with_previous_next_and_list_links(two, replay):
    one, other = pair(two, "/")
    first = await replay.content.text(f"/web/{one.timestamp}/{one.url}")
    second = await replay.content.text(f"/web/{other.timestamp}/{one.url}")
    banner = re.search(r'<div id="archiver-banner".*?</div>', first).group(0)
    assert f'href="/web/{other.timestamp}/{one.url}"' in banner
    assert f'href="{replay.origin}/web/*/{one.url}"' in banner and "all 2 captures" in banner
    assert f'href="{replay.origin}/"' in banner
    assert first.index('<body id="top">') + len('<body id="top">') == first.index(banner)
    banner = re.search(r'<div id="archiver-banner".*?</div>', second).group(0)
    assert f'href="/web/{one.timestamp}/{one.url}"' in banner and "last" in banner
    for mod in ("if_", "fr_", "id_"):
        assert "archiver-banner" not in await replay.content.text(f"/web/{one.timestamp}{mod}/{one.url}")
    frames, _ = pair(two, "/frames.html")
    assert "archiver-banner" not in await replay.content.text(f"/web/{frames.timestamp}/{frames.url}")


async def test_memento_headers_on_every_capture(two, replay):
    one, other = pair(two, PAGE1)
    origin, content = replay.origin, replay.content.origin
    result = await replay.content.get(f"/web/{other.timestamp}js_/{one.url}")
    assert result.header("Memento-Datetime") == http_date(other.timestamp)
    link = result.header("Link")
    assert f'<{one.url}>; rel="original"' in link
    assert f'<{origin}/web/{one.url}>; rel="timegate"' in link
    assert f'<{origin}/timemap/link/{one.url}>; rel="timemap"; type="application/link-format"' in link
    assert f'<{content}/web/{one.timestamp}/{one.url}>; rel="first prev memento"' in link
    assert f'<{content}/web/{other.timestamp}/{one.url}>; rel="last memento"' in link


# --- Memento TimeGate and TimeMaps -----------------------------------------------------------


async def test_timegate(two, replay):
    one, other = pair(two, PAGE1)
    for wanted, chosen in (
        (http_date(one.timestamp), one),
        ("Sun, 06 Nov 1994 08:49:37 GMT", one),
        (None, other),
    ):
        headers = {"Accept_Datetime": wanted} if wanted else {}
        result = await replay.get(f"/web/{one.url}", **headers)
        assert result.status == 302
        assert result.header("Location") == f"{replay.content.origin}/web/{chosen.timestamp}/{one.url}"
        assert result.header("Vary") == "accept-datetime"
        assert f'<{one.url}>; rel="original"' in result.header("Link")
    result = await replay.get(f"/web/{one.url}", Accept_Datetime="yesterday")
    assert result.status == 400 and b"HTTP date" in result.body
    assert (await replay.get("/web/http://nowhere.example/")).status == 404


async def test_timemaps(two, replay):
    one, other = pair(two, PAGE1)
    result = await replay.get(f"/timemap/link/{one.url}")
    assert result.status == 200 and result.header("Content-Type") == "application/link-format"
    body = result.body.decode()
    assert f'<{replay.content.origin}/web/{one.timestamp}/{one.url}>; rel="first memento"' in body
    assert f'<{replay.content.origin}/web/{other.timestamp}/{one.url}>; rel="last memento"' in body
    result = await replay.get(f"/timemap/json/{one.url}")
    listed = json.loads(result.body)["mementos"]["list"]
    assert [m["uri"] for m in listed] == [
        f"{replay.content.origin}/web/{c.timestamp}/{one.url}" for c in (one, other)
    ]
    assert (await replay.get("/timemap/link/http://nowhere.example/")).status == 404
    assert (await replay.get("/timemap/json/ftp://x/")).status == 400


# --- lists, home, errors ---------------------------------------------------------------------


async def test_capture_list_by_year_and_day(two, replay):
    one, other = pair(two, "/")
    page = await replay.text(f"/web/*/{one.url}")
    for capture in (one, other):
        assert f'href="{replay.content.origin}/web/{capture.timestamp}/{one.url}"' in page
    assert f'<h2 id="y{one.timestamp[:4]}">' in page
    assert f"<th>{one.timestamp[:4]}-{one.timestamp[4:6]}-{one.timestamp[6:8]}</th>" in page
    assert 'class="revisit"' not in page
    same_year = await replay.text(f"/web/{one.timestamp[:4]}*/{one.url}")
    assert same_year.count(f'/{one.url}"') >= 2
    assert "2 captures" in await replay.text(f"/web/*/{one.url}")
    await replay.text(f"/web/1999*/{one.url}", status=404)
    nav, _ = pair(two, "/frames/nav.html")
    assert 'class="revisit"' in await replay.text(f"/web/*/{nav.url}")


async def test_prefix_listing(two, replay):
    origin = two.web0.origin(two.web0.hosts[0])
    page = await replay.text(f"/web/*/{origin}/docs/*")
    with Catalog(two.root / "catalog", two.config.catalog.shards, readonly=True) as catalog:
        expected = {c.url for c in catalog.list(f"{origin}/docs/", "prefix")}
    listed = set(re.findall(rf'<a href="{replay.origin}/web/\*/([^"]+)">', page))
    assert listed == expected and expected
    await replay.text(f"/web/*/{origin}/nothing-here/*", status=404)


async def test_home_page_and_search(two, replay):
    home = await replay.text("/")
    assert f'<form class="search" method="get" action="{replay.origin}/search">' in home
    assert 'name="url"' in home
    origin = two.web0.origin(two.web0.hosts[0])
    for query, location in (
        (f"url={origin}/", f"{replay.origin}/web/*/{origin}/"),
        (f"url={origin}/docs/*", f"{replay.origin}/web/*/{origin}/docs/*"),
        (f"url={origin}/&date=2026-11-22T03:15", f"{replay.content.origin}/web/20261122031500/{origin}/"),
    ):
        result = await replay.get(f"/search?{query}")
        assert result.status == 302 and result.header("Location") == location


@pytest.mark.parametrize(
    "path",
    [
        "/web/2026130/http://a.org/",
        "/web/20261122xx_/http://a.org/",
        "/web/123456789012345/http://a.org/",
        "/web/2026/ftp://a.org/",
        "/web/2026/file:///etc/passwd",
        "/web/2026/http://[::1/",
        "/web/2026/",
        "/web/",
        "/web/*/",
        "/web/202613*/http://a.org/",
        "/timemap/link/",
        "/search",
        "/search?url=a.org&date=yesterday",
        "/search?url=mailto:a@b.org",
    ],
)
async def test_malformed_requests_get_400_with_a_message(replay, path):
    for origin in (replay, replay.content):
        if origin is replay.content and not path.startswith("/web/"):
            continue
        result = await origin.get(path)
        assert result.status == 400, (path, result.body)
        assert result.header("Content-Type").startswith("text/plain")
        assert result.body.startswith(b"400 Bad Request: ") and len(result.body) > 30


async def test_missing_capture_404_links_to_the_capture_list(replay):
    result = await replay.content.get("/web/2026/http://nowhere.example/page?a=1")
    assert result.status == 404
    assert f'href="{replay.origin}/web/*/http://nowhere.example/page?a=1"'.encode() in result.body
    assert result.header("Content-Security-Policy") == CSP
    assert (await replay.get("/no/such/route")).status == 404
    assert (await replay.content.get("/no/such/route")).status == 404


async def test_unreadable_record_gives_a_404_page(two, tmp_path):
    root = tmp_path / "archive"
    shutil.copytree(two.root / "catalog", root / "catalog")
    (root / "warcs").mkdir()  # the WARC files are gone
    config = dataclasses.replace(two.config, archive=dataclasses.replace(two.config.archive, root=root))
    one, _ = pair(two, PAGE1)
    async with serving(config) as running:
        result = await Origin(running.content).get(f"/web/{one.timestamp}/{one.url}")
    assert result.status == 404 and b"cannot be read" in result.body
    assert str(root).encode() not in result.body


async def test_names_reach_no_file_outside_the_archive(two, replay):
    for path in (
        "/web/2026/http://a.org/../../../etc/passwd",
        "/web/2026id_/http://%2e%2e/%2e%2e/etc/passwd",
        "/../../etc/passwd",
        "/web/*/http://a.org/..%2f..%2fetc%2fpasswd",
    ):
        for origin in (replay, replay.content):
            result = await origin.get(path)
            assert result.status in (302, 400, 404), path
            assert b"root:" not in result.body


async def test_other_services_are_mounted(two, replay):
    origin = two.web0.origin(two.web0.hosts[0])
    result = await replay.get(f"/cdx?url={origin}/")
    assert result.status == 200 and origin.encode() in result.body
    for path in ("/status", "/metrics"):
        assert (await replay.get(path)).status == 200
    assert (await replay.get(f"/dns/{two.web0.hosts[0]}")).status == 200


def test_run_reports_a_bad_or_busy_address(two, capsys):
    assert run(two.config, "nowhere:80") == 2
    assert "bad listen address" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert run(two.config, f"127.0.0.1:{port}") == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_service_stops_cleanly_on_signals(two, signum):
    script = (
        "import sys, dataclasses as d; from archiver.config import CrawlConfig, load; "
        "from archiver.replay.serve import run; c = load(sys.argv[1]); "
        "c = d.replace(c, replay=d.replace(c.replay, content_listen='127.0.0.1:0')); "
        "sys.exit(run(c, '127.0.0.1:0'))"
    )
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", script, str(two.config.path)], cwd=ROOT, stderr=subprocess.PIPE
    )
    try:
        seen = b""
        with trio.fail_after(20):
            while not (found := re.search(rb"Running on http://127\.0\.0\.1:(\d+)", seen)):
                chunk = await process.stderr.receive_some()
                assert chunk, seen
                seen += chunk
        result = await Origin(f"http://127.0.0.1:{found.group(1).decode()}").get("/")
        assert result.status == 200
        process.send_signal(signum)
        with trio.fail_after(20):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
