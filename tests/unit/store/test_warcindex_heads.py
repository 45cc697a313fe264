"""A record's HTTP head read from its first bytes alone (``warcindex.http_head_of``): the head
the writer was given, or None while the prefix is too short; never an error, whatever the bytes."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.config import WarcConfig
from archiver.store.bundles import BundleWriter
from archiver.store.warcindex import HEAD_BYTES, http_head_of, read_head
from archiver.web.http import content_length
from tests.support.fuzzing import examples
from tests.support.warcexchanges import DATE, GET

header = st.tuples(st.sampled_from(["ETag", "Last-Modified", "Content-Type", "X-Any"]),
                   st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=60))


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(header, max_size=8), st.binary(max_size=3000), st.integers(0, 3))
def test_a_prefix_gives_the_head_written_or_nothing(headers, body, level):
    head = ("HTTP/1.1 200 OK\r\n" + "".join(f"{n}: {v}\r\n" for n, v in headers) + "\r\n").encode()
    with tempfile.TemporaryDirectory() as folder:
        writer = BundleWriter(Path(folder), WarcConfig(gzip_level=level))
        written = writer.write_exchange(url="http://example.org/", ip=None, date=DATE,
                                        request=GET, response_head=head, response_body=body)
        writer.close()
        at = written.response
        data = (Path(folder) / at.filename).read_bytes()[at.offset:at.offset + at.length]
        assert read_head(Path(folder), at.filename, at.offset, at.length) == head
    assert http_head_of(data) == head
    for cut in range(0, len(data), max(1, len(data) // 25)):
        assert http_head_of(data[:cut]) in (None, head)


@given(st.binary(max_size=2000))
def test_any_bytes_give_a_head_or_none(data):
    found = http_head_of(data)
    assert found is None or found.endswith(b"\r\n\r\n")


def test_a_head_longer_than_the_prefix_read_is_read_with_the_whole_record(tmp_path):
    big = "X-Big: " + "y" * (2 * HEAD_BYTES)
    head = f"HTTP/1.1 200 OK\r\n{big}\r\nETag: \"e\"\r\n\r\n".encode()
    writer = BundleWriter(tmp_path, WarcConfig(gzip_level=0))  # stored, not squeezed
    at = writer.write_exchange(url="http://example.org/", ip=None, date=DATE, request=GET,
                               response_head=head, response_body=b"body").response
    writer.close()
    prefix = (tmp_path / at.filename).read_bytes()[at.offset:at.offset + HEAD_BYTES]
    assert http_head_of(prefix) is None
    assert read_head(tmp_path, at.filename, at.offset, at.length) == head


def test_content_length_of_a_head():
    assert content_length(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n") == 1234
    assert content_length(b"HTTP/1.1 200 OK\r\ncontent-length:  7 \r\n\r\n") == 7
    assert content_length(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n") is None
    assert content_length(b"HTTP/1.1 200 OK\r\n\r\n") is None and content_length(b"") is None
