"""What HTML rewriting adds for client-side replay: the client script first, scripts' location
writes and postMessage calls (inline, in event handler attributes, in javascript: URLs), srcdoc
documents rewritten as documents, and template contents rewritten like the rest."""

from __future__ import annotations

import html

import pytest
from selectolax.lexbor import LexborHTMLParser

from archiver.replay.rewrite import client_tag, prepare_html_text
from archiver.replay.scripts import LOCATION

URL = "http://example.org/dir/page.html"
TS = "20261122000000"
SRC = "/_archiver/client.js?v=1"
TAG = client_tag(SRC, URL, TS)


def rewrite(text: str, banner: str | None = None) -> str:
    return prepare_html_text(text, url=URL, timestamp=TS, prefix="", client=SRC).render(banner)


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("<!DOCTYPE html><html><head><script>a()</script>", f"<!DOCTYPE html><html><head>{TAG}<script>"),
        ("<html lang=en><script>a()</script>", f"<html lang=en>{TAG}<script>"),
        ("<!doctype html><script>a()</script>", f"<!doctype html>{TAG}<script>"),
        ("<script>a()</script>", f"{TAG}<script>"),
        ("<!--x--><html><!--y--><head id=h><title>t", f"<!--x--><html><!--y--><head id=h>{TAG}<title>"),
        ("<?xml version='1.0'?><html xmlns='http://www.w3.org/1999/xhtml'><head/>", f"<head/>{TAG}"),
        ("<html><body><head>", f"<html>{TAG}<body>"),
    ],
)
def test_the_client_script_comes_before_any_script_of_the_page(page: str, expected: str) -> None:
    out = rewrite(page)
    assert out.count(TAG) == 1
    assert expected in out


def test_the_client_script_comes_before_a_banner_at_the_same_place() -> None:
    assert rewrite("<p>text", banner="<div>banner</div>") == f"{TAG}<div>banner</div><p>text"


def test_the_client_script_element_names_the_document_and_its_date() -> None:
    tag = client_tag(SRC, 'http://example.org/a?b=1&c="2"', TS)
    element = LexborHTMLParser(tag).css_first("script")
    assert element.attributes == {
        "src": SRC, "data-timestamp": TS, "data-url": 'http://example.org/a?b=1&c="2"'
    }  # fmt: skip


def test_inline_scripts_handlers_and_javascript_urls_have_their_location_writes_rewritten() -> None:
    page = (
        "<script>location.href = '/a'</script>"
        "<script type=module>location = '/b'</script>"
        "<script type='application/json'>{\"location\": 1}</script>"
        "<script type=text/template>location = '/c'</script>"
        '<button onclick="location.href=\'/d\'">d</button>'
        "<a href=\"javascript:location.assign('/e')\">e</a>"
        "<p title=\"location = '/f'\">f</p>"
    )
    out = rewrite(page)
    assert f"<script>{LOCATION}.href = '/a'</script>" in out
    assert f"<script type=module>{LOCATION} = '/b'</script>" in out
    assert "<script type='application/json'>{\"location\": 1}</script>" in out
    assert "<script type=text/template>location = '/c'</script>" in out
    assert f'onclick="{LOCATION}.href=\'/d\'"' in out
    assert f"href=\"javascript:{LOCATION}.assign('/e')\"" in out
    assert "title=\"location = '/f'\"" in out


def test_a_srcdoc_document_is_rewritten_as_a_document_with_the_client_script() -> None:
    inner = '<script>parent.postMessage("hi", "*")</script><img src="pic.png"><a href="/x">x</a>'
    out = LexborHTMLParser(rewrite(f'<iframe srcdoc="{html.escape(inner)}"></iframe>'))
    srcdoc = out.css_first("iframe").attributes["srcdoc"]
    assert srcdoc is not None
    assert srcdoc.startswith(TAG)
    assert f'<img src="/web/{TS}im_/http://example.org/dir/pic.png">' in srcdoc
    assert f'<a href="/web/{TS}/http://example.org/x">' in srcdoc
    assert 'parent.postMessage(...__archiverPost("hi", "*"))' in srcdoc


def test_srcdoc_documents_nested_past_the_depth_are_left_as_they_are() -> None:
    page = '<img src="/deep.png">'
    for _ in range(6):
        page = f'<iframe srcdoc="{html.escape(page)}"></iframe>'
    out = rewrite(page)
    assert out.count("client.js") == 1 + 4  # the page and four srcdoc documents down, no further
    assert "im_" not in out and "deep.png" in out


def test_srcdoc_embeds_count_as_the_page_embeds() -> None:
    page = prepare_html_text(
        '<iframe srcdoc="&lt;img src=&quot;/a.png&quot;&gt;"></iframe>', url=URL, timestamp=TS, prefix=""
    )
    assert [embed.url for embed in page.embeds] == ["http://example.org/a.png"]


def test_template_contents_are_rewritten_like_the_rest_of_the_page() -> None:
    out = rewrite('<template id=row><tr><td><img src="/cell.png"><a href="next.html">n</a></template>')
    assert f'<img src="/web/{TS}im_/http://example.org/cell.png">' in out
    assert f'<a href="/web/{TS}/http://example.org/dir/next.html">' in out
