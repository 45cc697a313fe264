"""archiver.web.pagelinks: what a response links to, and when its body is small enough to read on
the crawler's event loop."""

from __future__ import annotations

import gzip
import zlib

import brotli
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.http import MAX_CODINGS, decode_body
from archiver.web.pagelinks import decoded_within, links_if_small, links_in_response

PAGE = b"<html><body><a href='/a'>a</a><a href='http://b.example/'>b</a></body></html>"
HTML = {"content-type": "text/html"}
URL = "http://a.example/"

_CODERS = {"gzip": lambda data: gzip.compress(data, mtime=0), "deflate": zlib.compress,
           "br": brotli.compress}


def _encode(data: bytes, codings: list[str]) -> bytes:
    for coding in codings:
        data = _CODERS[coding](data)
    return data


def test_too_many_codings_are_not_read():
    codings = ["gzip"] * (MAX_CODINGS + 1)
    headers = {**HTML, "content-encoding": ", ".join(codings)}
    body = _encode(PAGE, codings)
    for found in (links_in_response(URL, 200, headers, body, max_decoded_size=2**20),
                  links_if_small(URL, 200, headers, body, bound=2**20)):
        assert found is not None and found.refs == [] and not found.read
    headers["content-encoding"] = ", ".join(codings[1:])  # at the cap: read
    found = links_in_response(URL, 200, headers, _encode(PAGE, codings[1:]), max_decoded_size=2**20)
    assert found.refs == ["/a", "http://b.example/"]


def test_a_small_body_is_read_a_large_one_left_to_the_caller():
    page = PAGE + b"<p>and some text</p>" * 100
    body = gzip.compress(page)
    headers = {**HTML, "content-encoding": "gzip"}
    assert links_if_small(URL, 200, headers, body, bound=len(page)) == links_in_response(
        URL, 200, headers, body, max_decoded_size=2**20)
    assert links_if_small(URL, 200, headers, body, bound=len(page) - 1) is None
    bomb = gzip.compress(b"<p>" * 10**6)  # 3 MB from 3 KB: found out after decoding 64 KiB
    assert links_if_small(URL, 200, headers, bomb, bound=64 * 1024) is None
    # Nothing to read (an image, an error, a redirect): no size rule.
    assert links_if_small(URL, 200, {"content-type": "image/png"}, b"x" * 10**6, bound=10) is not None
    redirect = links_if_small(URL, 301, {"location": "/b"}, b"x" * 10**6, bound=10)
    assert redirect is not None and redirect.refs == ["/b"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.sampled_from(sorted(_CODERS)), max_size=3),
       st.integers(0, 4000), st.booleans())
def test_decoded_within_is_decode_body_or_none(data, codings, bound, broken):
    """Whatever the body and its codings: the decoded body when it fits in ``bound``, None when
    it does not (or the body is longer than the bound, or has several codings)."""
    body = _encode(data, codings)
    if broken:
        body = body[: len(body) // 2]
    encoding = ", ".join(codings)
    got = decoded_within(body, encoding, bound)
    whole = decode_body(body, encoding, 2**20)
    if got is None:
        assert len(body) > bound or len(codings) > 1 or len(whole) > bound
    else:
        assert got == whole and len(got) <= bound
        assert len(codings) <= 1 and len(body) <= bound
