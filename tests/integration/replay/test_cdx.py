"""The CDX API over HTTP against a crawled archive served by hypercorn on 127.0.0.1."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial

import pytest
import trio
from hypercorn.config import Config as HyperConfig
from hypercorn.trio import serve
from starlette.applications import Starlette

from archiver.config import CrawlConfig
from archiver.crawl.http import HttpClient
from archiver.replay import cdx, dnspages, statuspages
from archiver.replay.archive import ReplayArchive
from archiver.replay.cdxquery import CdxQuery, select
from archiver.store.catalogkeys import surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from demoweb import WebSpec
from tests.support.crawls import LOOPBACK, Crawled

URL = "http://example.org/page"
STAMPS = ["20200101000000", "20200601000000", "20210101000000", "20210101000000", "20220101000000"]


def capture(timestamp: str, url: str = URL, **fields: object) -> Capture:
    base = Capture(
        urlkey=surt_key(url), timestamp=timestamp, url=url, status=200, mime="text/html",
        digest="sha1:AAAA", redirect=None, filename="a.warc.gz", offset=0, length=100,
    )  # fmt: skip
    return replace(base, **fields)


def run(query: CdxQuery, captures: list[Capture]) -> list[str]:
    return [row[0]["timestamp"] for row in select(query, captures)]


# -- HTTP, against a crawl


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    done = Crawled(
        tmp_path_factory.mktemp("cdx"), WebSpec(sites=3, pages_per_site=6, port=0, trap=False), min_rest=0.01
    )
    trio.run(done.run)
    # Five more captures of one page at known dates (the CDX API never opens the WARC files).
    done.page = done.web.origins()[0] + "/"
    with Catalog(done.root / "catalog", done.config.catalog.shards) as catalog:
        catalog.add(
            capture(s, url=done.page, filename="synthetic.warc.gz", offset=n) for n, s in enumerate(STAMPS)
        )
        done.expected = {
            (url, match): [c.to_cdxj() for c in catalog.list(url, match)]
            for url in (done.page, done.page + "articles/", "demo")
            for match in ("exact", "prefix", "host", "domain")
        }
    return done


async def start(nursery: trio.Nursery, config) -> tuple[HttpClient, str]:
    app = Starlette(routes=cdx.routes + dnspages.routes + statuspages.routes)
    app.state.archive = ReplayArchive(config)
    hyper = HyperConfig()
    hyper.bind = ["127.0.0.1:0"]
    binds = await nursery.start(partial(serve, app, hyper))
    return HttpClient(CrawlConfig(user_agent="archiver-test"), allowed_networks=LOOPBACK), binds[0]


async def get(client: HttpClient, base: str, query: str) -> tuple[int, str, str]:
    result = await client.fetch(f"{base}/cdx?{query}", "127.0.0.1")
    assert result.error is None, result.error
    return result.status, result.header("content-type"), result.body.decode()


async def test_match_types_return_what_the_catalog_holds(crawled, nursery):
    client, base = await start(nursery, crawled.config)
    for (url, match), lines in crawled.expected.items():
        status, kind, body = await get(client, base, f"url={url}&matchType={match}")
        assert (status, kind) == (200, "text/x-cdxj; charset=utf-8")
        assert body.splitlines() == lines, (url, match)
    assert len(crawled.expected[(crawled.page, "exact")]) == 6  # the crawl's and the five added
    domain = crawled.expected[("demo", "domain")]
    assert len(domain) > len(crawled.expected[(crawled.page, "host")]) > 6
    # The wildcard forms, which pywb's and the IA's documents show.
    assert (await get(client, base, f"url={crawled.page}*"))[2].splitlines() == crawled.expected[
        (crawled.page, "prefix")
    ]
    assert (await get(client, base, "url=*.demo"))[2].splitlines() == domain


async def test_pywb_remote_index_queries(crawled, nursery):
    client, base = await start(nursery, crawled.config)
    # What pywb's RemoteIndexSource sends: url, closest (maybe empty), sort=closest, limit=10.
    status, _, body = await get(client, base, f"url={crawled.page}&closest=20200930&sort=closest&limit=3")
    assert status == 200
    assert [line.split(" ")[1] for line in body.splitlines()] == [STAMPS[2], STAMPS[3], STAMPS[1]]
    _, _, body = await get(client, base, f"url={crawled.page}&closest=&sort=closest&limit=10")
    assert [line.split(" ")[1] for line in body.splitlines()] == [
        line.split(" ")[1] for line in crawled.expected[(crawled.page, "exact")]
    ]
    # The crawl's own capture is the newest: closest to now, first.
    _, _, body = await get(client, base, f"url={crawled.page}&closest=2100&limit=1")
    (line,) = body.splitlines()
    assert json.loads(line.split(" ", 2)[2])["filename"].startswith("ARCHIVER-")


async def test_dates_filters_collapse_fields_and_json(crawled, nursery):
    client, base = await start(nursery, crawled.config)
    _, _, body = await get(client, base, f"url={crawled.page}&from=2020&to=2021")
    assert [line.split(" ")[1] for line in body.splitlines()] == STAMPS[:4]
    _, kind, body = await get(client, base, f"url={crawled.page}&output=json&fl=timestamp,filename&limit=2")
    assert kind == "text/x-ndjson; charset=utf-8"
    assert [json.loads(line) for line in body.splitlines()] == [
        {"timestamp": STAMPS[0], "filename": "synthetic.warc.gz"},
        {"timestamp": STAMPS[1], "filename": "synthetic.warc.gz"},
    ]
    prefix = crawled.expected[(crawled.page, "prefix")]
    _, _, body = await get(
        client, base, f"url={crawled.page}&matchType=prefix&filter=!~mime:text/&output=json"
    )
    found = [json.loads(line) for line in body.splitlines()]
    assert found and all(not r.get("mime", "").startswith("text/") for r in found)
    assert len(found) == sum('"mime": "text/' not in line for line in prefix)
    _, _, body = await get(client, base, f"url={crawled.page}&matchType=prefix&collapse=urlkey&fl=urlkey")
    keys = [line.split(" ")[0] for line in prefix]
    assert [line.split(" ")[0] for line in body.splitlines()] == sorted(set(keys))
    _, kind, body = await get(client, base, f"url={crawled.page}&output=text&fl=timestamp,statuscode&limit=1")
    assert (kind, body) == ("text/plain; charset=utf-8", f"{STAMPS[0]} 200\n")


async def test_bad_requests_get_400_with_a_message(crawled, nursery):
    client, base = await start(nursery, crawled.config)
    for query, message in [
        ("", "url parameter is required"),
        ("url=demo&matchType=everything", "unknown matchType"),
        ("url=dns:example.org", "not a usable URL"),
        ("url=a%20b", "not a usable URL"),
        ("url=demo&limit=x", "limit must be an integer"),
        ("url=demo&filter=~url:[", "bad regular expression"),
        ("url=demo&closest=2021-02-30", "day is out of range"),
    ]:
        status, kind, body = await get(client, base, query)
        assert (status, kind) == (400, "text/plain; charset=utf-8"), query
        assert message in body, (query, body)
    status, _, body = await get(client, base, "url=http://nowhere.example/")
    assert (status, body) == (200, "")  # nothing captured: an empty listing, as pywb and the IA answer
