"""Tests for archiver.web.extract: links from HTML and CSS."""

import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from archiver.web.extract import HtmlLinks, Link, decode_text, extract_css, extract_html


def pairs(html: str | bytes, charset: str | None = None) -> list[tuple[str, str]]:
    body = html.encode() if isinstance(html, str) else html
    return [(link.url, link.kind) for link in extract_html(body, charset).links]


def css_pairs(text: str) -> list[tuple[str, str]]:
    return [(link.url, link.kind) for link in extract_css(text)]


def page(paragraphs: int = 12) -> bytes:
    """A realistic page: head resources, navigation, text, images, inline CSS, footer."""
    words = ["the", "archive", "keeps", "every", "page", "that", "readers", "may", "see"]
    rng = random.Random(7)
    parts = [
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>News</title>',
        '<link rel="stylesheet" href="/css/main.css"><script src="/js/app.js"></script>',
        "<style>body{background:url(/img/bg.png)}</style></head><body><nav>",
        *(f'<a class="nav" href="/section/{i}/">Section {i}</a>' for i in range(10)),
        "</nav><main>",
    ]
    for i in range(paragraphs):
        text = " ".join(rng.choice(words) for _ in range(150))
        parts.append(f'<p>{text} <a href="/news/{i}.html">more</a></p>')
        parts.append(f'<img src="/img/{i}.jpg" srcset="/img/{i}-2x.jpg 2x" alt="">')
    parts.append('<div style="background:url(/img/promo.jpg)">promo</div></main>')
    parts.append('<footer><a href="mailto:a@b.c">mail</a><a href="#top">top</a></footer>')
    return "\n".join(parts).encode()


# --- HTML: one test per kind ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ('<a href="a.html">x</a>', [("a.html", "a/href")]),
        ('<map><area href="area.html"></map>', [("area.html", "area/href")]),
        ('<link rel="stylesheet" href="s.css">', [("s.css", "link/href")]),
        ('<img src="i.png">', [("i.png", "img/src")]),
        ('<script src="s.js"></script>', [("s.js", "script/src")]),
        ('<iframe src="if.html"></iframe>', [("if.html", "iframe/src")]),
        ('<embed src="e.swf">', [("e.swf", "embed/src")]),
        ('<input type="image" src="in.png">', [("in.png", "input/src")]),
        ('<img lowsrc="low.gif">', [("low.gif", "img/lowsrc")]),
        ('<img srcset="s.png 2x">', [("s.png", "img/srcset")]),
        ('<picture><source srcset="p.webp"></picture>', [("p.webp", "source/srcset")]),
        ('<body background="b.png">', [("b.png", "body/background")]),
        ('<table background="t.png"></table>', [("t.png", "table/background")]),
        ('<table><tr><td background="td.png">x</td></tr></table>', [("td.png", "td/background")]),
        ('<object data="o.swf"></object>', [("o.swf", "object/data")]),
        ('<meta http-equiv="refresh" content="0; url=r.html">', [("r.html", "meta/refresh")]),
        ("<style>p{background:url(st.png)}</style>", [("st.png", "style/url")]),
        ('<p style="background:url(sa.png)">x</p>', [("sa.png", "style-attr/url")]),
    ],
)
def test_each_kind(html: str, expected: list[tuple[str, str]]) -> None:
    assert pairs(html) == expected


def test_frames() -> None:
    html = '<frameset><frame src="f1.html"><frame src="f2.html"></frameset>'
    assert pairs(html) == [("f1.html", "frame/src"), ("f2.html", "frame/src")]


def test_links_in_document_order_with_values_stripped_and_decoded() -> None:
    html = (
        '<link href="s.css"><A HREF=" /a?x=1&amp;y=2 ">a</A>'
        '<img src="\n i.png\t" lowsrc=l.png style="background: URL( s.png )">'
        '<svg><a href="/svg-link">s</a></svg><a href="a.html">again</a>'
    )
    assert pairs(html) == [
        ("s.css", "link/href"),
        ("/a?x=1&y=2", "a/href"),
        ("i.png", "img/src"),
        ("l.png", "img/lowsrc"),
        ("s.png", "style-attr/url"),
        ("/svg-link", "a/href"),
        ("a.html", "a/href"),
    ]


