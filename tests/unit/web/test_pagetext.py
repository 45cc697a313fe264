"""The text of an archived page (archiver.web.pagetext): what is kept, how it is decoded, its bounds."""

from __future__ import annotations

import gzip

from archiver.web.pagetext import MAX_BODY, MAX_HEADINGS, MAX_TITLE, PageText, page_text, response_text


def test_title_headings_and_body_without_scripts_or_styles():
    page = page_text(
        b"<!DOCTYPE html><html><head><title> Harbour &amp; river </title><style>p { color: red }</style>"
        b"<script>var hidden = 'script words';</script></head><body><h1>The <em>old</em> harbour</h1>"
        b"<p>Boats at dawn.</p><h3>Tides</h3><noscript>enable scripts</noscript>"
        b"<template>template words</template><script>document.write('more')</script><p>Fish.</p></body>")
    assert page == PageText(title="Harbour & river", headings="The old harbour\nTides",
                            body="The old harbour Boats at dawn. Tides Fish.")


def test_blocks_separate_words_and_inline_markup_does_not():
    page = page_text(b"<ul><li>one</li><li>two</li></ul><p>a<b>b</b>c<br>d</p><table><tr><td>x</td>"
                     b"<td>y</td></tr></table><div>in<span>line</span></div><div>next</div>")
    assert page is not None and page.body == "one two abc d x y inline next"


def test_whitespace_and_control_characters_become_one_space():
    page = page_text(b"<title>a\x01\x02b</title>"
                     b"<p>  many \t\n\r  spaces\x1b[2J and\x7f\xc2\x9bcontrols  </p>")
    assert page == PageText("a b", "", "many spaces [2J and controls")


def test_charsets_as_the_crawler_reads_them():
    latin = "<p>caf\xe9 na\xefve</p>".encode("cp1252")
    assert response_text(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=windows-1252\r\n\r\n",
                         latin).body == "café naïve"
    assert page_text(b'<meta charset="iso-8859-1"><p>caf\xe9</p>').body == "café"
    assert page_text("\ufeff<p>Grüße</p>".encode("utf-16-le")).body == "Grüße"
    assert page_text(b"<p>caf\xe9</p>").body == "café"  # not UTF-8: windows-1252


def test_content_codings_are_undone():
    body = gzip.compress("<title>Zipped</title><p>Über</p>".encode())
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Type: text/html\r\n\r\n"
    page = response_text(head, body)
    assert page == PageText("Zipped", "", "Über")


def test_a_page_without_text_gives_nothing():
    assert page_text(b"") is None
    assert page_text(b"<html><head><script>var x = 1</script></head><body>  </body></html>") is None
    assert page_text(b'<frameset><frame src="a.html"></frameset>') is None


def test_every_part_is_bounded():
    big = page_text(b"<title>" + b"t" * 5000 + b"</title>" + b"<h2>heading</h2>" * 5000
                    + b"<p>" + b"word " * 100_000 + b"</p>")
    assert big is not None
    assert big.title == "t" * MAX_TITLE
    assert len(big.headings) <= MAX_HEADINGS and big.headings.startswith("heading\nheading")
    assert MAX_BODY - len(" word") < len(big.body) <= MAX_BODY and big.body.endswith("word")


def test_a_long_page_keeps_its_text_in_order_across_parse_parts():
    body = b"".join(b"<p><b>w%d</b></p>" % i for i in range(3000))
    page = page_text(body)
    assert page is not None and page.body.split() == [f"w{i}" for i in range(3000)]
