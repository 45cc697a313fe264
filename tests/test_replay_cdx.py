"""The CDX API: pure query logic, then HTTP against a crawled archive served by hypercorn on 127.0.0.1."""

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
from archiver.replay.cdxquery import MAX_LIMIT, CdxError, CdxQuery, parse_query, record, render, select
from archiver.store.catalog import Capture, Catalog, surt_key
from tests.crawlkit import LOOPBACK, Crawled
from tools.demoweb import WebSpec

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


def q(text: str) -> CdxQuery:
    return parse_query(pair.split("=", 1) for pair in text.split("&"))


# -- parameters


def test_defaults_and_wildcards():
    query = q(f"url={URL}")
    assert (query.match, query.limit, query.output, query.closest) == ("exact", MAX_LIMIT, "cdxj", None)
    prefix, domain = q("url=example.org/dir/*"), q("url=*.example.org")
    assert (prefix.url, prefix.match) == ("example.org/dir/", "prefix")
    assert (domain.url, domain.match) == ("example.org", "domain")
    # A wildcard says the match type only when matchType is absent or agrees.
    assert q("url=example.org/*&matchType=exact").url == "example.org/*"
    assert q("url=a.org&matchType=host").match == "host"


def test_dates_pad_as_pywb():
    query = q("url=a.org&from=2021&to=2021")
    assert (query.from_, query.to) == ("20210000000000", "20219999999999")
    assert q("url=a.org&from=20215").from_ == "20215000000000"  # any digit count is a text prefix
    assert q("url=a.org&to=2021-06-30").to == "20210630235959"  # ISO, upper end of the day
    # closest as pywb reads it (warcio's timestamp_to_datetime): the last second of the span.
    assert q("url=a.org&closest=2021").closest == "20211231235959"
    assert q("url=a.org&closest=20215").closest == "20211231235959"  # month 52 -> 12
    assert q("url=a.org&closest=20210231").closest == "20210228235959"
    assert q("url=a.org&closest=2021-02").closest == "20210228235959"
    assert q("url=a.org&closest=2021-06-30T12:00:00+02:00").closest == "20210630100000"
    # pywb sends an empty closest when the request had no date: no closest order, as pywb.
    empty = q("url=a.org&closest=&sort=closest&limit=10")
    assert (empty.closest, empty.reverse, empty.limit) == (None, False, 10)
    assert q("url=a.org&sort=reverse").reverse


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("matchType=exact", "url parameter is required"),
        ("url=a.org&matchType=subdomain", "unknown matchType"),
        ("url=a.org&limit=ten", "limit must be an integer"),
        ("url=a.org&limit=0", "limit must not be 0"),
        ("url=a.org&limit=-3&sort=reverse", "negative limit"),
        ("url=a.org&from=2021-13", "month 13"),
        ("url=a.org&closest=yesterday", "closest: unreadable date"),
        ("url=a.org&sort=random", "unknown sort"),
        ("url=a.org&output=xml", "unknown output"),
        ("url=a.org&fl=url,size", "unknown field 'size'"),
        ("url=a.org&fl=url&fields=url", "fl or fields"),
        ("url=a.org&limit=1&limit=2", "limit given twice"),
        ("url=a.org&filter=~url:(", "bad regular expression"),
        ("url=a.org&filter=!status:", "nothing to look for"),
        ("url=a.org&filter=colour:red", "unknown field 'colour'"),
        ("url=a.org&collapse=timestamp:x", "positive integer"),
        ("url=a.org&collapse=when", "unknown field 'when'"),
        ("url=a.org&collapseTime=0", "positive integer"),
        ("url=a.org&showResumeKey=true", "showResumeKey is not supported"),
        ("url=a.org&page=2", "page is not supported"),
    ],
)
def test_malformed_parameters(text, message):
    with pytest.raises(CdxError, match=message):
        q(text)


def test_unknown_and_switched_off_parameters_are_ignored():
    assert q("url=a.org&gzip=false&showResumeKey=false&page=0&foo=1").url == "a.org"
    assert q("url=a.org&limit=1000000").limit == MAX_LIMIT
    assert q("url=a.org&limit=-1000000").limit == -MAX_LIMIT


def test_record_equals_the_cdxj_line():
    cases = [
        capture(STAMPS[0]),
        capture(STAMPS[0], mime="-", status=None),
        capture(STAMPS[0], status=301, redirect="http://example.org/other"),
        capture(STAMPS[0], mime="warc/revisit", rectype="revisit"),
    ]
    for c in cases:
        values = record(c)
        key, stamp, rest = c.to_cdxj().split(" ", 2)
        assert {"urlkey": key, "timestamp": stamp, **json.loads(rest)} == values
        assert list(values)[:2] == ["urlkey", "timestamp"]
    assert "mime" not in record(cases[1]) and "status" not in record(cases[1])
    assert record(cases[3])["mime"] == "warc/revisit"


# -- processing


def test_from_to_limit_and_reverse():
    caps = [capture(s, offset=i) for i, s in enumerate(STAMPS)]
    assert run(q(f"url={URL}&from=2021&to=2021"), caps) == STAMPS[2:4]
    assert run(q(f"url={URL}&from=202006"), caps) == STAMPS[1:]
    assert run(q(f"url={URL}&limit=2"), caps) == STAMPS[:2]
    assert run(q(f"url={URL}&limit=-2"), caps) == STAMPS[3:]  # the IA server's "last N"
    assert run(q(f"url={URL}&sort=reverse&limit=2"), caps) == [STAMPS[4], STAMPS[3]]
    assert run(q(f"url={URL}&sort=reverse"), caps) == STAMPS[::-1]