def test_style_block_with_import_and_links_in_noscript() -> None:
    html = (
        "<style>@import 'i.css'; /* url(no.png) */ a{b:url(\"q.png\")}</style>"
        '<noscript><img src="ns.png"></noscript>'
    )
    assert pairs(html) == [("i.css", "style/url"), ("q.png", "style/url"), ("ns.png", "img/src")]


def test_elements_without_link_attributes_give_nothing() -> None:
    html = '<a name="x">x</a><a href>y</a><img alt="z"><meta name="x" content="0; url=n.html">'
    assert extract_html(html.encode()) == HtmlLinks(None, [])


# --- base --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("html", "base"),
    [
        ('<base href=" /dir/ "><a href="a">a</a>', "/dir/"),
        ('<base href="/first/"><base href="/second/">', "/first/"),
        ('<base target="_top"><base href="/second/">', "/second/"),
        ('<base href=""><base href="/second/">', None),
        ('<base href="javascript:void(0)">', None),
        ('<a href="x">x</a><base href="http://example.org/late/">', "http://example.org/late/"),
        ("<p>no base</p>", None),
    ],
)
def test_base_is_the_first_base_with_href(html: str, base: str | None) -> None:
    assert extract_html(html.encode()).base == base


def test_base_is_not_a_link() -> None:
    result = extract_html(b'<base href="/b/"><a href="a.html">a</a>')
    assert result == HtmlLinks("/b/", [Link("a.html", "a/href")])


# --- meta refresh ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "url"),
    [
        ("5; url=next.html", "next.html"),
        ("5;URL='next.html'", "next.html"),
        ("0; URL = 'a b.html' ", "a b.html"),
        ("0,url=comma.html", "comma.html"),
        ("0 url=space.html", "space.html"),
        ("0; bare.html", "bare.html"),
        ("0; 'quoted.html'", "quoted.html"),
        ("0; url='unterminated.html", "unterminated.html"),
        ("0; url='q.html' trailing", "q.html"),
        ("1.5; url=fraction.html", "fraction.html"),
        (".5; url=dot.html", "dot.html"),
        ("0; uri=x.html", "uri=x.html"),
        ("0; url=http://example.org/?a='b'", "http://example.org/?a='b'"),
        ("5", None),
        ("5;", None),
        ("0; url=", None),
        ("url=no-time.html", None),
        ("5x; url=bad.html", None),
        ("0; url=javascript:alert(1)", None),
        ("0; url=#frag", None),
    ],
)
def test_meta_refresh(content: str, url: str | None) -> None:
    html = f'<meta http-equiv="refresh" content="{content}">'
    assert pairs(html) == ([(url, "meta/refresh")] if url else [])


def test_meta_refresh_http_equiv_is_case_insensitive_and_other_values_ignored() -> None:
    html = (
        '<meta http-equiv="REFRESH" content="0;url=up.html">'
        '<meta http-equiv="Content-Type" content="text/html; url=no.html">'
        "<meta http-equiv=Refresh content=1;url=unquoted.html>"
    )
    assert pairs(html) == [("up.html", "meta/refresh"), ("unquoted.html", "meta/refresh")]


# --- srcset ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("srcset", "urls"),
    [
        ("a.png", ["a.png"]),
        ("a-480.jpg 480w, a-960.jpg 960w", ["a-480.jpg", "a-960.jpg"]),
        ("a.png 1x,b.png 2x", ["a.png", "b.png"]),
        ("a,b.png 1x, c.png 2x", ["a,b.png", "c.png"]),
        ("a.png,, b.png", ["a.png", "b.png"]),
        ("a.png 1x,b.png", ["a.png", "b.png"]),
        (" , a.png (1x, 2x), b.png 2x", ["a.png", "b.png"]),
        ("a.png 1x (, b.png 2x", ["a.png"]),
        ("data:image/png;base64,AAA= 1x, b.png 2x", ["b.png"]),
        ("\n\ta.png\n 100w,\n\tb.png 200w\n", ["a.png", "b.png"]),
        (" ,,, ", []),
        ("", []),
    ],
)
def test_srcset(srcset: str, urls: list[str]) -> None:
    assert pairs(f'<img srcset="{srcset}">') == [(url, "img/srcset") for url in urls]


