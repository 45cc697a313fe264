"""The CDX API: pure query logic."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from archiver.replay.cdxquery import MAX_LIMIT, CdxError, CdxQuery, parse_query, record, render, select
from archiver.store.catalogkeys import surt_key
from archiver.store.models import Capture

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


def test_the_orders_that_hold_lines_give_back_the_records_they_read():
    """Closest, reverse and the last N hold CDXJ lines and read each record back from its line:
    the same records, whatever the fields (labels, a redirect, no status, non-ASCII)."""
    caps = [
        capture(STAMPS[0], labels='{"lang":"fr","note":"été \\"x\\""}'),
        capture(STAMPS[1], url="http://example.org/page", status=None, mime="-", redirect="http://e.org/ü"),
        capture(STAMPS[2], rectype="revisit", mime="warc/revisit", offset=2**40),
        capture(STAMPS[4], url="https://www.example.org/page"),
    ]
    forward = list(select(q(f"url={URL}"), caps))
    assert list(select(q(f"url={URL}&sort=reverse"), caps)) == forward[::-1]
    assert list(select(q(f"url={URL}&limit=-2"), caps)) == forward[-2:]
    assert list(select(q(f"url={URL}&closest={STAMPS[4]}&limit=2"), caps)) == [forward[3], forward[2]]
    assert [row[0] for row in forward] == [record(c) for c in caps]
