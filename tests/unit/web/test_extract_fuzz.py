"""Fuzz tests for archiver.web.extract: any bytes give links, never an exception, in linear time.

extract_html, extract_css and decode_text have no error to raise: whatever a server sends is a
document. Every link they report is a non-empty string without the C0 controls and spaces the URL
parser would strip, and none is a fragment or a scheme that is never fetched.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.extract import (
    _PART_FORMATTING,
    _PART_TAGS,
    HtmlLinks,
    Link,
    _links_of,
    css_urls,
    decode_text,
    extract_css,
    extract_html,
    html_urls,
    linear_parts,
)
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

_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_NEVER_FETCHED = re.compile(r"#|(?:mailto|javascript|data|tel|about):", re.I)
_KINDS = re.compile(r"[a-z-]+/[a-z]+")


def _check_link(url: str | None) -> None:
    assert isinstance(url, str) and url
    assert url == url.strip(_C0_AND_SPACE)
    assert not _NEVER_FETCHED.match(url.replace("\t", "").replace("\n", "").replace("\r", ""))


def _check_html(found: HtmlLinks) -> None:
    assert isinstance(found, HtmlLinks)
    if found.base is not None:
        _check_link(found.base)
    for link in found.links:
        assert isinstance(link, Link) and _KINDS.fullmatch(link.kind)
        _check_link(link.url)


# A formatting element's start tag with an attribute (those without are bounded by the parser).
_FORMATTING_START = re.compile(
    rb"<(?i:b|big|code|em|font|i|nobr|s|small|strike|strong|tt|u)[\t\n\f\r /]+[^\t\n\f\r />]"
)


def page(paragraphs: int, seed: int) -> bytes:
    """An ordinary page: head resources, inline script and style, comments, text, links, images."""
    rng = random.Random(seed)
    words = ["the", "archive", "<b>keeps</b>", "every", "<em>page</em>", "<code>a&lt;b</code>", "that"]
    parts = [
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>News &amp; more</title>',
        '<link rel="stylesheet" href="/css/main.css"><script>var t = "<a href=\'/no\'>x</a>";',
        "if (a < b && c > d) {}</script><style>body{background:url(/img/bg.png)}</style></head><body>",
    ]
    for i in range(paragraphs):
        parts.append(" ".join(rng.choice(words) for _ in range(rng.randrange(5, 60))))
        parts.append(rng.choice([
            f'<p>more <a href="/news/{i}.html" title="a > b">item {i}</a></p>',
            f'<img src="/img/{i}.jpg" srcset="/img/{i}-2x.jpg 2x" alt="">',
            f"<!-- <a href='/old/{i}'> --><div><span>nested <i>{i}</i></span></div>",
            f'<script src="/js/{i}.js"></script><script>document.write("<img src=x{i}>")</script>',
            f'<ul><li><a href="/list/{i}">{i}</a><li>two</ul>',
            f'<div style="background:url(/bg/{i}.png)">x</div>',
        ]))  # fmt: skip
    parts.append('<footer><a href="mailto:a@b.c">mail</a><a href="/about">about</a></footer></body></html>')
    return "\n".join(parts).encode()


def _check_css(links: list[Link]) -> None:
    for link in links:
        assert link.kind in ("css/url", "css/import")
        _check_link(link.url)


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=3000), CHARSETS)
def test_any_bytes_are_an_html_page(body: bytes, charset: str | None) -> None:
    _check_html(extract_html(body, charset))


@settings(max_examples=examples(60), deadline=None)
@given(encoded(html_documents()), CHARSETS)
def test_near_valid_html_gives_valid_links(body: bytes, charset: str | None) -> None:
    _check_html(extract_html(body, charset))


@settings(max_examples=examples(30), deadline=None)
@given(html_documents(), st.integers(1, 300))
def test_a_long_page_is_parsed_in_bounded_parts(unit: str, copies: int) -> None:
    """Parts cover the page exactly, each starts at a "<", and none holds more than twice a part's
    worth of tags (one part, plus at most one comment or raw-text element moved into it); a part
    that starts inside a comment or raw-text element reopens it."""
    doc = (unit * copies).encode()
    parts = linear_parts(doc)
    assert b"".join(part for _, part in parts) == doc
    assert all(part.startswith(b"<") for _, part in parts[1:])
    for prefix, part in parts:
        assert prefix in (b"", b"<!--") or re.fullmatch(rb"<[a-z]+>", prefix)
        assert part.count(b"<") <= 2 * _PART_TAGS + 1
        assert len(_FORMATTING_START.findall(part)) <= 2 * _PART_FORMATTING


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(1, 400), st.integers(0, 2**32))
def test_parts_find_the_links_of_a_whole_parse(paragraphs: int, seed: int) -> None:
    """On ordinary pages (scripts and comments included) parts change nothing."""
    body = page(paragraphs, seed)
    assert extract_html(body) == HtmlLinks(*_links_of([body], Link))


@settings(max_examples=examples(100), deadline=None)
@given(encoded(html_documents()) | st.binary(max_size=2000), CHARSETS)
def test_html_urls_are_the_links_urls(body: bytes, charset: str | None) -> None:
    """The strings-only form (for very long pages) finds what extract_html does."""
    found = extract_html(body, charset)
    assert html_urls(body, charset) == (found.base, [link.url for link in found.links])


@settings(max_examples=examples(100), deadline=None)
@given(css_texts())
def test_css_urls_are_the_links_urls(text: str) -> None:
    assert css_urls(text) == [link.url for link in extract_css(text)]


@settings(max_examples=examples(200), deadline=None)
@given(css_texts())
def test_any_stylesheet_gives_valid_links(text: str) -> None:
    _check_css(extract_css(text))


@settings(max_examples=examples(150), deadline=None)
@given(encoded(css_texts()) | st.binary(max_size=500), CHARSETS)
def test_any_stylesheet_bytes_decode(body: bytes, charset: str | None) -> None:
    text = decode_text(body, charset)
    assert isinstance(text, str)
    _check_css(extract_css(text))


_PLAIN_URL = st.text("abcxyz0189./-_?=&%~", min_size=1, max_size=20).filter(lambda u: u[0] not in "#")


@settings(max_examples=examples(200), deadline=None)
@given(_PLAIN_URL, st.sampled_from(["", " ", "\t", "\n "]))
def test_every_spelling_of_a_css_reference_gives_the_same_url(url: str, space: str) -> None:
    escaped = "".join(f"\\{ord(c):x} " if c in "-_" else c for c in url)
    spellings = [
        f"url({space}{url}{space})",
        f'url({space}"{url}"{space})',
        f"url('{url}')",
        f"URL({escaped})",
        f"@import '{url}';",
        f'@import url("{url}");',
    ]
    for css in spellings:
        assert [link.url for link in extract_css("a{}" + css)] == [url], css
    assert extract_css(f"/* url({url}) */ '{url}' \"url({url})\" x-url({url})") == []


# --- bounded time ------------------------------------------------------------------------------

_BENIGN_UNIT = (
    b'<div class="story"><h2><a href="/news/item.html">A headline</a></h2>\n'
    b"<p>Some words of the story, then more of them &amp; an entity, <b>bold</b> and <i>slanted</i>.</p>\n"
    b'<img src="/img/photo.jpg" alt="a photo" srcset="/img/photo-2x.jpg 2x"></div>\n'
)


def _numbered(template: bytes, count: int) -> bytes:
    return b"".join(template % i for i in range(count))


MIB = 2**20
# Each grows a cost the parser could pay per tag, per byte or per link more than once.
_PATHOLOGICAL_HTML = {
    "10^5 nested divs": b"<div>" * 100_000 + b'<a href="x">x</a>' + b"</div>" * 100_000,
    "10^5 unclosed divs with text": b"<div>x" * 100_000,
    "10^5 nested tables": b"<table><tr><td>" * 30_000,
    "nested formatting, distinct attributes": _numbered(b"<b %d>", 5000) + _numbered(b"<i %d>", 5000)
    + b"x</b>" * 5000,
    "formatting reopened by each paragraph": _numbered(b"<p><b %d>", 2000),
    "formatting reopened by each paragraph, padded": _numbered(b"<p><b %d " + b"x" * 200 + b">", 2000),
    "formatting reopened by each font": _numbered(b"<font %d><p>x", 2000),
    "formatting fostered out of tables": _numbered(b"<table><b %d>x", 2000),
    "misnested formatting": b"<b><i>x</b></i>" * 50_000,
    "1 MiB href": b'<a href="' + b"a" * MIB + b'">x</a>',
    "1 MiB href of entities": b'<a href="' + b"&amp;" * (MIB // 5) + b'">x</a>',
    "1 MiB unterminated attribute": b'<a href="' + b"a" * MIB,
    "1 MiB srcset": b'<img srcset="' + b"a 1x, " * (MIB // 6) + b'">',
    "1 MiB srcset of parentheses": b'<img srcset="a ' + b"(" * MIB + b'">',
    "1 MiB style attribute": b'<div style="' + b"background:url(x.png);" * (MIB // 22) + b'">x</div>',
    "1 MiB unclosed url() in style": b'<div style="' + b"url(" * (MIB // 4) + b'">x</div>',
    "1 MiB refresh": b'<meta http-equiv="refresh" content="0; url=' + b"a" * MIB + b'">',
    "1 MiB applet code": b'<applet code="' + b"a." * (MIB // 2) + b'">',
    "10^5 links": b"".join(b'<a href="/p/%d.html">%d</a>\n' % (i, i) for i in range(100_000)),
    "10^5 styled elements": b'<span style="background:url(x.png)">x</span>' * 30_000,
    "unclosed comment": b"<!--" + b"a" * MIB,
    "run of <": b"<" * MIB,
    "run of tag openings": b"<a" * (MIB // 2),
    "run of end tags": b"</div>" * 100_000,
    "meta prescan bait": b"<meta charset=" * (MIB // 14),
}


def _benign_html(size: int) -> bytes:
    return repeat_to(_BENIGN_UNIT, size)


@pytest.mark.parametrize("name", _PATHOLOGICAL_HTML)
def test_pathological_html_costs_what_a_benign_page_of_its_size_does(name: str) -> None:
    body = _PATHOLOGICAL_HTML[name]
    assert_cost_bounded(extract_html, body, _benign_html(len(body)), factor=10, label=name)


_BENIGN_CSS = ".icon-a { background: url(/img/icons/a.png) no-repeat } .b::before { content: \"x\" }\n"
_PATHOLOGICAL_CSS = {
    "unclosed url(": "url(" + "a" * MIB,
    "many unclosed url(": "url(" * (MIB // 4),
    "unclosed quoted url(": 'url("' + "a" * MIB,
    "escaped quotes in a string": '"' + '\\"' * (MIB // 2),
    "escaped quotes in url()": 'url("' + '\\"' * (MIB // 2),
    "escaped quotes in @import": '@import "' + '\\"' * (MIB // 2),
    "escaped quotes, single": "'" + "\\'" * (MIB // 2),
    "many backslash escapes": "url(" + "\\41 " * (MIB // 4) + ")",
    "many backslashes": "url(" + "\\" * MIB + ")",
    "unclosed comment": "/*" + "url(x)" * (MIB // 6),
    "many @import": "@import " * (MIB // 8),
    "many url()": "url(x.png)" * (MIB // 10),
    "words ending in url": "xurl(" * (MIB // 5),
}


@pytest.mark.parametrize("name", _PATHOLOGICAL_CSS)
def test_pathological_css_costs_what_a_benign_stylesheet_of_its_size_does(name: str) -> None:
    text = _PATHOLOGICAL_CSS[name]
    benign = (_BENIGN_CSS * (len(text) // len(_BENIGN_CSS) + 1))[: len(text)]
    assert_cost_bounded(extract_css, text, benign, factor=10, label=name)


# --- corpus ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", corpus("html"), ids=lambda p: p.name)
def test_html_corpus(path: Path) -> None:
    body = path.read_bytes()
    _check_html(extract_html(body))
    assert_cost_bounded(extract_html, body, _benign_html(len(body)), factor=10, label=path.name)


@pytest.mark.parametrize("path", corpus("html-links"), ids=lambda p: p.name)
def test_html_links_corpus(path: Path) -> None:
    """Pages whose links a guard once changed: extraction must find what one whole parse does."""
    body = path.read_bytes()
    assert extract_html(body) == HtmlLinks(*_links_of([body], Link))


@pytest.mark.parametrize("path", corpus("css"), ids=lambda p: p.name)
def test_css_corpus(path: Path) -> None:
    text = decode_text(path.read_bytes(), None)
    _check_css(extract_css(text))
    benign = (_BENIGN_CSS * (len(text) // len(_BENIGN_CSS) + 1))[: len(text)]
    assert_cost_bounded(extract_css, text, benign, factor=10, label=path.name)
