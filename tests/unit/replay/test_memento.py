"""Tests for archiver.replay.memento: HTTP dates, Link headers and TimeMaps (RFC 7089)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from archiver.replay.memento import (
    PageLink,
    http_date,
    json_timemap,
    link_header,
    link_timemap,
    parse_http_date,
)

ORIGINAL = "http://a.org/"
GATE = "http://arch/web/http://a.org/"
MAP = "http://arch/timemap/link/http://a.org/"
MEMENTOS = [
    (f"http://arch/web/{ts}/http://a.org/", ts)
    for ts in ("19961201000000", "20000620180259", "20261122031500")
]


@pytest.mark.parametrize(
    ("text", "timestamp"),
    [
        ("Sun, 06 Nov 1994 08:49:37 GMT", "19941106084937"),  # IMF-fixdate
        ("  Tue, 20 Jun 2000 18:02:59 GMT ", "20000620180259"),
        ("Sunday, 06-Nov-94 08:49:37 GMT", "19941106084937"),  # RFC 850
        ("Sun Nov  6 08:49:37 1994", "19941106084937"),  # asctime
        ("Thu Feb 29 00:00:00 2024", "20240229000000"),
    ],
)
def test_parse_http_date(text: str, timestamp: str) -> None:
    assert parse_http_date(text) == timestamp


def test_two_digit_years_are_read_within_fifty_years_of_now() -> None:
    now = datetime(2026, 11, 22, tzinfo=UTC)
    assert parse_http_date("Friday, 01-Jan-76 00:00:00 GMT", now) == "20760101000000"
    assert parse_http_date("Thursday, 01-Jan-77 00:00:00 GMT", now) == "19770101000000"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2026-11-22",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 31 Feb 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 25:49:37 GMT",
        "sun, 06 nov 1994 08:49:37 gmt",
        "Sun, 06 Nov 1994 08:49:37 GMT, extra",
    ],
)
def test_parse_http_date_refuses_other_text(text: str) -> None:
    with pytest.raises(ValueError, match="HTTP date"):
        parse_http_date(text)


def test_http_date_round_trips() -> None:
    assert http_date("19941106084937") == "Sun, 06 Nov 1994 08:49:37 GMT"
    for _, ts in MEMENTOS:
        assert parse_http_date(http_date(ts)) == ts


def test_link_header_for_a_memento_in_the_middle() -> None:
    value = link_header(original=ORIGINAL, timegate=GATE, timemap=MAP, first=MEMENTOS[0], last=MEMENTOS[2],
                        prev=MEMENTOS[0], current=MEMENTOS[1], next=MEMENTOS[2])
    entries = value.split(", <")
    assert entries[0] == f'<{ORIGINAL}>; rel="original"'
    assert entries[1] == f'{GATE}>; rel="timegate"'
    assert entries[2] == f'{MAP}>; rel="timemap"; type="application/link-format"'
    assert (
        entries[3] == f'{MEMENTOS[0][0]}>; rel="first prev memento"; datetime="Sun, 01 Dec 1996 00:00:00 GMT"'
    )
    assert entries[4] == f'{MEMENTOS[1][0]}>; rel="memento"; datetime="Tue, 20 Jun 2000 18:02:59 GMT"'
    assert (
        entries[5] == f'{MEMENTOS[2][0]}>; rel="last next memento"; datetime="Sun, 22 Nov 2026 03:15:00 GMT"'
    )
    assert len(entries) == 6


def test_link_header_for_an_only_memento_and_for_a_timegate() -> None:
    only = link_header(original=ORIGINAL, timegate=GATE, timemap=MAP, first=MEMENTOS[0], last=MEMENTOS[0],
                       current=MEMENTOS[0])
    assert only.endswith(
        f'<{MEMENTOS[0][0]}>; rel="first last memento"; datetime="Sun, 01 Dec 1996 00:00:00 GMT"'
    )
    gate = link_header(original=ORIGINAL, timegate=GATE, timemap=MAP, first=MEMENTOS[0], last=MEMENTOS[2])
    assert 'rel="first memento"' in gate and 'rel="last memento"' in gate
    assert "prev" not in gate and "next" not in gate


def test_link_header_names_neighbours_far_from_the_ends_without_the_others() -> None:
    many = [(f"http://arch/web/2020010100{n:04d}/http://a.org/", f"2020010100{n:04d}") for n in range(10)]
    value = link_header(original=ORIGINAL, timegate=GATE, timemap=MAP, first=many[0], last=many[9],
                        prev=many[4], current=many[5], next=many[6])
    rels = re.findall(r'rel="([^"]*)"', value)
    assert rels == ["original", "timegate", "timemap", "first memento", "prev memento", "memento",
                    "next memento", "last memento"]
    assert value.count("datetime=") == 5


def test_link_format_timemap() -> None:
    body = link_timemap(original=ORIGINAL, timegate=GATE, timemap=MAP, mementos=MEMENTOS)
    lines = body.splitlines()
    assert lines == [
        f'<{ORIGINAL}>; rel="original",',
        f'<{MAP}>; rel="self"; type="application/link-format"; from="Sun, 01 Dec 1996 00:00:00 GMT"; '
        'until="Sun, 22 Nov 2026 03:15:00 GMT",',
        f'<{GATE}>; rel="timegate",',
        f'<{MEMENTOS[0][0]}>; rel="first memento"; datetime="Sun, 01 Dec 1996 00:00:00 GMT",',
        f'<{MEMENTOS[1][0]}>; rel="memento"; datetime="Tue, 20 Jun 2000 18:02:59 GMT",',
        f'<{MEMENTOS[2][0]}>; rel="last memento"; datetime="Sun, 22 Nov 2026 03:15:00 GMT"',
    ]


PAGES = (
    PageLink("http://arch/timemap/link/19900101000000/http://a.org/", "19900101000000", "19961130000000"),
    PageLink("http://arch/timemap/link/20261122031501/http://a.org/", "20261122031501"),
)
PAGE_LINK = 'rel="timemap"; type="application/link-format"; from='



def test_a_link_format_timemap_page_links_the_pages_around_it() -> None:
    body = link_timemap(original=ORIGINAL, timegate=GATE, timemap=MAP, mementos=MEMENTOS, first=False,
                        last=False, pages=PAGES)
    lines = body.splitlines()
    assert lines[3:5] == [
        f'<{PAGES[0].uri}>; {PAGE_LINK}"Mon, 01 Jan 1990 00:00:00 GMT"; '
        'until="Sat, 30 Nov 1996 00:00:00 GMT",',
        f'<{PAGES[1].uri}>; {PAGE_LINK}"Sun, 22 Nov 2026 03:15:01 GMT",',
    ]
    assert [line.split('rel="')[1].split('"')[0] for line in lines[5:]] == ["memento"] * 3  # not the ends
    assert 'until="Sun, 22 Nov 2026 03:15:00 GMT"' in lines[1]


def test_a_json_timemap_page_names_its_prev_and_next_pages() -> None:
    body = json.loads(json_timemap(original=ORIGINAL, timegate=GATE, timemap=MAP, timemap_json=MAP + ".json",
                                   mementos=MEMENTOS, first=True, last=False, previous=None,
                                   following=PAGES[1]))
    assert body["pages"] == {"next": {"uri": PAGES[1].uri, "from": "2026-11-22T03:15:01Z"}}
    assert "first" in body["mementos"] and "last" not in body["mementos"]
    both = json.loads(json_timemap(original=ORIGINAL, timegate=GATE, timemap=MAP, timemap_json=MAP + ".json",
                                   mementos=MEMENTOS, first=False, last=False, previous=PAGES[0],
                                   following=PAGES[1]))
    assert both["pages"]["prev"] == {"uri": PAGES[0].uri, "from": "1990-01-01T00:00:00Z",
                                     "until": "1996-11-30T00:00:00Z"}
    assert set(both["mementos"]) == {"list"}


def test_json_timemap() -> None:
    body = json.loads(
        json_timemap(
            original=ORIGINAL, timegate=GATE, timemap=MAP, timemap_json=MAP + ".json", mementos=MEMENTOS
        )
    )
    assert body["original_uri"] == ORIGINAL and body["timegate_uri"] == GATE
    assert body["timemap_uri"] == {"link_format": MAP, "json_format": MAP + ".json"}
    listed = body["mementos"]["list"]
    assert [m["uri"] for m in listed] == [uri for uri, _ in MEMENTOS]
    assert listed[1]["datetime"] == "2000-06-20T18:02:59Z"
    assert body["mementos"]["first"] == listed[0] and body["mementos"]["last"] == listed[-1]