# --- applet ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attrs", "url"),
    [
        ('code="Main.class"', "Main.class"),
        ('code="Main"', "Main.class"),
        ('code="pkg.sub.Main.class"', "pkg/sub/Main.class"),
        ('code="pkg/Main.class"', "pkg/Main.class"),
        ('code="Main.class" codebase="classes"', "classes/Main.class"),
        ('code="pkg.Main" codebase="/java/"', "/java/pkg/Main.class"),
        ('code="Main" codebase="javascript:x"', "Main.class"),
    ],
)
def test_applet_code_joined_with_codebase(attrs: str, url: str) -> None:
    assert pairs(f"<applet {attrs}></applet>") == [(url, "applet/code")]


# --- skipped values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "#",
        "#top",
        " #top",
        "mailto:someone@example.org",
        "MailTo:someone@example.org",
        "javascript:void(0)",
        "  JavaScript:go()",
        "java\nscript:go()",
        "java&#9;script:go()",
        "data:text/html,hi",
        "tel:+3312345678",
        "about:blank",
    ],
)
def test_skipped_values(value: str) -> None:
    html = f'<a href="{value}">x</a><img src="{value}"><p style="background:url(\'{value}\')">'
    assert pairs(html) == []
    css_value = value.replace("&#9;", "\t")  # CSS has no character references
    assert extract_css(f"a{{b:url('{css_value}')}}") == []


@pytest.mark.parametrize("value", ["javascript.html", "datafile.txt", "/about:x", "telephone.html", "a#frag"])
def test_values_that_only_look_like_skipped_schemes_are_kept(value: str) -> None:
    assert pairs(f'<a href="{value}">x</a>') == [(value, "a/href")]


# --- CSS ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("css", "expected"),
    [
        ("a{background:url(plain.png)}", [("plain.png", "css/url")]),
        ('a{background:url("double.png")}', [("double.png", "css/url")]),
        ("a{background:url('single.png')}", [("single.png", "css/url")]),
        ("a{background:url(  spaced.png  )}", [("spaced.png", "css/url")]),
        ('a{background:url( "sp ace.png" )}', [("sp ace.png", "css/url")]),
        ("a{background:URL(upper.png)}", [("upper.png", "css/url")]),
        (r"a{background:url(p\(1\).png)}", [("p(1).png", "css/url")]),
        (r"a{background:url(caf\e9 .png)}", [("café.png", "css/url")]),
        (r"a{background:url('it\'s.png')}", [("it's.png", "css/url")]),
        ('a{background:url("long\\\nline.png")}', [("longline.png", "css/url")]),
        ('@import "i.css";', [("i.css", "css/import")]),
        ("@import 'i.css' screen;", [("i.css", "css/import")]),
        ("@import url(i.css);", [("i.css", "css/import")]),
        ('@IMPORT url("i.css") print;', [("i.css", "css/import")]),
        ("@font-face{src:url(f.woff2) format('woff2')}", [("f.woff2", "css/url")]),
        ("/* url(no.png) */ a{b:url(yes.png)}", [("yes.png", "css/url")]),
        ("a{b:url(yes.png)} /* unterminated url(no.png)", [("yes.png", "css/url")]),
        ('a{content:"url(no.png)"} b{c:url(yes.png)}', [("yes.png", "css/url")]),
        ("a{content:'@import \"no.css\"'}", []),
        ('a{font-family:"unterminated\n} b{c:url(yes.png)}', [("yes.png", "css/url")]),
        ("a{b:myurl(no.png) c:url(yes.png)}", [("yes.png", "css/url")]),
        ("a{b:url(has space.png)}", []),
        ("a{b:url()}", []),
        ("a{filter:url(#svg-filter)}", []),
        ("a{b:url(data:image/png;base64,AAAA)}", []),
        ('a{b:url("x.png"', []),
    ],
)
def test_css(css: str, expected: list[tuple[str, str]]) -> None:
    assert css_pairs(css) == expected


