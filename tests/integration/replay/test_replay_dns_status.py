"""DNS history pages, the status page and /metrics, served by hypercorn on 127.0.0.1."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from functools import partial

import pytest
import trio
from hypercorn.config import Config as HyperConfig
from hypercorn.trio import serve
from starlette.applications import Starlette

from archiver import config
from archiver.config import CrawlConfig
from archiver.crawl.http import HttpClient
from archiver.crawl.stats import Stats
from archiver.replay import cdx, dnspages, statuspages
from archiver.replay.archive import ReplayArchive
from archiver.store.embedded.catalog import Catalog
from archiver.store.embedded.dnshistory import DnsHistory
from archiver.store.models import Observation
from archiver.store.status import status_path, write_status
from archiver.web.timestamps import parse_date, to_datetime
from tests.support.crawls import LOOPBACK

T1 = to_datetime(parse_date("2020-01-01")).timestamp()
T2 = to_datetime(parse_date("2022-01-01")).timestamp()


@pytest.fixture
def archive_config(tmp_path) -> config.Config:
    path = tmp_path / "archiver.toml"
    path.write_text('[archive]\nroot = "archive"\n[catalog]\nshards = 4\n[crawl]\nstatus_interval = 2.0\n')
    cfg = config.load(path)
    Catalog(cfg.root / "catalog", cfg.catalog.shards).close()  # an empty catalog
    return cfg


@pytest.fixture
def dns_config(archive_config) -> config.Config:
    with DnsHistory(archive_config.root / "dns.sqlite") as history:
        first = Observation(
            "www.example.org", "host.example.net", ("www.example.org",), ("192.0.2.1", "192.0.2.2"), 60
        )
        history.record(first, T1, next_check=T1 + 60)
        later = Observation(
            "www.example.org", "host.example.net", ("www.example.org",), ("198.51.100.7",), 60
        )
        history.record(later, T2, next_check=T2 + 60)
        odd = Observation("odd.example.org", "odd.example.org", (), ("192.0.2.9",), 60, source="<b>bold</b>")
        history.record(odd, T1, next_check=T1 + 60)
    return archive_config


async def start(nursery: trio.Nursery, cfg: config.Config) -> str:
    app = Starlette(routes=cdx.routes + dnspages.routes + statuspages.routes)
    app.state.archive = ReplayArchive(cfg)
    hyper = HyperConfig()
    hyper.bind = ["127.0.0.1:0"]
    return (await nursery.start(partial(serve, app, hyper)))[0]


async def get(base: str, path: str, accept: str | None = None):
    headers = [("Accept", accept)] if accept else []
    client = HttpClient(CrawlConfig(user_agent="archiver-test"), extra_headers=headers,
                        allowed_networks=LOOPBACK)
    result = await client.fetch(base + path, "127.0.0.1")
    assert result.error is None, result.error
    return result


# -- DNS history


async def test_dns_json_rows_current_and_at(dns_config, nursery):
    base = await start(nursery, dns_config)
    result = await get(base, "/dns/www.example.org?format=json")
    assert result.status == 200 and result.header("content-type") == "application/json"
    page = json.loads(result.body)
    assert page["host"] == "www.example.org"
    current = {"canonical": "host.example.net", "addresses": ["198.51.100.7"], "aliases": ["www.example.org"]}
    assert page["current"] == {**current, "id": 1}
    rows = {(r["value"], r["type"]): r for r in page["rows"]}
    names = {("host.example.net", "canonical"), ("www.example.org", "alias")}
    addresses = {("192.0.2.1", "address"), ("192.0.2.2", "alias"), ("198.51.100.7", "address")}
    assert set(rows) == names | addresses
    old = rows[("192.0.2.1", "address")]
    assert (old["entered"], old["superseded"]) == ("2020-01-01T00:00:00Z", "2022-01-01T00:00:00Z")
    assert (old["entered_unix"], old["superseded_unix"], old["source"], old["id"]) == (T1, T2, "dns", 1)
    assert rows[("198.51.100.7", "address")]["superseded"] is None
    assert "at" not in page

    first, second = ["192.0.2.1", "192.0.2.2"], ["198.51.100.7"]
    for at, expected in [
        ("2021", first),
        ("2021-06-30T12:00:00%2B02:00", first),
        ("2021-12-31T23:59:59Z", first),
        ("20220101000000", second),  # valid from the second it was entered
    ]:
        page = json.loads((await get(base, f"/dns/www.example.org?format=json&at={at}")).body)
        assert page["at"]["resolved"]["addresses"] == expected, at
    page = json.loads((await get(base, "/dns/www.example.org?format=json&at=2019")).body)
    assert page["at"] == {"date": "2019-01-01T00:00:00Z", "resolved": None}
    # The canonical host's own page tells the same history.
    page = json.loads((await get(base, "/dns/HOST.example.net.?format=json")).body)
    assert page["host"] == "host.example.net" and len(page["rows"]) == 5


async def test_dns_format_by_accept_header(dns_config, nursery):
    base = await start(nursery, dns_config)
    json_ = await get(base, "/dns/www.example.org?at=2021", accept="application/json")
    assert json_.header("content-type") == "application/json" and json_.header("vary") == "Accept"
    assert json.loads(json_.body)["at"]["resolved"]["addresses"] == ["192.0.2.1", "192.0.2.2"]
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    for accept in (browser, "*/*", "text/html;q=0.9, application/json;q=0.5", None):
        page = await get(base, "/dns/www.example.org?at=2021", accept=accept)
        assert page.header("content-type") == "text/html; charset=utf-8", accept
    assert (await get(base, "/dns/www.example.org", accept="text/html;q=0.4, application/json")).header(
        "content-type"
    ) == "application/json"
    html = (
        await get(base, "/dns/www.example.org?at=2021&format=html", accept="application/json")
    ).body.decode()
    assert "<h1>DNS history of www.example.org</h1>" in html
    at = r"At 2021-01-01T00:00:00Z: canonical <b>host.example.net</b>,\s*addresses <b>192.0.2.1</b>, <b>192"
    assert re.search(at, html)
    assert "Now: canonical <b>host.example.net</b>" in html and "198.51.100.7" in html
    assert html.count("<tr") == 6  # a header and five rows
    assert 'value="2021"' in html and "?format=json&amp;at=2021" in html


async def test_dns_pages_escape_what_they_show(dns_config, nursery):
    base = await start(nursery, dns_config)
    html = (await get(base, "/dns/odd.example.org")).body.decode()
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold</b>" not in html
    bad = await get(base, "/dns/odd.example.org?at=%3Cscript%3Ealert(1)%3C/script%3E")
    assert bad.status == 400
    assert b"&lt;script&gt;" in bad.body and b"<script>" not in bad.body


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/dns/192.0.2.1", 400, "is an address"),
        ("/dns/example.org:8080", 400, "not a host name"),
        ("/dns/a%20b", 400, "not a host name"),
        ("/dns/www.example.org?at=2021-13", 400, "month 13"),
        ("/dns/www.example.org?at=20215", 400, "do not end on a field boundary"),
        ("/dns/www.example.org?format=xml", 400, "unknown format"),
        ("/dns/nowhere.example.org", 404, "no DNS history for nowhere.example.org"),
    ],
)
async def test_dns_bad_requests(dns_config, nursery, path, status, message):
    base = await start(nursery, dns_config)
    result = await get(base, path, accept="application/json")
    assert result.status == status
    if "format=" in path:  # a bad format cannot choose JSON: the message comes as HTML
        assert result.header("content-type") == "text/html; charset=utf-8" and message in result.body.decode()
    else:
        (error,) = json.loads(result.body).values()
        assert message in error


async def test_dns_without_a_history(archive_config, nursery):
    base = await start(nursery, archive_config)
    result = await get(base, "/dns/www.example.org")
    assert result.status == 404 and b"no DNS history yet" in result.body


# -- status and metrics


def write_statuses(cfg: config.Config) -> None:
    stats = Stats(process=0, started=time.time() - 3725)
    stats.pages, stats.bytes, stats.sites_done = 1234, 5 * 2**20, 7
    stats.errors = Counter({"http-4xx": 3, "timeout": 2})
    stats.skipped = Counter({"trap": 1})
    stats.faults = Counter({"store-unavailable": 2, "store-recovered": 1})
    stats.active = {
        "http://a.example": {"url": "http://a.example/x?<b>=1&y", "queued": 17},
        "http://b.example": {"url": "http://b.example/", "queued": 4},
    }
    write_status(status_path(cfg.root, 0), stats.snapshot({"waiting": 5, "active": 2, "done": 7}))
    gone = Stats(process=1, pages=99)
    old = gone.snapshot({"waiting": 0, "done": 3})
    old["time"] -= 3600  # a process that stopped an hour ago
    write_status(status_path(cfg.root, 1), old)


async def test_status_page(archive_config, nursery):
    write_statuses(archive_config)
    base = await start(nursery, archive_config)
    result = await get(base, "/status")
    html = result.body.decode()
    assert result.status == 200 and result.header("cache-control") == "no-store"
    assert '<meta http-equiv="refresh" content="2">' in html  # crawl.status_interval
    assert "Process 0 (pid" in html and ">1234<" in html and "5.0 MiB" in html and "1:02:05" in html
    assert "http://a.example/x?&lt;b&gt;=1&amp;y" in html and "<b>=1" not in html
    assert re.search(r'<td class="n">17</td><td class="url">', html)
    assert "Errors: http-4xx 3, timeout 2." in html and "Skipped: trap 1." in html
    assert "Site queue: active 2, done 7, waiting 5." in html
    assert re.search(r'<h2 class="stale">Process 1 \(pid \d+\): stale, no status for 1:00:0\d', html)
    assert "2 crawler process(es), 2 active site(s),\n1234 pages" in html  # the stale one not counted


async def test_metrics(archive_config, nursery):
    write_statuses(archive_config)
    base = await start(nursery, archive_config)
    result = await get(base, "/metrics")
    assert result.status == 200
    assert result.header("content-type") == "text/plain; version=0.0.4; charset=utf-8"
    samples = {}
    for line in result.body.decode().splitlines():
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    assert samples['archiver_pages_total{process="0"}'] == 1234
    assert samples['archiver_pages_total{process="1"}'] == 99
    assert samples['archiver_bytes_total{process="0"}'] == 5 * 2**20
    assert samples['archiver_sites_done_total{process="0"}'] == 7
    assert samples['archiver_active_sites{process="0"}'] == 2
    assert samples['archiver_queued_urls{process="0"}'] == 21
    assert samples['archiver_sites{process="0",state="waiting"}'] == 5
    assert samples['archiver_errors_total{process="0",kind="timeout"}'] == 2
    assert samples['archiver_skipped_total{process="0",reason="trap"}'] == 1
    assert samples['archiver_site_queued_urls{process="0",site="http://a.example"}'] == 17
    assert samples['archiver_faults_total{process="0",event="store-unavailable"}'] == 2
    assert time.time() - samples['archiver_status_time_seconds{process="1"}'] > 3500
    text = result.body.decode()
    assert "# TYPE archiver_pages_total counter\n" in text and "# TYPE archiver_sites gauge\n" in text
    assert text.count("# HELP ") == text.count("# TYPE ") == 19


async def test_status_and_metrics_survive_odd_files(archive_config, nursery):
    state = archive_config.root / "state"
    state.mkdir(parents=True)
    base = await start(nursery, archive_config)
    page = await get(base, "/status")
    assert page.status == 200 and b"No crawler has written a status file yet." in page.body
    assert (await get(base, "/metrics")).body.count(b"\narchiver_") == 0  # only HELP and TYPE lines
    (state / "crawl-5.json").write_text(json.dumps({"process": 5, "pages": "x", "active": {"s": 3}}))
    (state / "crawl-6.json").write_text("{not json")
    page = await get(base, "/status")
    assert page.status == 200 and b"Process 5 (pid ?): stale" in page.body
    metrics = (await get(base, "/metrics")).body.decode()
    assert 'archiver_active_sites{process="5"} 0' in metrics and 'process="6"' not in metrics
