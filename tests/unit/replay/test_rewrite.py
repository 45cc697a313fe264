"""Tests for archiver.replay.rewrite: archive URLs, HTML and CSS rewriting, archived heads."""

from __future__ import annotations

import re
from html import escape as html_escape

import pytest

from archiver.replay.rewrite import (
    WebTarget,
    archive_url,
    pad_timestamp,
    parse_head,
    parse_web_path,
    refresher,
    replay_headers,
    requested_url,
    rewrite_css,
    rewrite_html,
    rewrite_html_text,
)
from archiver.web import urls
from archiver.web.extract import decode_text, extract_css, extract_html
from demoweb import DemoWeb, WebSpec

TS = "20260102030405"
DOC = "http://example.org/dir/page.html"


def html(text: str, url: str = DOC, banner: str | None = None) -> str:
    return rewrite_html_text(text, url=url, timestamp=TS, prefix="", banner=banner)


def css(text: str, url: str = "http://example.org/css/site.css") -> str:
    return rewrite_css(text.encode(), url=url, timestamp=TS, prefix="").decode()


def web(mod: str, url: str) -> str:
    return f"/web/{TS}{mod}/{url}"


# --- archive URLs ----------------------------------------------------------------------------


def test_archive_url_has_the_wayback_form() -> None:
    assert archive_url("", TS, "im_", "http://a.org/x.png") == f"/web/{TS}im_/http://a.org/x.png"
    assert archive_url("http://h:1", TS, "", "http://a.org/") == f"http://h:1/web/{TS}/http://a.org/"


@pytest.mark.parametrize(
    ("digits", "padded"),
    [
        ("2026", "20260101000000"),
        ("202611", "20261101000000"),
        ("20261", "20261001000000"),
        ("2", "20000101000000"),
        ("20261122031559", "20261122031559"),
    ],
)
def test_pad_timestamp(digits: str, padded: str) -> None:
    assert pad_timestamp(digits) == padded


@pytest.mark.parametrize(
    "digits", ["", "0", "202613", "20260230", "20261122250000", "123456789012345", "\uff12\uff10\uff12\uff16"]
)
def test_pad_timestamp_refuses_what_is_no_date(digits: str) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        pad_timestamp(digits)


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ("http://Example.org:80/a/../b?q=1", "http://example.org/b?q=1"),
        ("example.org/a", "http://example.org/a"),
        ("example.org:8080", "http://example.org:8080/"),
        ("https:/example.org/x", "https://example.org/x"),
        ("HTTP:///example.org/", "http://example.org/"),
    ],
)
def test_requested_url(text: str, url: str) -> None:
    assert requested_url(text) == url


@pytest.mark.parametrize("text", ["", "ftp://example.org/", "file:///etc/passwd", "http://", "http://a b/"])
def test_requested_url_refuses_what_is_not_http(text: str) -> None:
    with pytest.raises(ValueError):
        requested_url(text)


@pytest.mark.parametrize(
    ("rest", "target"),
    [
        ("2026/http://a.org/", WebTarget("memento", "http://a.org/", "20260101000000", False, "")),
        (f"{TS}/http://a.org/x?y=1", WebTarget("memento", "http://a.org/x?y=1", TS, True, "")),
        (f"{TS}im_/http://a.org/i.png", WebTarget("memento", "http://a.org/i.png", TS, True, "im_")),
        ("2026id_/a.org/", WebTarget("memento", "http://a.org/", "20260101000000", False, "id_")),
        ("*/http://a.org/", WebTarget("list", "http://a.org/")),
        ("2026*/http://a.org/", WebTarget("list", "http://a.org/", within="2026")),
        (f"2026*{TS}/http://a.org/", WebTarget("list", "http://a.org/", TS, within="2026")),  # a later page
        (f"*{TS}/http://a.org/", WebTarget("list", "http://a.org/", TS)),
        ("*/http://a.org/docs/*", WebTarget("prefix", "http://a.org/docs/")),
        ("http://a.org/p", WebTarget("timegate", "http://a.org/p")),
        ("a.org:8080/p", WebTarget("timegate", "http://a.org:8080/p")),
    ],
)
def test_parse_web_path(rest: str, target: WebTarget) -> None:
    assert parse_web_path(rest) == target