def test_css_keeps_order_and_duplicates() -> None:
    css = "@import 'a.css'; x{b:url(1.png)} y{b:url(2.png)} z{b:url(1.png)}"
    assert css_pairs(css) == [
        ("a.css", "css/import"),
        ("1.png", "css/url"),
        ("2.png", "css/url"),
        ("1.png", "css/url"),
    ]


@pytest.mark.parametrize(
    ("body", "charset", "text"),
    [
        (b"a{b:url(caf\xc3\xa9.png)}", None, "a{b:url(café.png)}"),
        (b"a{b:url(caf\xe9.png)}", "iso-8859-1", "a{b:url(café.png)}"),
        (b'@charset "windows-1252"; a{b:url(\x80.png)}', None, '@charset "windows-1252"; a{b:url(€.png)}'),
        (b'@charset "latin1"; x', "utf-8", '@charset "latin1"; x'),
        (b"\xef\xbb\xbfa{b:url(caf\xc3\xa9.png)}", "iso-8859-1", "a{b:url(café.png)}"),
        ("\ufeffa".encode("utf-16-le"), None, "a"),
        (b'@charset "utf-16"; x', None, '@charset "utf-16"; x'),
        (b"a\xff", "no-such-charset", "a\ufffd"),
        (b"a\xff", "utf-7", "a\ufffd"),
        (b"@charset 'latin1'; \xe9", None, "@charset 'latin1'; \ufffd"),
    ],
)
def test_decode_text(body: bytes, charset: str | None, text: str) -> None:
    assert decode_text(body, charset) == text


# --- encodings ---------------------------------------------------------------------------------

HREF = "/café/€/naïve.html"


@pytest.mark.parametrize(
    ("body", "charset"),
    [
        (f'<a href="{HREF}">x</a>'.encode(), None),
        (f'<a href="{HREF}">x</a>'.encode(), "utf-8"),
        (f'<a href="{HREF}">x</a>'.encode("cp1252"), "iso-8859-1"),
        (f'<a href="{HREF}">x</a>'.encode("cp1252"), "windows-1252"),
        (f'<meta charset="windows-1252"><a href="{HREF}">x</a>'.encode("cp1252"), None),
        (
            f'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'
            f'<a href="{HREF}">x</a>'.encode("cp1252"),
            None,
        ),
        (f'<a href="{HREF}">x</a>'.encode("cp1252"), None),
        (f'<meta charset="latin1"><a href="{HREF}">x</a>'.encode(), "utf-8"),
        (f'<!-- <meta charset="latin1"> --><a href="{HREF}">x</a>'.encode(), None),
        (f'<a href="{HREF}">x</a>'.encode("cp1252"), "no-such-charset"),
        (b"\xef\xbb\xbf" + f'<a href="{HREF}">x</a>'.encode(), "iso-8859-1"),
        (f'\ufeff<a href="{HREF}">x</a>'.encode("utf-16-le"), None),
        (f'<a href="{HREF}">x</a>'.encode("utf-16-be"), "utf-16be"),
    ],
)
def test_encodings(body: bytes, charset: str | None) -> None:
    assert pairs(body, charset) == [(HREF, "a/href")]


def test_shift_jis_and_truncated_utf8() -> None:
    href = "/日本語.html"
    assert pairs(f'<a href="{href}">x</a>'.encode("shift_jis"), "Shift_JIS") == [(href, "a/href")]
    truncated = f'<a href="{href}">x</a><p>日'.encode()[:-1]
    assert pairs(truncated) == [(href, "a/href")]