def test_closest_orders_by_distance_ties_to_the_earlier():
    caps = [capture(s, offset=i) for i, s in enumerate(STAMPS)]
    # 20210101 is 214 days after 20200601 and 365 days before 20220101.
    assert run(q(f"url={URL}&closest=20200930"), caps) == [
        STAMPS[2], STAMPS[3], STAMPS[1], STAMPS[0], STAMPS[4],
    ]  # fmt: skip
    offsets = [row[0]["offset"] for row in select(q(f"url={URL}&closest=20210101000000&limit=2"), caps)]
    assert offsets == ["2", "3"]  # the same second: index order
    # Exactly between 2020-01-01 and 2020-06-01 falls 2020-03-17 00:00: the earlier wins.
    assert run(q(f"url={URL}&closest=20200317000000&limit=1"), caps) == [STAMPS[0]]
    assert run(q(f"url={URL}&closest=20200317000001&limit=1"), caps) == [STAMPS[1]]
    assert run(q(f"url={URL}&closest=2030&limit=3"), caps) == [STAMPS[4], STAMPS[2], STAMPS[3]]


def test_closest_stops_reading_an_exact_listing_once_past():
    read: list[str] = []

    def listing():
        for s in STAMPS:
            read.append(s)
            yield capture(s)

    assert run(q(f"url={URL}&closest=20200102&limit=1"), listing()) == [STAMPS[0]]
    assert read == STAMPS[:2]  # the second is farther than the first: the rest are too
    read.clear()
    assert len(run(q(f"url={URL}&matchType=prefix&closest=20200102&limit=1"), listing())) == 1
    assert read == STAMPS  # several URLs are not in time order: every line is read


def test_filters_as_pywb():
    caps = [
        capture(STAMPS[0], status=200, mime="text/html"),
        capture(STAMPS[1], status=404, mime="text/html"),
        capture(STAMPS[2], status=None, mime="-"),
        capture(STAMPS[3], status=200, mime="image/png", url="http://example.org/page.png"),
    ]
    assert run(q(f"url={URL}&filter=status:200"), caps) == [STAMPS[0], STAMPS[3]]
    assert run(q(f"url={URL}&filter=!status:200"), caps) == [STAMPS[1], STAMPS[2]]  # missing is ""
    assert run(q(f"url={URL}&filter==mime:text/html"), caps) == STAMPS[:2]
    assert run(q(f"url={URL}&filter=!=mime:text/html"), caps) == STAMPS[2:4]
    assert run(q(f"url={URL}&filter==status:"), caps) == [STAMPS[2]]
    assert run(q(f"url={URL}&filter=mime:htm"), caps) == STAMPS[:2]  # substring
    assert run(q(f"url={URL}&filter=~mime:htm"), caps) == []  # regex from the start (re.match)
    assert run(q(f"url={URL}&filter=~mime:.*htm"), caps) == STAMPS[:2]
    assert run(q(f"url={URL}&filter=!~url:.*\\.png$"), caps) == STAMPS[:3]
    assert run(q(f"url={URL}&filter=~statuscode:[45]&filter=mimetype:html"), caps) == [STAMPS[1]]
    assert run(q(f"url={URL}&filter=image/png"), caps) == [STAMPS[3]]  # no field: the whole line


def test_collapse_adjacent_lines():
    caps = [
        capture("20200101000000", digest="sha1:A"),
        capture("20200101000500", digest="sha1:A"),
        capture("20200101010000", digest="sha1:B", status=404),
        capture("20200101010500", digest="sha1:A"),
        capture("20200102000000", digest="sha1:A"),
    ]
    stamps = [c.timestamp for c in caps]

    def kept(query: str) -> list[int]:
        return [stamps.index(s) for s in run(q(f"url={URL}&{query}"), caps)]

    assert kept("collapse=digest") == [0, 2, 3]
    assert kept("collapse=timestamp:10") == [0, 2, 4]
    assert kept("collapse=timestamp:8") == [0, 4]
    assert kept("collapse=timestamp:8&collapse=digest") == [0]  # the second sees what the first kept
    assert kept("collapseTime=8") == [0, 2, 3, 4]  # pywb's: the first N digits and the status together
    many = [capture(STAMPS[0], url=f"http://example.org/{n}") for n in "aabc"]
    assert len(run(q("url=example.org/*&collapse=urlkey"), many)) == 3


def test_render_outputs_and_fields():
    c = capture(STAMPS[0], status=None)
    row = (record(c), c.to_cdxj())
    assert render(q(f"url={URL}"), row) == c.to_cdxj() + "\n"
    assert render(q(f"url={URL}&fl=timestamp,url,status"), row) == (
        f'org,example)/page {STAMPS[0]} {{"url": "{URL}"}}\n'
    )  # urlkey and timestamp lead every CDXJ line; a missing field is left out
    assert json.loads(render(q(f"url={URL}&output=json"), row)) == record(c)
    assert render(q(f"url={URL}&output=json&fl=original,status,timestamp"), row) == (
        f'{{"url": "{URL}", "timestamp": "{STAMPS[0]}"}}\n'
    )
    assert render(q(f"url={URL}&output=text&fl=timestamp,status,length"), row) == f"{STAMPS[0]} - 100\n"
    assert render(q(f"url={URL}&output=text"), row).split() == list(record(c).values())


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