@pytest.mark.parametrize(
    ("rest", "message"),
    [
        ("2026xx_/http://a.org/", "unknown modifier"),
        ("202613/http://a.org/", "bad timestamp"),
        ("123456789012345/http://a.org/", "1 to 14 digits"),
        ("2026/", "no URL"),
        ("*/", "no URL"),
        ("2026/mailto:a@b.org", "not an http"),
        ("202613*/http://a.org/", "bad timestamp"),
        ("2026*2026/http://a.org/", "a page of captures starts at a 14-digit timestamp"),
        (f"202613*{TS}/http://a.org/", "bad timestamp"),
    ],
)
def test_parse_web_path_errors(rest: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_web_path(rest)


# --- HTML ------------------------------------------------------------------------------------

D, ROOT = "http://example.org/dir/", "http://example.org/"
ALL_KINDS = [
    ('<a href="a.html">', '<a href="{}">', "", D + "a.html"),
    ('<area href="/m.html">', '<area href="{}">', "", ROOT + "m.html"),
    ('<link rel="stylesheet" href="s.css">', '<link rel="stylesheet" href="{}">', "cs_", D + "s.css"),
    (
        '<link rel="shortcut icon" href="/f.ico">',
        '<link rel="shortcut icon" href="{}">',
        "im_",
        ROOT + "f.ico",
    ),
    ('<link rel="next" href="p2.html">', '<link rel="next" href="{}">', "", D + "p2.html"),
    (
        "<link rel=preload as=script href=/j.js>",
        '<link rel=preload as=script href="{}">',
        "js_",
        ROOT + "j.js",
    ),
    ('<img src="i.png">', '<img src="{}">', "im_", D + "i.png"),
    ('<img lowsrc="l.png">', '<img lowsrc="{}">', "im_", D + "l.png"),
    ('<script src="//cdn.org/j.js"></script>', '<script src="{}"></script>', "js_", "http://cdn.org/j.js"),
    ('<iframe src="w.html"></iframe>', '<iframe src="{}"></iframe>', "if_", D + "w.html"),
    ('<frame src="n.html">', '<frame src="{}">', "fr_", D + "n.html"),
    ('<embed src="a.swf">', '<embed src="{}">', "oe_", D + "a.swf"),
    ('<object data="c.swf"></object>', '<object data="{}"></object>', "oe_", D + "c.swf"),
    ('<applet codebase="/j/" code="M.class">', '<applet codebase="{}" code="M.class">', "oe_", ROOT + "j/"),
    ('<applet code="/j/M.class">', '<applet code="{}">', "oe_", ROOT + "j/M.class"),
    ('<input type=image src="b.png">', '<input type=image src="{}">', "im_", D + "b.png"),
    ('<body background="p.png">', '<body background="{}">', "im_", D + "p.png"),
    ('<table background="t.png">', '<table background="{}">', "im_", D + "t.png"),
    ('<td background="c.png">', '<td background="{}">', "im_", D + "c.png"),
    (
        '<video src="v.mp4" poster="v.jpg">',
        '<video src="{}" poster="{}">',
        ("oe_", "im_"),
        (D + "v.mp4", D + "v.jpg"),
    ),
    ('<audio src="a.ogg">', '<audio src="{}">', "oe_", D + "a.ogg"),
    ('<source src="s.webm">', '<source src="{}">', "oe_", D + "s.webm"),
    ('<track src="t.vtt">', '<track src="{}">', "oe_", D + "t.vtt"),
    ('<form action="/search">', '<form action="{}">', "", ROOT + "search"),
    ('<svg><image href="i.svg"/></svg>', '<svg><image href="{}"/></svg>', "im_", D + "i.svg"),
]


@pytest.mark.parametrize(("markup", "template", "mods", "targets"), ALL_KINDS)
def test_each_link_kind_points_into_the_archive(markup, template, mods, targets) -> None:
    mods, targets = ((mods,), (targets,)) if isinstance(mods, str) else (mods, targets)
    assert html(markup) == template.format(*(web(m, t) for m, t in zip(mods, targets, strict=True)))


def test_srcset_candidates_are_each_rewritten() -> None:
    out = html('<img srcset="a.png 1x, /b,c.png 2x,d.png" sizes="50vw">')
    a, bc, d = web("im_", D + "a.png"), web("im_", ROOT + "b,c.png"), web("im_", D + "d.png")
    assert out == f'<img srcset="{a} 1x, {bc} 2x,{d}" sizes="50vw">'
    out = html('<picture><source srcset="w.webp 100w, x.webp 200w"></picture>')
    assert out.count("/web/") == 2 and "100w" in out and "200w" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("5; url=next.html", "5; url={}"),
        ("0;URL='next.html'", "0;URL='{}'"),
        ("3, next.html", "3, {}"),
        ("1 next.html", "1 {}"),
        ('0; url="next.html" trailing', '0; url="{}" trailing'),
    ],
)
def test_meta_refresh(content: str, expected: str) -> None:
    out = html(f'<meta http-equiv="Refresh" content="{content.replace(chr(34), "&quot;")}">')
    new = expected.format(web("", "http://example.org/dir/next.html"))
    assert out == f'<meta http-equiv="Refresh" content="{new.replace(chr(34), "&quot;")}">'


