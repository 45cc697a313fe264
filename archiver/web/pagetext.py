"""The text of an archived HTML page, for the full-text index: title, headings and body (pure logic).

Bytes in, text out, with the crawler's own rules: the body is decoded as for link extraction
(``http.decode_body``: content codings under a size cap; ``extract.html_as_utf8``: byte-order
mark, the Content-Type charset, ``<meta charset>``, else UTF-8 or windows-1252) and parsed by
selectolax's Lexbor parser in the bounded parts ``extract`` uses, so time stays linear in the
size whatever the markup.

What is kept: the first ``<title>``, the text of ``<h1>``-``<h6>`` (one line each), and the
text of ``<body>`` without ``<script>``, ``<style>``, ``<noscript>`` and ``<template>``. Block
elements (paragraphs, list items, table cells, ``<br>``...) separate words, inline ones
(``<b>``, ``<a>``, ``<span>``) do not, as a browser lays the text out. Whitespace runs become
one space, control characters go. Each part is cut at its bound (``MAX_TITLE``,
``MAX_HEADINGS``, ``MAX_BODY`` characters), and parsing stops once the body is full.
"""

from __future__ import annotations

from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

from archiver.web.extract import html_as_utf8, linear_parts
from archiver.web.http import decode_body, head_fields, media_type

MAX_TITLE = 1_000
MAX_HEADINGS = 10_000
MAX_BODY = 100_000
# The decoded body read at most: with the parts' linear cost, under 3 s of the worst markup known.
MAX_DECODED = 8 * 2**20
_HIDDEN = ["script", "style", "noscript", "template"]
# Elements laid out as blocks (or line breaks): a word never runs across their edges.
_BLOCKS = (
    "address, article, aside, blockquote, br, caption, dd, details, dialog, div, dl, dt, fieldset, "
    "figcaption, figure, footer, form, h1, h2, h3, h4, h5, h6, header, hr, legend, li, main, nav, "
    "ol, optgroup, option, p, pre, section, summary, table, tbody, td, tfoot, th, thead, tr, ul"
)
_HEADINGS = "h1, h2, h3, h4, h5, h6"
# C0 and C1 controls, as spaces (``str.split`` then takes them with the whitespace).
_CONTROLS = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)], " ")


@dataclass(frozen=True)
class PageText:
    """What the full-text index keeps of one page: its title, its headings (one a line) and the
    text of its body, each with runs of whitespace as one space and within its bound."""

    title: str
    headings: str
    body: str


def response_text(http_head: bytes, payload: bytes) -> PageText | None:
    """The text of an archived HTML response from its HTTP head (Content-Type charset,
    Content-Encoding) and its payload as received; None if it holds no text. Never raises."""
    fields = head_fields(http_head)[1]
    return page_text(payload, fields.get(b"content-type", b"").decode("latin-1"),
                     fields.get(b"content-encoding", b"").decode("latin-1"))


def page_text(body: bytes, content_type: str | None = None, content_encoding: str | None = None
              ) -> PageText | None:
    """The text of an HTML body as served (``content_type`` gives the charset); None if it holds
    no text at all. Never raises: any bytes are a document."""
    charset = media_type(content_type)[1]
    document = html_as_utf8(decode_body(body, content_encoding, MAX_DECODED), charset)
    title = ""
    headings: list[str] = []
    heading_chars = 0
    texts: list[str] = []
    body_chars = 0
    for prefix, part in linear_parts(document):
        tree = LexborHTMLParser(prefix + part)
        if not title and (found := tree.css_first("title")) is not None:
            title = _clean(found.text())[:MAX_TITLE]
        root = tree.body
        if root is None:
            continue
        tree.strip_tags(_HIDDEN)
        _separate_blocks(root)
        for node in root.css(_HEADINGS):
            if heading_chars < MAX_HEADINGS and (text := _clean(node.text())):
                headings.append(text)
                heading_chars += len(text) + 1
        text = _clean(root.text())
        if text:
            texts.append(text)
            body_chars += len(text) + 1
        if body_chars >= MAX_BODY:
            break
    page = PageText(title, "\n".join(headings)[:MAX_HEADINGS], " ".join(texts)[:MAX_BODY].rstrip())
    return page if page.title or page.headings or page.body else None


def _separate_blocks(root: LexborNode) -> None:
    """A space before and after every block element, so that its text stays apart from its
    neighbours' once the text nodes are joined."""
    for node in root.css(_BLOCKS):
        node.insert_before(" ")
        node.insert_after(" ")


def _clean(text: str) -> str:
    """Runs of whitespace and control characters as one space, none at the ends."""
    return " ".join(text.translate(_CONTROLS).split())
