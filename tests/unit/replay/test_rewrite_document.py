"""Tests for archiver.replay.rewrite.rewrite_document, what a rewriting worker runs, and the split
of a rewritten page around its banner."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.replay.rewrite import (
    CSS,
    HTML,
    SCRIPT_FILE,
    NotRewritten,
    RewrittenHtml,
    prepare_html_text,
    rewrite_css,
    rewrite_document,
    rewrite_html,
)
from tests.support.fuzzing import examples

TS = "20260102030405"
URL = "http://example.org/dir/page.html"
CLIENT = "/_archiver/client.js?v=1"


def document(body: bytes, kind: str = HTML, coding: str = "", limit: int = 2**20, kept: int = 100):
    return rewrite_document(body, kind=kind, coding=coding, limit=limit, url=URL, timestamp=TS,
                            charset=None, client=CLIENT, embeds_kept=kept)


def test_a_gzipped_jsonp_script_is_served_calling_the_asked_callback():
    body = gzip.compress(b'cb_1({"text": "x"});\n')
    done = rewrite_document(body, kind=SCRIPT_FILE, coding="gzip", limit=2**20, url=URL, timestamp=TS,
                            charset=None, client=CLIENT, embeds_kept=100, callback=("cb_1", "cb_2"))
    assert done is not None and done.before == b'cb_2({"text": "x"});\n' and done.after is None
    assert document(body, kind=SCRIPT_FILE, coding="gzip") is None  # no callback: as archived


def test_a_page_comes_in_two_parts_around_its_banner_with_its_distinct_embeds():
    page = (b"<html><head><title>t</title></head><body class=x><img src=a.png><img src=b.png>"
            b"<img src=a.png><a href=next.html>n</a><script src=s.js></script></body></html>")
    done = document(gzip.compress(page), coding="gzip", kept=2)
    assert done is not None and done.after is not None
    banner = "<div id=banner></div>"
    whole = rewrite_html(page, url=URL, timestamp=TS, prefix="", banner=banner, client=CLIENT)
    assert done.before + banner.encode() + done.after == whole
    assert done.before.endswith(b"<body class=x>")
    assert [e.url for e in done.embeds.first] == ["http://example.org/dir/a.png", "http://example.org/dir/b.png"]
    assert done.embeds.count == 3  # a.png once, b.png, s.js; the link is navigation


def test_a_frame_pages_refresh_stays_in_frame_mode_and_is_no_embed():
    page = b'<html><head><meta http-equiv="refresh" content="0; url=en/"></head><body><img src=a.png>'
    done = rewrite_document(page, kind=HTML, coding="", limit=2**20, url=URL, timestamp=TS, charset=None,
                            client=CLIENT, embeds_kept=100, modifier="if_")
    assert done is not None
    assert f'content="0; url=/web/{TS}if_/http://example.org/dir/en/"'.encode() in done.before
    assert [e.url for e in done.embeds.first] == ["http://example.org/dir/a.png"]


def test_a_frameset_takes_no_banner():
    page = b"<html><frameset><frame src=a.html></frameset></html>"
    done = document(page)
    assert done is not None and done.after is None
    assert done.before == rewrite_html(page, url=URL, timestamp=TS, prefix="", client=CLIENT)


def test_stylesheets_and_scripts():
    sheet = b"body { background: url(bg.png) }"
    done = document(sheet, CSS)
    assert done is not None and done.after is None and done.embeds.count == 0
    assert done.before == rewrite_css(sheet, url=URL, timestamp=TS, prefix="")
    script = document(b"location.href = '/a';", SCRIPT_FILE)
    assert script is not None and script.before == b"__archiverLocation.href = '/a';"
    assert document(b"var a = 1;", SCRIPT_FILE) is None  # nothing to rewrite: served as archived


def test_past_the_limit_once_decoded_a_document_is_not_rewritten():
    page = b"<p>" + b"x" * 5000 + b"</p>"
    assert document(page, limit=len(page)) is not None
    twice = gzip.compress(gzip.compress(page))
    for body, coding in ((page, ""), (gzip.compress(page), "gzip"), (twice, "gzip, gzip")):
        with pytest.raises(NotRewritten, match=r"larger than replay.max_rewrite_size \(5006 bytes\)"):
            document(body, coding=coding, limit=len(page) - 1)


def inserted(page: RewrittenHtml, banner: str) -> str:
    """The page with its edits and the banner applied in one sorted pass (a banner at the place
    of another edit goes after it)."""
    edits = page.edits
    if page.banner_at is not None:
        edits = sorted([*edits, (page.banner_at, page.banner_at, banner)], key=lambda edit: edit[0])
    out, last = [], 0
    for start, end, new in edits:
        out += [page.text[last:start], new]
        last = end
    return "".join([*out, page.text[last:]])


@given(st.text(alphabet="<>/=\"' abcdefghijklmnopqrstuvwxyz#&;", max_size=300), st.sampled_from(["", "<b>"]))
@settings(max_examples=examples(300), deadline=None)
def test_the_parts_around_the_banner_are_the_page_with_it(text, banner):
    text = "<!DOCTYPE html>" + text if len(text) % 2 else text
    page = prepare_html_text(text, url=URL, timestamp=TS, prefix="", client=CLIENT)
    before, after = page.parts()
    assert (after is None) == (page.banner_at is None)
    assert before + banner + (after or "") == inserted(page, banner) == page.render(banner)
