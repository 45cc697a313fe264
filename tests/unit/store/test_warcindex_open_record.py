"""A record opened for reading (``warcindex.OpenRecord``): its payload read in pieces of any size
and past any place is the payload written, whatever the body and gzip level; a record cut short
is an error naming it, never a short answer taken for the whole."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.config import WarcConfig
from archiver.store.bundles import BundleWriter
from archiver.store.warcindex import OpenRecord, WarcError, open_record, read_record
from tests.support.fuzzing import examples
from tests.support.warcexchanges import DATE, GET

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\n\r\n"


def written(folder: Path, body: bytes, level: int = 6) -> tuple[str, int, int]:
    writer = BundleWriter(folder, WarcConfig(gzip_level=level))
    at = writer.write_exchange(url="http://example.org/v.mp4", ip=None, date=DATE, request=GET,
                               response_head=HEAD, response_body=body).response
    writer.close()
    return at.filename, at.offset, at.length


@settings(max_examples=examples(60), deadline=None)
@given(st.binary(max_size=20_000), st.integers(0, 9), st.integers(0, 25_000),
       st.lists(st.integers(1, 9000), min_size=1, max_size=8))
def test_pieces_past_any_place_are_the_payload(body, level, skipped, pieces):
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        filename, offset, length = written(folder, body, level)
        stored = read_record(folder, filename, offset, length)
        with open_record(folder, filename, offset, length) as opened:
            assert (opened.url, opened.rectype, opened.http_head, opened.warc_headers) == (
                stored.url, stored.rectype, stored.http_head, stored.warc_headers)
            assert opened.size == len(body)
            opened.skip(skipped)
            read = b""
            while piece := opened.read(pieces[len(read) % len(pieces)]):
                read += piece
    assert read == body[skipped:]


def test_a_record_cut_short_is_an_error(tmp_path):
    body = bytes(range(256)) * 400
    filename, offset, length = written(tmp_path, body, level=0)
    data = (tmp_path / filename).read_bytes()[offset:offset + length]
    with pytest.raises(WarcError, match="no complete record at offset 7"):
        OpenRecord(io.BytesIO(data[:40]), "cut.warc.gz", 7)
    opened = OpenRecord(io.BytesIO(data[: len(data) // 2]), "cut.warc.gz", 7)
    with pytest.raises(WarcError, match=r"cut.warc.gz: the record at offset 7 is (cut short|damaged)"):
        while opened.read(4096):
            pass
    opened.close()


def test_what_is_no_warc_record_is_an_error():
    """warcio reads some bytes (an ARC header line, or garbage from the middle of a gzip member)
    as an ARC record: no record of a WARC bundle, which replay must not serve."""
    arc = b"http://example.org/ 127.0.0.1 20260101000000 text/html 5\nhello"
    with pytest.raises(WarcError, match="no WARC record starts there"):
        OpenRecord(io.BytesIO(arc), "odd.warc.gz", 0)