def test_invalid_utf8_in_a_declared_utf8_page_becomes_replacement_characters() -> None:
    assert pairs(b'<a href="/a\xff.html">x</a>', "utf-8") == [("/a\ufffd.html", "a/href")]


# --- robustness --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"   \n",
        b"\x00" * 1000,
        b'<a href="\x00x">',
        b"<a hr",
        b'<a href="unterminated',
        b"<!--",
        b"<script>",
        b"<style>a{b:url(",
        b"</a></b></table></html>",
        b"<div" * 50_000,
        b'<div title="' * 20_000,
    ],
)
def test_degenerate_input_does_not_raise(body: bytes) -> None:
    result = extract_html(body)
    assert isinstance(result, HtmlLinks)
    assert all(link.url for link in result.links)


def test_binary_garbage_does_not_raise() -> None:
    garbage = random.Random(1).randbytes(1_000_000)
    result = extract_html(garbage)
    assert all(isinstance(link, Link) and link.url for link in result.links)
    assert isinstance(extract_css(decode_text(garbage, None)), list)


def test_truncated_page_keeps_what_was_found() -> None:
    body = page()
    cut = body.index(b"/news/5.html") + 3
    found = pairs(body[:cut])
    assert ("/news/4.html", "a/href") in found
    assert all(not url.startswith("/news/5") for url, _ in found)


def test_realistic_page() -> None:
    found = pairs(page())
    assert found[:4] == [
        ("/css/main.css", "link/href"),
        ("/js/app.js", "script/src"),
        ("/img/bg.png", "style/url"),
        ("/section/0/", "a/href"),
    ]
    assert found[-1] == ("/img/promo.jpg", "style-attr/url")
    kinds = [kind for _, kind in found]
    assert kinds.count("a/href") == 10 + 12
    assert kinds.count("img/src") == kinds.count("img/srcset") == 12
    assert len(found) == 3 + 10 + 12 * 3 + 1


def test_five_megabyte_page() -> None:
    one = page()
    copies = 5_000_000 // len(one) + 1
    assert len(pairs(one * copies)) == len(pairs(one)) * copies


# Each of these takes the tree builder minutes unguarded (its cost grows with the square of
# the depth, or worse); the bound is a hundred times what the guarded parse needs.
@pytest.mark.parametrize(
    "body",
    [
        b"<div>" * 100_000 + b'<a href="deep.html">x</a>' + b"</div>" * 100_000,
        b"<div>x" * 100_000 + b'<a href="deep.html">x</a>',
        b"<ul><li>" * 50_000 + b'<a href="deep.html">x</a>',
        b"<font size=2><b>" * 50_000 + b'<a href="deep.html">x</a>',
        b"".join(b"<b %d>" % i for i in range(5000))
        + b"".join(b"<i %d>" % i for i in range(5000))
        + b"x</b>" * 5000
        + b'<a href="deep.html">x</a>',
    ],
)
def test_deep_nesting_is_fast_and_keeps_links(body: bytes) -> None:
    start = time.perf_counter()
    found = pairs(body)
    assert time.perf_counter() - start < 10
    assert found == [("deep.html", "a/href")]


def test_deeply_nested_page_keeps_the_links_a_shallow_parse_finds() -> None:
    """Past the nesting guard only link-bearing tags are parsed: the links must not change."""
    body = page()
    deep = body + b"<div>" * 5000 + b"<span>tail</span>" + b"</div>" * 5000
    assert pairs(deep) == pairs(body)


def test_deeply_nested_styled_elements_keep_their_style_urls() -> None:
    body = b'<div style="background:url(x.png)"><table background="t.png">' * 20_000
    start = time.perf_counter()
    found = pairs(body)
    assert time.perf_counter() - start < 10
    assert sorted(set(found)) == [("t.png", "table/background"), ("x.png", "style-attr/url")]
    assert len(found) == 40_000


def test_threads_extract_independently() -> None:
    body = page()
    expected = pairs(body)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(pairs, [body] * 16))
    assert results == [expected] * 16