@pytest.mark.parametrize("modifier", ["if_", "fr_", "mp_", ""])
def test_meta_refresh_keeps_the_pages_modifier(modifier: str) -> None:
    # An unbannered frame page (the Apache manual's root in an iframe) refreshes within its frame.
    markup = '<meta http-equiv="refresh" content="0; url=en/index.html"><img src=a.png><a href=b.html>'
    out = rewrite_html_text(markup, url=DOC, timestamp=TS, prefix="", modifier=modifier)
    target = web(modifier, "http://example.org/dir/en/index.html")
    assert f'content="0; url={target}"' in out
    # Only the refresh follows the page: embeds and links keep their own modifiers.
    assert web("im_", "http://example.org/dir/a.png") in out
    assert web("", "http://example.org/dir/b.html") in out


def test_a_refresh_header_keeps_the_pages_modifier() -> None:
    refresh = refresher("http://a.org/p", TS, "", "if_")
    served = replay_headers([("Refresh", "5; url=/next")], rewritten=False, location=None, refresh=refresh)
    assert ("Refresh", f"5; url=/web/{TS}if_/http://a.org/next") in served


def test_a_srcdoc_documents_refresh_stays_in_its_frame() -> None:
    inner = html_escape('<meta http-equiv="refresh" content="0; url=next.html">')
    out = rewrite_html_text(f'<iframe srcdoc="{inner}"></iframe>', url=DOC, timestamp=TS, prefix="")
    assert web("if_", "http://example.org/dir/next.html") in out


@pytest.mark.parametrize("content", ["5", "5x; url=next.html", "; url=a.html", ""])
def test_meta_refresh_without_url_is_untouched(content: str) -> None:
    markup = f'<meta http-equiv="refresh" content="{content}">'
    assert html(markup) == markup


def test_base_href_is_rewritten_and_used_for_every_link() -> None:
    out = html('<head><base href="http://other.org/b/"><base href="/ignored/"></head><a href="x.html">')
    assert f'<base href="{web("", "http://other.org/b/")}">' in out
    assert f'<a href="{web("", "http://other.org/b/x.html")}">' in out


def test_base_after_the_links_still_counts() -> None:
    out = html('<img src="i.png"><base href="/base/">')
    assert f'src="{web("im_", "http://example.org/base/i.png")}"' in out


def test_style_block_and_attribute() -> None:
    out = html(
        "<style>@import 'a.css'; @import url(b.css); p { background: url(\"bg.png\") }</style>"
        "<p style=\"background-image: url('x.png')\">"
    )
    assert f"@import '{web('cs_', 'http://example.org/dir/a.css')}'" in out
    assert f"@import url({web('cs_', 'http://example.org/dir/b.css')})" in out
    assert f'url("{web("im_", "http://example.org/dir/bg.png")}")' in out
    assert f"style=\"background-image: url('{web('im_', 'http://example.org/dir/x.png')}')\"" in out


def test_what_is_not_markup_or_not_a_link_stays_byte_identical() -> None:
    doc = (
        "<!DOCTYPE html>\n<!-- <a href='c.html'> -->\n<script>var a = '<a href=\"s.html\">';</script>"
        "<textarea><img src=t.png></textarea><title><a href=u></title>"
        '<a href="#top">t</a><a href="mailto:a@b.org">m</a><a href="javascript:go()">j</a>'
        '<img src="data:image/png;base64,AAAA"><a>no href</a><a href="">self</a><a href="http://-1.2.3.4/">'
        "<p data-href='x.html' class=\"a&amp;b\">text &amp; more</p><!-->-->unclosed <a"
    )
    assert html(doc) == doc


