"""Tests for archiver.crawl.http that need no server: unusable URLs and addresses, body decoding."""

from __future__ import annotations

import gzip
import hashlib
import zlib

import brotli
import pytest

from archiver.web.http import decode_body
from tests.support.httpclient import client

LOCAL = "127.0.0.1"


async def test_unusable_url_or_address() -> None:
    http = client()
    assert (await http.fetch("ftp://example.org/", LOCAL)).error == "url: unsupported scheme 'ftp'"
    # Nothing but printable ASCII goes on the wire: before issue 11, h11 raised on these.
    for url in ["http://example.org/a b", "http://example.org/é", "http://exämple.org/",
                "http://example.org/\x01", "http://example.org/\t"]:
        assert (await http.fetch(url, LOCAL)).error == "url: not an ASCII URI", url
    for url, error in [("http://example.org:0/", "url: port 0"),
                       ("http://example.org:65536/", "url: Port out of range 0-65535"),
                       ("http://example.org:x/", "url: Port could not be cast to integer value as 'x'"),
                       ("http://[::1/", "url: Invalid IPv6 URL"),
                       ("http:///x", "url: no host"),
                       ("http://a<b>/", "url: bad host 'a<b>'")]:
        assert (await http.fetch(url, LOCAL)).error == error, url
    not_ip = await http.fetch("http://example.org/", "example.org")
    assert not_ip.error == "connect: not an IP address: 'example.org'"
    bad_header = client(extra_headers=[("X-Note", "café")])
    assert (await bad_header.fetch("http://example.org/", LOCAL)).error.startswith("request: ")


PAGE = b"<p>decoded</p>" * 500


@pytest.mark.parametrize(
    ("encoded", "coding"),
    [
        (gzip.compress(PAGE), "gzip"),
        (gzip.compress(PAGE), "X-Gzip"),
        (zlib.compress(PAGE), "deflate"),
        (zlib.compress(PAGE)[2:-4], "deflate"),  # raw deflate, as some servers send it
        (brotli.compress(PAGE), "br"),
        (gzip.compress(PAGE[:3000]) + gzip.compress(PAGE[3000:]), "gzip"),  # two members
        (brotli.compress(gzip.compress(PAGE)), "gzip, br"),
        (PAGE, "identity"),
        (PAGE, None),
    ],
)
def test_decode_body(encoded: bytes, coding: str | None) -> None:
    assert decode_body(encoded, coding, 10**6) == PAGE
    assert decode_body(encoded, coding, 100) == PAGE[:100]


def test_decode_body_brotli_bomb_is_limited() -> None:
    bomb = brotli.compress(bytes(32 * 2**20), quality=1)
    assert decode_body(bomb, "br", 2**20) == bytes(2**20)


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "compress", "zstd"])
def test_decode_body_undecodable_returns_input(coding: str) -> None:
    assert decode_body(b"not compressed at all", coding, 100) == b"not compressed at all"


def test_decode_body_damaged_stream_returns_what_was_decoded() -> None:
    text = b"".join(hashlib.sha256(b"%d" % i).hexdigest().encode() for i in range(5000))
    packed = gzip.compress(text)
    cut = decode_body(packed[: len(packed) // 2], "gzip", 10**6)
    assert len(text) // 3 < len(cut) < len(text) and text.startswith(cut)
    damaged = packed[: len(packed) // 2] + b"\xff" * 200 + packed[len(packed) // 2 + 200 :]
    # Deflate may turn damage into garbage for a while before it notices: only the part
    # before the damage is sure to be right.
    decoded = decode_body(damaged, "gzip", 10**6)
    assert len(decoded) < len(text) and decoded[: len(text) // 3] == text[: len(text) // 3]
    squeezed = brotli.compress(text)
    partial = decode_body(squeezed[: len(squeezed) // 2], "br", 10**6)
    assert len(text) // 10 < len(partial) < len(text) and text.startswith(partial)
