"""Does an HTML page need scripts to show its content? The rule of ``crawl.capture = "auto"``.

The page decides, as fetched over HTTP (pure logic, bounded work). A page that runs no script
never needs a browser. A page that runs at least one (a ``<script>`` of a JavaScript type: no
``type``, ``module`` or a ``*javascript``/``*ecmascript`` type; JSON and template blocks do not
count) needs one when any of these holds, checked in this order:

1. an app root is empty: an element with ``id`` ``app``, ``root``, ``__next``, ``__nuxt``,
   ``___gatsby``, ``react-root`` or ``svelte``, or an ``<app-root>``, holding no element and no
   text (the mount point of a single-page app);
2. a ``<noscript>`` asks for JavaScript ("enable JavaScript", "JavaScript is required"...);
3. the body shows little text: under ``MIN_TEXT`` characters (whitespace aside) outside
   ``<script>``, ``<style>``, ``<noscript>`` and ``<template>``, or under ``SPARSE_TEXT``
   characters that are also under 1/``SPARSE_RATIO`` of the document's size (a shell of
   markup and inline code around a little text);
4. images wait for a script: an ``<img>`` with ``data-src`` or ``data-srcset`` and no ``src``
   or ``srcset`` (lazy loading done by a script).

A static page with a script (an analytics snippet, a menu toggle) shows its text without it and
is not rendered. The body is read up to ``MAX_READ`` bytes, decoded as link extraction decodes
it (``extract.html_as_utf8``) and parsed in ``extract``'s bounded parts, so time stays linear
in the size whatever the markup.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from archiver.web.extract import html_as_utf8, linear_parts
from archiver.web.http import media_type

MAX_READ = 2**20  # bytes of the body looked at
MIN_TEXT = 200  # characters of text below which a page with scripts is taken as built by them
SPARSE_TEXT = 1_000
SPARSE_RATIO = 20
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", ""})
APP_ROOTS = ("app", "root", "__next", "__nuxt", "___gatsby", "react-root", "svelte")
_QUERY = ":is(script, noscript, app-root, img[data-src], img[data-srcset], {})".format(
    ", ".join(f"[id='{name}']" for name in APP_ROOTS)
)
_HIDDEN = ["script", "style", "noscript", "template"]
_ASKS_FOR_SCRIPTS = re.compile(
    r"(?:enable|turn on|activate|allow|requires?|needs?|without)\W+(?:\w+\W+){0,3}?javascript"
    r"|javascript\W+(?:\w+\W+){0,3}?(?:required|disabled|enabled|needed|must)",
    re.I,
)


def _runs_script(node: LexborNode) -> bool:
    kind = media_type(node.attributes.get("type") or "")[0]
    return kind in ("", "module") or kind.endswith(("javascript", "ecmascript"))


def _is_empty(node: LexborNode) -> bool:
    """No element and no text inside (comments and whitespace aside)."""
    for child in node.iter(include_text=True):
        tag = child.tag or ""
        if not tag.startswith("-") or (tag == "-text" and (child.text_content or "").strip()):
            return False
    return True


def needs_scripts(body: bytes, content_type: str | None) -> str | None:
    """Why the HTML page ``body`` (content codings undone) needs scripts to show its content, in
    a few words, or None if it does not (or is not HTML). Never raises."""
    kind, charset = media_type(content_type)
    if kind not in HTML_TYPES:
        return None
    document = html_as_utf8(body[:MAX_READ], charset)
    scripts, text = 0, 0
    empty_root = asks = lazy = ""
    for prefix, part in linear_parts(document):
        tree = LexborHTMLParser(prefix + part)
        for node in tree.css(_QUERY):
            tag = node.tag
            if tag == "script":
                scripts += _runs_script(node)
            elif tag == "noscript":
                if not asks and _ASKS_FOR_SCRIPTS.search(node.text()):
                    asks = "noscript asks for JavaScript"
            elif tag == "img":
                attrs = node.attributes
                if not lazy and not ("src" in attrs or "srcset" in attrs):
                    lazy = "images set by scripts: <img data-src> without src"
            elif not empty_root and _is_empty(node):
                empty_root = "empty app root " + ("<app-root>" if tag == "app-root" else f"#{node.id}")
        root = tree.body
        if root is not None:
            tree.strip_tags(_HIDDEN)
            text += sum(map(len, root.text().split()))
    if not scripts:
        return None
    sparse = text < SPARSE_TEXT and text * SPARSE_RATIO < len(document)
    if empty_root or asks:
        return empty_root or asks
    if text < MIN_TEXT or sparse:
        return f"text built by scripts: {text} characters of text, {scripts} scripts"
    return lazy or None