def test_quotes_case_entities_and_duplicates() -> None:
    out = html('<A HREF=a.html><a href=\'b.html?x=1&amp;y=2\'><img SRC = "c.png" src="ignored.png">')
    assert out == (
        f'<A HREF="{web("", "http://example.org/dir/a.html")}">'
        f"<a href='{web('', 'http://example.org/dir/b.html?x=1')}&amp;y=2'>"
        f'<img SRC = "{web("im_", "http://example.org/dir/c.png")}" src="ignored.png">'
    )


def test_character_references_follow_the_attribute_rules() -> None:
    # "&copy=" in an attribute is text (HTML Standard, named character reference state).
    out = html('<a href="/q?a=1&copy=2&lang=fr&amp;b=&#x41;">')
    assert out == f'<a href="{web("", "http://example.org/q?a=1")}&amp;copy=2&amp;lang=fr&amp;b=A">'


def test_fragment_is_kept_and_untouched_values_keep_their_spelling() -> None:
    out = html('<a href="/docs/../a.html#Part 2">')
    assert out == f'<a href="{web("", "http://example.org/a.html")}#Part 2">'


def test_css_url_forms_and_escapes() -> None:
    out = css(
        "/* url(comment.png) */ a { content: 'url(string.png)'; b: myurl(x.png); "
        "c: url( sp\\ ace.png ); d: URL(/up.png); e: url(#frag); f: url(data:x) }"
    )
    assert "url(comment.png)" in out and "'url(string.png)'" in out and "myurl(x.png)" in out
    assert f"url( {web('im_', 'http://example.org/css/sp%20ace.png')} )" in out
    assert f"URL({web('im_', 'http://example.org/up.png')})" in out
    assert "url(#frag)" in out and "url(data:x)" in out


def test_css_encoding_comes_out_utf8() -> None:
    body = '@charset "iso-8859-1"; a:after { content: "é" } b { background: url(é.png) }'.encode("latin-1")
    out = rewrite_css(body, url="http://example.org/c.css", timestamp=TS, prefix="")
    assert 'content: "é"'.encode() in out and web("im_", "http://example.org/%C3%A9.png").encode() in out


def test_legacy_encoding_is_decoded_and_invalid_utf8_kept() -> None:
    latin = '<meta charset="windows-1252"><p>caf\xe9</p><a href="x.html">'.encode("cp1252")
    out = rewrite_html(latin, url=DOC, timestamp=TS, prefix="")
    assert "café".encode() in out and b"/web/" in out
    broken = b'<meta charset="utf-8"><p>\xff\xfe</p><a href="x.html">'
    out = rewrite_html(broken, url=DOC, timestamp=TS, prefix="")
    assert out.startswith(b'<meta charset="utf-8"><p>\xff\xfe</p><a href="/web/')


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ("<html><head><title>t</title></head><body class=x><p>a", "<html><head><title>t</title></head><body class=x>B<p>a"),  # noqa: E501
        ("<!DOCTYPE html><title>t</title><meta name=x><p>a", "<!DOCTYPE html><title>t</title><meta name=x>B<p>a"),  # noqa: E501
        ("<!doctype html>just text", "<!doctype html>Bjust text"),
        ("plain", "Bplain"),
        ("<frameset><frame name=a></frameset>", "<frameset><frame name=a></frameset>"),
        ("<!-- <body> --><body>", "<!-- <body> --><body>B"),
        ("<head><script>'<body>'</script></head><div>", "<head><script>'<body>'</script></head>B<div>"),
    ],
)  # fmt: skip
def test_banner_placement(doc: str, expected: str) -> None:
    assert rewrite_html_text(doc, url=DOC, timestamp=TS, prefix="", banner="B") == expected


def test_prefix_is_put_in_front_of_every_archive_url() -> None:
    out = rewrite_html_text('<a href="/x">', url=DOC, timestamp=TS, prefix="/archive", banner=None)
    assert out == f'<a href="/archive/web/{TS}/http://example.org/x">'


def test_pathological_markup_is_handled() -> None:
    for doc in ("<a " + "b " * 50_000, '<a href="' + "x" * 50_000, "<" * 50_000, "<!--" + "-" * 50_000):
        assert html(doc, banner="B").startswith("B")


# --- every link of the demo web ---------------------------------------------------------------

_ARCHIVED = re.compile(rf"/web/{TS}([a-z]{{2}}_)?/([^#]*)(#.*)?\Z")


