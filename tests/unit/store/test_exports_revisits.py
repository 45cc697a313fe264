"""What ``archiver export`` writes for revisits: a server-not-modified revisit becomes a whole
``response`` record (``whole_response``) that warcio reads with its digests verified, and the
pages list is the slice's own page captures. The replay of both by pywb and by another archive is
tested in tests/integration/store/test_exports_pywb.py."""

from __future__ import annotations

import base64
import hashlib
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from archiver.store.exports import (
    CONVERTED_FROM,
    ORIGINAL_FIELDS,
    ExportError,
    Planned,
    pages_list,
    whole_response,
)
from archiver.store.models import Capture
from tests.support.fuzzing import examples

ORIGINAL_ID = "<urn:uuid:00000000-0000-4000-8000-000000000001>"
REVISIT = (("WARC-Record-ID", "<urn:uuid:00000000-0000-4000-8000-000000000002>"),
           ("WARC-Date", "2024-05-06T07:08:09.123456Z"),
           ("WARC-Target-URI", "http://example.org/page"))


def _sha1(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def _original(head: bytes, payload: bytes) -> bytes:
    """A response record's gzip member holding the block ``head + payload`` as it stands."""
    block = head + payload
    fields = [("WARC-Type", "response"), ("WARC-Record-ID", ORIGINAL_ID),
              ("WARC-Date", "2024-01-02T03:04:05Z"), ("WARC-Target-URI", "http://example.org/page"),
              ("WARC-Payload-Digest", _sha1(payload))]
    record = ArcWarcRecord("warc", "response", StatusAndHeaders("", fields, protocol="WARC/1.1"),
                           io.BytesIO(block), None, "application/http;msgtype=response", len(block))
    out = io.BytesIO()
    WARCWriter(out, gzip=True, warc_version="WARC/1.1").write_record(record)
    return out.getvalue()


_LINE = st.sampled_from([b"\r\n", b"\n"])
_FIELD = st.tuples(st.from_regex(rb"\A[A-Za-z][A-Za-z0-9-]{0,15}\Z"),
                   st.binary(max_size=40).map(lambda v: v.replace(b"\r", b"").replace(b"\n", b"")))


@st.composite
def _heads(draw: st.DrawFn) -> bytes:
    """An HTTP response head as a server may send it: CRLF or bare LF lines, any field bytes."""
    end = draw(_LINE)
    status = b"HTTP/1.1 %d" % draw(st.integers(100, 599)) + draw(st.sampled_from([b" OK", b" ", b""]))
    fields = [name + b":" + value for name, value in draw(st.lists(_FIELD, max_size=6))]
    return end.join([status, *fields, b""]) + end


@settings(max_examples=examples(150), deadline=None)
@given(head=_heads(), payload=st.binary(max_size=3000), ip=st.booleans())
def test_a_revisit_written_whole_is_its_original_block_at_the_revisit(head: bytes, payload: bytes,
                                                                      ip: bool):
    revisit = REVISIT + ((("WARC-IP-Address", "192.0.2.7"),) if ip else ())
    made = whole_response(_original(head, payload), revisit)
    block = next(iter(ArchiveIterator(io.BytesIO(made), no_record_parse=True))).raw_stream.read()
    assert block == head + payload  # byte for byte
    records = list(ArchiveIterator(io.BytesIO(made), check_digests="raise"))  # both digests
    assert len(records) == 1  # one gzip member, one record
    record = records[0]
    fields = dict(record.rec_headers.headers)
    assert record.rec_type == "response"
    assert fields["WARC-Record-ID"] not in (ORIGINAL_ID, REVISIT[0][1])
    assert {name: fields.get(name) for name, _ in revisit} == {
        **dict(revisit), "WARC-Record-ID": fields["WARC-Record-ID"]}
    assert fields.get("WARC-IP-Address") == ("192.0.2.7" if ip else None)
    assert fields["WARC-Payload-Digest"] == _sha1(payload)
    assert fields["WARC-Block-Digest"] == _sha1(head + payload)
    assert fields[CONVERTED_FROM] == REVISIT[0][1]
    assert [fields[name] for name in ORIGINAL_FIELDS] == [
        ORIGINAL_ID, "http://example.org/page", "2024-01-02T03:04:05Z"]
    assert not [name for name in fields if name.startswith("WARC-Refers-To")]


@pytest.mark.parametrize("original", [b"", b"not a WARC record", _original(b"", b"")[:30]])
def test_an_unreadable_original_is_an_export_error(original: bytes):
    with pytest.raises(ExportError, match="original response of a revisit is unreadable"):
        whole_response(original, REVISIT)


def _capture(url: str, timestamp: str, status: int, mime: str, rectype: str = "response") -> Capture:
    return Capture(urlkey=url, timestamp=timestamp, url=url, status=status, mime=mime,
                   digest="sha1:X", redirect=None, filename="a.warc.gz", offset=0, length=1,
                   rectype=rectype)


def test_the_pages_list_is_the_slices_own_html_pages_at_their_dates():
    page = _capture("http://e.org/", "20240101000000", 200, "text/html")
    style = _capture("http://e.org/s.css", "20240101000000", 200, "text/css")
    revisit = "warc/revisit"
    records = [
        Planned(page, carried=True),  # an original from before the slice: not a page of it
        Planned(style, carried=True),
        Planned(_capture("http://e.org/", "20240202000000", 304, revisit, "revisit"), page,
                (("WARC-Record-ID", "<urn:uuid:1>"),)),
        Planned(_capture("http://e.org/", "20240303000000", 200, revisit, "revisit"), page),
        Planned(_capture("http://e.org/s.css", "20240202000000", 200, revisit, "revisit"), style),
        Planned(_capture("http://e.org/gone", "20240202000000", 404, "text/html")),
        Planned(_capture("http://e.org/new", "20240202000001", 200, "application/xhtml+xml")),
    ]
    lines = [json.loads(line) for line in pages_list(records).splitlines()]
    assert lines[0]["format"] == "json-pages-1.0"
    assert [(p["url"], p["ts"]) for p in lines[1:]] == [
        ("http://e.org/", "2024-02-02T00:00:00Z"), ("http://e.org/", "2024-03-03T00:00:00Z"),
        ("http://e.org/new", "2024-02-02T00:00:01Z")]
