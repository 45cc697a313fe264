"""Conditional requests: the validators of a capture's HTTP head become If-None-Match and
If-Modified-Since, and nothing a server wrote can make the request unsendable."""

from __future__ import annotations

import email.utils
from datetime import timedelta, timezone

import h11
from hypothesis import given
from hypothesis import strategies as st

from archiver.web.http import conditions


def head(*lines: str, status: str = "200 OK") -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", *lines]) + "\r\n\r\n").encode("latin-1")


def test_etag_and_last_modified_become_the_two_conditions():
    got = conditions(head('ETag: "v1-abc"', "Last-Modified: Wed, 21 Oct 2015 07:28:00 GMT"))
    assert got == [("If-None-Match", '"v1-abc"'),
                   ("If-Modified-Since", "Wed, 21 Oct 2015 07:28:00 GMT")]


def test_a_weak_tag_is_kept_and_a_date_in_another_zone_is_written_in_gmt():
    got = conditions(head('etag: W/"7"', "last-modified: Wed, 21 Oct 2015 09:28:00 +0200"))
    assert got == [("If-None-Match", 'W/"7"'),
                   ("If-Modified-Since", "Wed, 21 Oct 2015 07:28:00 GMT")]


def test_only_the_first_of_repeated_validators_counts():
    assert conditions(head('ETag: "a"', 'ETag: "b"')) == [("If-None-Match", '"a"')]


def test_no_conditions_for_other_statuses_or_malformed_validators():
    assert conditions(head('ETag: "a"', status="404 Not Found")) == []
    assert conditions(head("ETag: unquoted", "Last-Modified: yesterday")) == []
    assert conditions(head('ETag: "has space"', "Last-Modified: Wed, 21 Oct 2015 07:28:00")) == []
    assert conditions(b"") == [] and conditions(b"garbage") == []


@given(st.binary(max_size=400))
def test_any_head_gives_headers_h11_sends(data):
    sent = conditions(b"HTTP/1.1 200 OK\r\n" + data)
    assert {name for name, _ in sent} <= {"If-None-Match", "If-Modified-Since"}
    h11.Request(method="GET", target="/", headers=[("Host", "a.test"), *sent])  # never refused


@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters='"'),
               max_size=50), st.booleans(),
       st.datetimes(timezones=st.integers(-23 * 60, 23 * 60).map(
           lambda minutes: timezone(timedelta(minutes=minutes)))))
def test_well_formed_validators_come_back_unchanged(tag, weak, when):
    etag = ("W/" if weak else "") + f'"{tag}"'
    modified = email.utils.format_datetime(when.replace(microsecond=0))
    got = dict(conditions(head(f"ETag: {etag}", f"Last-Modified: {modified}")))
    assert got["If-None-Match"] == etag
    if 1970 <= when.year <= 9998:
        parsed = email.utils.parsedate_to_datetime(got["If-Modified-Since"])
        assert parsed == when.replace(microsecond=0)