def _expected_modifier(kind: str, target: str) -> str:
    if kind in ("a/href", "area/href", "meta/refresh"):
        return ""
    if kind == "script/src":
        return "js_"
    if kind in ("frame/src", "iframe/src"):
        return {"frame/src": "fr_", "iframe/src": "if_"}[kind]
    if kind in ("embed/src", "object/data", "applet/code"):
        return "oe_"
    if kind in ("link/href", "style/url", "css/import", "css/url"):
        return "cs_" if target.endswith(".css") or kind == "css/import" else "im_"
    return "im_"


def _documents(web: DemoWeb):
    for url in sorted(web.expected("archiver")):
        host = urls.split_origin(url)[0].split("//")[1].split(":")[0]
        reply = web.respond(host, urls.split_origin(url)[1])
        kind = dict(reply.headers).get("Content-Type", "").split(";")[0]
        if reply.status == 200 and kind in ("text/html", "text/css"):
            yield url, kind, reply.body


@pytest.mark.parametrize("version", [0, 1])
def test_every_link_of_the_demo_web_is_rewritten_in_place(version: int) -> None:
    """Each link extraction finds in a page comes back, in order and of the same kind, as an
    archive URL of the same target with the modifier its kind calls for; nothing else is left."""
    web_ = DemoWeb(WebSpec(sites=2, pages_per_site=12, version=version))
    seen = set()
    for url, kind, body in _documents(web_):
        if kind == "text/css":
            before_links = extract_css(decode_text(body, None))
            base = url
            after = rewrite_css(body, url=url, timestamp=TS, prefix="")
            after_links = extract_css(after.decode())
        else:
            found = extract_html(body)
            before_links = found.links
            base = urls.normalize(found.base, url) if found.base else url
            after = rewrite_html(body, url=url, timestamp=TS, prefix="")
            after_links = extract_html(after).links
        assert len(after_links) == len(before_links), url
        for before, rewritten in zip(before_links, after_links, strict=True):
            assert rewritten.kind == before.kind
            target = urls.normalize(before.url, base)
            if target is None:  # a javascript: or mailto: link the crawler skips: left alone
                assert rewritten.url == before.url
                continue
            match = _ARCHIVED.match(rewritten.url)
            assert match, (url, rewritten)
            assert match.group(2) == target
            assert (match.group(1) or "") == _expected_modifier(before.kind, target), (url, before)
            seen.add(before.kind)
    assert len(seen) >= 18, seen


# --- archived heads --------------------------------------------------------------------------


def test_parse_head() -> None:
    head = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nbad header\r\nX-A:  v \r\n\r\n"
    assert parse_head(head) == (404, [("Content-Type", "text/html"), ("X-A", "v")])
    assert parse_head(b"HTTP/1.0 200\r\n\r\n") == (200, [])
    assert parse_head(b"") == (None, [])


def test_replay_headers_keep_originals_apart_and_pass_only_safe_ones() -> None:
    headers = [
        ("Content-Type", "text/html; charset=iso-8859-1"),
        ("Content-Encoding", "gzip"),
        ("Set-Cookie", "id=1"),
        ("Content-Security-Policy", "default-src *"),
        ("X-Archiver-Transfer-Encoding", "chunked"),
        ("Refresh", "5; url=/next"),
        ("X-Bad", "a\x01b"),
    ]
    refresh = refresher("http://a.org/p", TS, "")
    plain = replay_headers(headers, rewritten=False, location=None, refresh=refresh)
    assert ("Content-Encoding", "gzip") in plain
    assert ("Content-Type", "text/html; charset=iso-8859-1") in plain
    assert ("X-Archive-Orig-Set-Cookie", "id=1") in plain
    assert ("X-Archive-Orig-Transfer-Encoding", "chunked") in plain
    assert ("Refresh", f"5; url=/web/{TS}/http://a.org/next") in plain
    names = {name.lower() for name, _ in plain}
    assert not names & {"set-cookie", "content-security-policy", "transfer-encoding"}
    assert not {"x-bad", "x-archive-orig-x-bad"} & names
    rewritten = replay_headers(headers, rewritten=True, location="/web/x", refresh=refresh)
    assert ("Content-Type", "text/html; charset=utf-8") in rewritten and ("Location", "/web/x") in rewritten
    assert "content-encoding" not in {name.lower() for name, _ in rewritten}
