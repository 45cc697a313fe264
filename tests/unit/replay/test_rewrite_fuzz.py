"""Fuzz tests for archiver.replay.rewrite: any archived body rewrites, any /web/ path parses.

rewrite_html, rewrite_css, parse_head, media_type and replay_headers never raise: an archived
response is served whatever it holds. The rewritten body is bounded by the original's size (a
constant factor plus a fixed allowance), so no page can make the server build a huge answer.
parse_web_path, requested_url and pad_timestamp raise only ValueError (a 400 for the user).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.replay.rewrite import (
    MODIFIERS,
    WebTarget,
    pad_timestamp,
    parse_head,
    parse_web_path,
    refresher,
    replay_headers,
    rewrite_css,
    rewrite_html,
)
from archiver.web.http import media_type
from tests.support.fuzzing import (
    CHARSETS,
    assert_cost_bounded,
    corpus,
    css_texts,
    encoded,
    examples,
    html_documents,
    repeat_to,
)

URL = "http://example.org/dir/page.html"
TS = "20261122031500"
BANNER = "<div id=banner>archive</div>"
# Per byte a link can grow at most about 30 times (a one-byte path under a long host name); links
# relative to the base's path share an allowance of 2 MiB plus 4 per character (rewrite._Links).
_GROWTH = 32 + 4
_ALLOWANCE = 2 * 2**20


def _check_size(out: bytes, body: bytes) -> None:
    assert isinstance(out, bytes)
    assert len(out) <= _GROWTH * len(body) + _ALLOWANCE + len(BANNER)


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=3000), CHARSETS, st.sampled_from([None, BANNER]))
def test_any_bytes_rewrite_as_html(body: bytes, charset: str | None, banner: str | None) -> None:
    out = rewrite_html(body, url=URL, timestamp=TS, prefix="/archive", charset=charset, banner=banner)
    _check_size(out, body)


@settings(max_examples=examples(50), deadline=None)
@given(encoded(html_documents()), CHARSETS, st.sampled_from([URL, "https://[::1]:8443/a?b", "http://x/"]))
def test_near_valid_html_rewrites(body: bytes, charset: str | None, url: str) -> None:
    out = rewrite_html(body, url=url, timestamp=TS, prefix="", charset=charset, banner=BANNER)
    _check_size(out, body)


@settings(max_examples=examples(150), deadline=None)
@given(encoded(css_texts()) | st.binary(max_size=500), CHARSETS)
def test_any_stylesheet_rewrites(body: bytes, charset: str | None) -> None:
    _check_size(rewrite_css(body, url=URL, timestamp=TS, prefix="", charset=charset), body)


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=500), st.binary(max_size=40))
def test_any_archived_head_gives_servable_headers(head: bytes, refresh: bytes) -> None:
    status, headers = parse_head(head + b"\r\nRefresh: 0; url=" + refresh)
    assert status is None or 100 <= status <= 999
    content_type = next((v for k, v in headers if k.lower() == "content-type"), None)
    mime, charset = media_type(content_type)
    assert mime == mime.strip().lower() and (charset is None or charset != "")
    served = replay_headers(
        headers, rewritten=True, location=None, refresh=refresher(URL, TS, "")
    )
    for name, value in served:
        # What the server sends must be a valid header: h11 refuses the rest.
        name.encode("ascii")
        value.encode("latin-1")
        assert not any(c in value for c in "\r\n\x00")


_PATHS = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda stamp, mod, url: f"{stamp}{mod}/{url}",
        st.text("0123456789*", max_size=16) | st.sampled_from(["\u0662\u0660\u0662\u0666", "\uff12", ""]),
        st.sampled_from([*sorted(MODIFIERS), "*", "zz_", "ID_"]),
        st.sampled_from(["http://example.org/", "example.org", "", "*", "http:/x", "mailto:a@b", "http://a:99999"])
        | st.text(max_size=20),
    ),
)


@settings(max_examples=examples(300), deadline=None)
@given(_PATHS)
def test_any_web_path_parses_or_raises_value_error(rest: str) -> None:
    try:
        target = parse_web_path(rest)
    except ValueError as exc:
        assert str(exc)
        return
    assert isinstance(target, WebTarget)
    assert target.url.startswith(("http://", "https://")) and target.url.isascii()
    if target.timestamp is not None:
        assert len(target.timestamp) == 14 and target.timestamp.isdigit()


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=20))
def test_pad_timestamp_pads_or_raises_value_error(digits: str) -> None:
    try:
        padded = pad_timestamp(digits)
    except ValueError:
        return
    assert len(padded) == 14 and padded.startswith(digits[:4])


# --- bounded size and time ---------------------------------------------------------------------

# Smaller than extraction's cases: the rewriter is a Python tokenizer, about 5 MB/s.
MIB = 2**18


def _rewrite(body: bytes) -> bytes:
    return rewrite_html(body, url=URL, timestamp=TS, prefix="/archive", banner=BANNER)


def _long_base(count: int) -> bytes:
    return b'<base href="http://example.org/' + b"d/" * 10_000 + b'">' + b"<a href=x>x</a>" * count


def test_links_under_a_long_base_do_not_multiply_the_page() -> None:
    body = _long_base(5000)
    _check_size(_rewrite(body), body)


def test_the_longest_growth_per_byte_stays_under_the_bound() -> None:
    """A one-byte root-relative link under a 253-character host name grows the most per byte."""
    host = ".".join(["a" * 63] * 4)[:253]
    body = b"<a href=/>" * 10_000
    out = rewrite_html(body, url=f"http://{host}/", timestamp=TS, prefix="", banner=None)
    assert 20 * len(body) < len(out)  # the case is as bad as the bound says...
    _check_size(out, body)  # ...and no worse


_BENIGN_UNIT = (
    b'<div class="story"><h2><a href="/news/item.html">A headline</a></h2>\n'
    b"<p>Some words of the story, then more of them &amp; an entity, <b>bold</b> and <i>slanted</i>.</p>\n"
    b'<img src="/img/photo.jpg" alt="a photo" srcset="/img/photo-2x.jpg 2x"></div>\n'
)

_PATHOLOGICAL = {
    "256 KiB entity name in a link": b'<a href="&' + b"a" * MIB + b'">x</a>',
    "256 KiB entity name, unquoted": b"<a href=&" + b"a" * MIB + b">x</a>",
    "256 KiB of entities": b'<a href="' + b"&amp" * (MIB // 4) + b'">x</a>',
    "256 KiB href": b'<a href="' + b"a" * MIB + b'">x</a>',
    "256 KiB of invalid UTF-8 in an href": b'<a href="' + b"\xff" * MIB + b'">x</a>',
    "256 KiB srcset": b'<img srcset="' + b"a 1x, " * (MIB // 6) + b'">',
    "256 KiB style": b'<div style="' + b"background:url(x.png);" * (MIB // 22) + b'">x</div>',
    "256 KiB unclosed style element": b"<style>" + b"url(" * (MIB // 4),
    "256 KiB unclosed comment": b"<!--" + b"<a href=x>" * (MIB // 10),
    "256 KiB unclosed attribute": b'<a href="' + b"<a href=x>" * (MIB // 10),
    "256 KiB of tag openings": b"<a" * (MIB // 2),
    "256 KiB of attributes": b"<a " + b"x=y " * (MIB // 4) + b">",
    "256 KiB of quotes in a tag": b"<a " + b"'\"" * (MIB // 2) + b">",
    "256 KiB meta refresh": b'<meta http-equiv=refresh content="0; url=' + b"a" * MIB + b'">',
    "10^4 links": b"".join(b'<a href="/p/%d.html">%d</a>\n' % (i, i) for i in range(10_000)),
    "3 x 10^4 nested elements": b"<div>" * 30_000 + b"<a href=x>" + b"</div>" * 30_000,
    "3 x 10^4 raw text elements": b"<script>x</script>" * 30_000,
    "3 x 10^4 unclosed raw text elements": b"<title>" * 30_000,
    "10^4 links under a long base": _long_base(10_000),
}


@pytest.mark.parametrize("name", _PATHOLOGICAL)
def test_pathological_pages_cost_what_a_benign_page_of_their_size_does(name: str) -> None:
    body = _PATHOLOGICAL[name]
    _check_size(_rewrite(body), body)
    assert_cost_bounded(_rewrite, body, repeat_to(_BENIGN_UNIT, len(body)), factor=10, label=name)


# --- corpus ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", corpus("rewrite"), ids=lambda p: p.name)
def test_corpus(path: Path) -> None:
    body = path.read_bytes()
    _check_size(_rewrite(body), body)
    _check_size(rewrite_css(body, url=URL, timestamp=TS, prefix=""), body)
    assert_cost_bounded(_rewrite, body, repeat_to(_BENIGN_UNIT, len(body)), factor=10, label=path.name)
