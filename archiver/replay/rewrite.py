"""Server-side rewriting for replay (pure logic, no I/O): archive URLs, HTML, CSS, archived heads.

Archive URLs have the Wayback form ``<prefix>/web/<14 digits><modifier>/<absolute url>``. The
modifier says how the link is used, as in pywb and the Wayback Machine: none for pages (they
get the banner), ``if_``/``fr_`` for iframes and frames (HTML without banner), ``im_`` images,
``cs_`` stylesheets, ``js_`` scripts, ``oe_`` objects, embeds and media, ``id_`` the original
bytes. The server uses it only to leave the banner out of everything but a top-level page.

HTML is rewritten in place: a tokenizer written after the HTML Standard's (section 13.2.5) walks
the original markup, skipping comments, doctypes and raw-text elements, and only the values of
link-bearing attributes are replaced; every other byte stays as it was. Serialising a parsed tree
(selectolax) would instead normalise the whole document (quotes, entities, implied tags, broken
markup repaired), which is not what was archived. Attribute values are read with the HTML
Standard's entity rules for attributes (``&copy=1`` in a query stays literal). The link kinds are
those of :mod:`archiver.web.extract`, plus media (``video``/``audio``/``source``/``track``, poster),
forms and SVG ``image``. Relative links resolve against the first ``<base href>`` as there.
:func:`prepare_html` also reports the embeds it rewrote (every link but navigation, see
:class:`Embed`), for archiver.replay.coherence, before the banner goes in. It also puts the client
script's element first (:func:`client_tag`; what the script does is in client.js), hands inline
scripts, event handler attributes and ``javascript:`` URLs to archiver.replay.scripts, and
rewrites ``iframe srcdoc`` documents as documents; ``<template>`` contents are markup like any other.

Documents come out in UTF-8, decoded as :mod:`archiver.web.extract` decodes them (BOM, HTTP charset,
``<meta>`` prescan, UTF-8 or windows-1252); the server labels them ``charset=utf-8``, which wins
over any ``<meta charset>`` inside (HTML Standard 13.2.3.1). Bytes that are not valid UTF-8 in a
UTF-8 document pass through unchanged (``surrogateescape``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.entities import html5
from itertools import islice

from archiver.replay.scripts import rewrite_js, rewrite_js_body
from archiver.store.catalogkeys import rendering_of
from archiver.web import urls

# Shared with link extraction so that rewriting sees exactly the links the crawler followed.
from archiver.web.extract import SRCSET_CANDIDATE, css_references, html_as_utf8, refresh_url_span
from archiver.web.extract import decode_text as css_text
from archiver.web.http import decode_body
from archiver.web.timestamps import to_datetime

PAGE, IDENTITY = "", "id_"
IMAGE, STYLE, SCRIPT, IFRAME, FRAME, OBJECT = "im_", "cs_", "js_", "if_", "fr_", "oe_"
# mp_ is pywb's name for a page shown inside its frame; taken here as a page.
MODIFIERS = frozenset((PAGE, IDENTITY, "mp_", IMAGE, STYLE, SCRIPT, IFRAME, FRAME, OBJECT))
BANNERED = frozenset((PAGE, "mp_"))
# A short timestamp stands for the earliest instant it names, as in pywb and the Wayback Machine
# ("2026" is 2026-01-01 00:00:00); a digit that starts the month or day picks the first month or
# day it can begin ("20261" is October, "2026113" the 30th).
_PAD = "10000101000000"
_WEB_PATH = re.compile(r"(?:(\*\d*)|(\d+)(\*\d*|[a-z]{2}_)?)/(.*)", re.S)
_HTTP = re.compile(r"(https?):/*", re.I)
# A scheme other than http(s); "host:8080/..." is a host and port, not a scheme.
_OTHER_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:(?!\d+(?:[/?#]|\Z))")
# The URL parser strips leading and trailing C0 controls and spaces (WHATWG URL).
_C0_AND_SPACE = "".join(map(chr, range(0x21)))


@dataclass(frozen=True)
class WebTarget:
    """What a ``/web/`` path asks for.

    ``kind`` is "memento" (``<ts><mod>/<url>``), "list" (``*/<url>``, or ``<digits>*/<url>`` for
    the captures whose timestamp starts with ``within``), "prefix" (``*/<url>*``) or "timegate"
    (``<url>`` alone). ``timestamp`` is the requested instant padded to 14 digits, ``exact``
    whether all 14 were given; for a list, where its page starts (``[<digits>]*<14 digits>/<url>``)
    or None for its first page.
    """

    kind: str
    url: str
    timestamp: str | None = None
    exact: bool = False
    modifier: str = PAGE
    within: str = ""


def archive_url(prefix: str, timestamp: str, modifier: str, url: str) -> str:
    """The replay address of ``url`` at ``timestamp``, e.g. ``/web/20261122000000im_/http://x/a.png``."""
    return f"{prefix}/web/{timestamp}{modifier}/{url}"


def pad_timestamp(digits: str) -> str:
    """1 to 14 digits -> a valid 14-digit timestamp, the earliest instant they name (ValueError)."""
    if not (1 <= len(digits) <= 14 and digits.isascii() and digits.isdigit()):
        raise ValueError(f"bad timestamp {digits!r}: give 1 to 14 digits YYYYMMDDhhmmss")
    full = digits + _PAD[len(digits) :]
    if len(digits) in (5, 7) and digits[-1] != "0":
        full = full[: len(digits)] + "0" + full[len(digits) + 1 :]
    try:
        to_datetime(full)
    except ValueError:
        raise ValueError(f"bad timestamp {digits!r}: {full} is not a date and time") from None
    return full


def requested_url(text: str) -> str:
    """The archived URL a request names, normalised; ValueError if it is not an http(s) URL or
    the record of the rendering of one (``urn:screenshot:<url>``, ``urn:text:<url>``).

    Accepts what people and old links write: no scheme (``example.org/a``, taken as http) and
    a scheme whose ``//`` a proxy or browser merged into one slash (``http:/example.org``).
    """
    text = text.strip(_C0_AND_SPACE)
    if not text:
        raise ValueError("no URL given: add one to the path, e.g. /web/2026/http://example.org/")
    if (rendering := rendering_of(text)) is not None:  # a page's screenshot or rendered text
        prefix, page = rendering
        if rendering_of(page) is not None:
            raise ValueError(f"not a page's rendering: {text[:200]!r}")
        return prefix + requested_url(page)
    if match := _HTTP.match(text):
        candidate = f"{match.group(1)}://{text[match.end() :]}"
    else:
        candidate = text if _OTHER_SCHEME.match(text) else "http://" + text
    url = urls.normalize(candidate)
    if url is None:
        raise ValueError(f"not an http or https URL: {text[:200]!r}")
    return url


def parse_web_path(rest: str) -> WebTarget:
    """Parse what follows ``/web/`` (the query string already appended); ValueError if malformed."""
    match = _WEB_PATH.fullmatch(rest)
    if match is None:
        return WebTarget("timegate", requested_url(rest))
    star, digits, mod, tail = match.groups()
    if star == "*" and tail.endswith("*"):
        return WebTarget("prefix", requested_url(tail[:-1]))
    if star or (mod and mod[0] == "*"):
        page = (star or mod)[1:]
        if digits:
            pad_timestamp(digits)  # digits that name no date are refused, as for a memento
        if page and len(page) != 14:
            raise ValueError(f"a page of captures starts at a 14-digit timestamp, not {page!r}")
        return WebTarget("list", requested_url(tail), page or None, within=digits or "")
    timestamp = pad_timestamp(digits)
    mod = mod or PAGE
    if mod not in MODIFIERS:
        raise ValueError(f"unknown modifier {mod!r}: use one of {', '.join(sorted(MODIFIERS - {''}))}")
    return WebTarget("memento", requested_url(tail), timestamp, len(digits) == 14, mod)


# --- links -----------------------------------------------------------------------------------


# A reference that names its own scheme or starts at the root: its archive URL is at most its own
# text (percent-encoded) plus the archive prefix and one origin. Any other reference is relative to
# the base's path, which it brings along, so a long base and many short links would multiply the
# page; their growth is drawn from an allowance (_Links) instead.
_NOT_PATH_RELATIVE = re.compile(r"[/\\]|[A-Za-z][A-Za-z0-9+.\-]*:[/\\]")
_ALLOWANCE = 2**21
_ALLOWANCE_PER_CHARACTER = 4


@dataclass(frozen=True)
class Embed:
    """A URL a document loads itself (image, stylesheet, script, frame, media), absolute and
    normalised, with the modifier its rewritten link asks for: what the page is assembled from."""

    url: str
    modifier: str


# Modifiers of links a page loads by itself; pages (a, area, form, base, refresh) are navigation.
EMBEDDING = frozenset((IMAGE, STYLE, SCRIPT, IFRAME, FRAME, OBJECT))


class _Links:
    """Turns raw link values of one document into archive URLs.

    Path-relative references may add at most ``allowance`` characters in all; past that they are
    left as written, which browsers resolve against the document's (or the rewritten base's)
    archive URL, the same capture under a plainer modifier.
    """

    def __init__(self, base: str, timestamp: str, prefix: str, size: int = 0) -> None:
        self.base = base
        self.timestamp = timestamp
        self.prefix = prefix
        self.allowance = _ALLOWANCE + _ALLOWANCE_PER_CHARACTER * size
        self.embeds: list[Embed] = []  # what rewrite sent into the archive as embeds, in order

    def rewrite(self, raw: str, modifier: str, navigation: bool = False) -> str | None:
        """The archive URL for ``raw``; None to leave it as it is (a fragment, mailto:, data:...).
        ``navigation``: the document itself goes there (a refresh), whatever the modifier."""
        value = raw.strip(_C0_AND_SPACE)
        if not value or value[0] == "#":
            return None
        relative = not _NOT_PATH_RELATIVE.match(value)
        if relative and len(self.base) > self.allowance:
            return None  # spent: not even worth resolving (which costs the base's length)
        cut = value.find("#")
        fragment = value[cut:] if cut >= 0 else ""
        target = urls.normalize(value[:cut] if cut >= 0 else value, self.base)
        if target is None:
            return None
        new = archive_url(self.prefix, self.timestamp, modifier, target) + fragment
        if relative:
            growth = len(new) - len(raw)
            if growth > self.allowance:
                return None
            self.allowance -= max(growth, 0)
        if modifier in EMBEDDING and not navigation:
            self.embeds.append(Embed(target, modifier))
        return new


# --- CSS -------------------------------------------------------------------------------------

# What a URL written into CSS must not hold raw, whatever it contains: quotes, backslashes and line
# breaks end a string; parentheses, white space and controls end an unquoted url(); and "<" or ">"
# could close the <style> element the CSS sits in (its raw text ends at "</style"), or open markup
# in an SVG <style>. Each becomes a hexadecimal CSS escape, which every CSS parser reads back.
_CSS_QUOTED = re.compile(r"[\"'\\\n\r\f<>]")
_CSS_UNQUOTED = re.compile(r"[\"'()\\\s<>\x00-\x1f\x7f]")


def _css_escape(value: str, unquoted: bool) -> str:
    pattern = _CSS_UNQUOTED if unquoted else _CSS_QUOTED
    return pattern.sub(lambda m: f"\\{ord(m[0]):x} ", value)


def _css(text: str, links: _Links) -> str:
    """A stylesheet with every ``url()`` and ``@import`` pointing into the archive."""
    out: list[str] = []
    last = 0
    for match, group, value in css_references(text):
        new = links.rewrite(value, IMAGE if group <= 3 else STYLE)
        if new is None:
            continue
        # Groups 3 and 6 are unquoted url( ) values; the others sit inside quotes.
        out += [text[last : match.start(group)], _css_escape(new, group in (3, 6))]
        last = match.end(group)
    out.append(text[last:])
    return "".join(out)


def rewrite_css(body: bytes, *, url: str, timestamp: str, prefix: str, charset: str | None = None) -> bytes:
    """A stylesheet (as stored, encoding undone) rewritten, in UTF-8; never raises, size bounded
    as rewrite_html's."""
    text = css_text(body, charset)
    return _css(text, _Links(url, timestamp, prefix, len(text))).encode("utf-8", "surrogateescape")


# --- HTML tokenizer --------------------------------------------------------------------------

_WS = "\t\n\f\r "
_ATTR = re.compile(
    r"""[\t\n\f\r /]*+([^\t\n\f\r />][^\t\n\f\r />=]*+)
        (?:[\t\n\f\r ]*+=[\t\n\f\r ]*+("[^"]*"|'[^']*'|[^\t\n\f\r >"'][^\t\n\f\r >]*+))?""",
    re.X,
)
_TAG = re.compile(
    r"""<(/?)([a-zA-Z][^\t\n\f\r />]*+)
        ((?:[\t\n\f\r /]*+(?>[^\t\n\f\r />][^\t\n\f\r />=]*+
          (?:[\t\n\f\r ]*+=[\t\n\f\r ]*+(?:"[^"]*"|'[^']*'|[^\t\n\f\r >"'][^\t\n\f\r >]*+))?))*+)
        [\t\n\f\r /]*+>""",
    re.X,
)
_COMMENT = re.compile(r"<!--(?:>|->|[\s\S]*?(?:--!?>|\Z))")
# Elements whose content is text, not markup (HTML Standard 13.1.2.1 raw text and escapable raw
# text, plus noscript: scripting is on in replay); plaintext never ends.
_RAW_TEXT = frozenset(
    ("script", "style", "xmp", "iframe", "noembed", "noframes", "noscript", "textarea", "title")
)
# Start tags that do not open the body when they come first (HTML Standard 13.2.6.4.4-6).
_HEAD_TAGS = frozenset(
    ("html", "head", "title", "meta", "link", "base", "style", "script", "noscript", "template")
)
# Script element types that hold JavaScript (HTML Standard 4.12.1.1: a JavaScript MIME type
# essence, no type, or "module"); data blocks (JSON, templates) are left alone.
_JAVASCRIPT_TYPES = frozenset(
    ("", "module", "text/javascript", "application/javascript", "application/x-javascript",
     "text/ecmascript", "application/ecmascript", "text/jscript", "text/livescript")
)
# srcdoc documents inside srcdoc documents are rewritten this deep; deeper ones are left as they are.
_SRCDOC_DEPTH = 4
_LONGEST_ENTITY = max(map(len, html5))
_CHARREF = re.compile(r"&(?:#[xX]([0-9a-fA-F]+);?|#([0-9]+);?|([A-Za-z][A-Za-z0-9]*;?))")

# (tag, attribute) -> modifier of the link it holds; "link/href" depends on rel.
_URL_ATTRS: dict[str, tuple[tuple[str, str], ...]] = {
    "a": (("href", PAGE),),
    "area": (("href", PAGE),),
    "form": (("action", PAGE),),
    "button": (("formaction", PAGE),),
    "img": (("src", IMAGE), ("lowsrc", IMAGE)),
    "image": (("href", IMAGE), ("xlink:href", IMAGE)),
    "input": (("src", IMAGE), ("formaction", PAGE)),
    "script": (("src", SCRIPT),),
    "frame": (("src", FRAME),),
    "iframe": (("src", IFRAME),),
    "embed": (("src", OBJECT),),
    "object": (("data", OBJECT),),
    "applet": (("codebase", OBJECT),),
    "video": (("src", OBJECT), ("poster", IMAGE)),
    "audio": (("src", OBJECT),),
    "source": (("src", OBJECT),),
    "track": (("src", OBJECT),),
    "body": (("background", IMAGE),),
    "table": (("background", IMAGE),),
    "td": (("background", IMAGE),),
    "th": (("background", IMAGE),),
}
_SRCSET = {"img": "srcset", "source": "srcset", "link": "imagesrcset"}


def _attr_unescape(value: str) -> str:
    """An attribute value with its character references decoded as the HTML Standard does."""
    if "&" not in value:
        return value

    def one(match: re.Match[str]) -> str:
        name = match.group(3)
        if name is None:
            return html.unescape(match.group(0))  # numeric: html applies the spec's replacements
        # Only the longest name known can match: never try more (a long run of letters is no name).
        for end in range(min(len(name), _LONGEST_ENTITY), 1, -1):
            known = name[:end]
            if known in html5:
                if not known.endswith(";"):
                    after = name[end : end + 1] or value[match.end() : match.end() + 1]
                    # In attributes a legacy name without ";" before "=" or a letter stays text.
                    if after == "=" or (after.isascii() and after.isalnum()):
                        return match.group(0)
                return html5[known] + name[end:]
        return match.group(0)

    return _CHARREF.sub(one, value)


def _attr_quote(value: str, quote: str) -> str:
    value = value.replace("&", "&amp;")
    if quote == "'":
        return "'" + value.replace("'", "&#39;") + "'"
    return '"' + value.replace('"', "&quot;") + '"'


@dataclass
class _Attr:
    value: str  # decoded
    start: int  # span of the raw value, quotes included (start == end: no value)
    end: int
    quote: str


def _attributes(text: str, start: int, end: int) -> dict[str, _Attr]:
    """Attributes of one tag, the first of each name (later duplicates are dropped by parsers)."""
    found: dict[str, _Attr] = {}
    for match in _ATTR.finditer(text, start, end):
        name = match.group(1).lower()
        if name in found:
            continue
        raw = match.group(2)
        if raw is None:
            found[name] = _Attr("", match.end(), match.end(), "")
            continue
        quote = raw[0] if raw[0] in "\"'" else ""
        inner = raw[1:-1] if quote else raw
        found[name] = _Attr(_attr_unescape(inner), match.start(2), match.end(2), quote)
    return found


def rewrite_refresh(content: str, links: _Links, modifier: str = PAGE) -> str | None:
    """A refresh value (``5; url=...``) with its URL rewritten; None if it has none to rewrite.
    ``modifier`` is the page's: a refresh navigates the frame it is in, so a frame's (``if_``)
    stays a frame's."""
    span = refresh_url_span(content)
    if span is None:
        return None
    new = links.rewrite(content[span[0] : span[1]], modifier, navigation=True)
    return None if new is None else content[: span[0]] + new + content[span[1] :]


def _srcset(value: str, links: _Links) -> str | None:
    out: list[str] = []
    last = 0
    for match in SRCSET_CANDIDATE.finditer(value):
        candidate = match.group(1).rstrip(",")
        new = links.rewrite(candidate, IMAGE)
        if new is not None:
            out += [value[last : match.start(1)], new]
            last = match.start(1) + len(candidate)
    if not out:
        return None
    out.append(value[last:])
    return "".join(out)


def _link_modifier(attrs: dict[str, _Attr]) -> str:
    rel = attrs["rel"].value.lower().split() if "rel" in attrs else []
    kind = attrs["as"].value.strip().lower() if "as" in attrs else ""
    if "stylesheet" in rel or kind == "style":
        return STYLE
    if any("icon" in r for r in rel) or kind in ("image", "font"):
        return IMAGE
    if "modulepreload" in rel or kind == "script":
        return SCRIPT
    return PAGE


class _Document:
    """One pass over an HTML document: the links found, rewritten once its base is known."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.base: str | None = None  # the first <base href>, raw
        self.banner_at: int | None = None
        self.frameset = False
        self.client_at: int | None = None  # the end of <head ...>, or of a first <html ...>
        self._before_head = True
        # What to rewrite: (what, attribute or None, modifier, start, end); see _edit.
        self.found: list[tuple[str, _Attr | None, str, int, int]] = []

    def scan(self) -> None:
        for name, start, name_end, end in self._tags():
            if self._before_head:
                if name == "html" and self.client_at is None:
                    self.client_at = end
                elif name != "html":
                    self._before_head = False
                    if name == "head":
                        self.client_at = end
            if self.banner_at is None and not self.frameset:
                if name == "body":
                    self.banner_at = end
                elif name == "frameset":
                    self.frameset = True
                elif name not in _HEAD_TAGS:
                    self.banner_at = start
            attrs = _attributes(self.text, name_end, end - 1)
            if attrs:
                self._collect(name, attrs)

    def _tags(self) -> Iterator[tuple[str, int, int, int]]:
        """Start tags as (name, start, end of name, end of tag), skipping what is not markup."""
        text = self.text
        pos = 0
        while (lt := text.find("<", pos)) >= 0:
            after = text[lt + 1 : lt + 2]
            if text.startswith("<!--", lt):
                comment = _COMMENT.match(text, lt)  # always matches: "<!--" up to the end at most
                pos = comment.end() if comment else len(text)
            elif after in ("!", "?") or (after == "/" and not _is_letter(text[lt + 2 : lt + 3])):
                close = text.find(">", lt)  # doctype or bogus comment; "</>" is dropped
                pos = len(text) if close < 0 else close + 1
            elif after == "/" or _is_letter(after):
                match = _TAG.match(text, lt)
                if match is None:
                    return  # a tag cut by the end of the document: parsers drop it
                pos = match.end()
                if match.group(1):
                    continue
                name = match.group(2).lower()
                yield name, lt, match.end(2), pos
                if name == "plaintext":
                    return
                if name in _RAW_TEXT:
                    closing = re.compile(rf"</{name}[\t\n\f\r />]", re.I).search(text, pos)
                    end = len(text) if closing is None else closing.start()
                    if name == "style":
                        self.found.append(("css", None, STYLE, pos, end))
                    elif name == "script" and _holds_javascript(text, match.end(2), pos - 1):
                        self.found.append(("js", None, SCRIPT, pos, end))
                    pos = end
            else:
                pos = lt + 1

    def _collect(self, name: str, attrs: dict[str, _Attr]) -> None:
        found = self.found
        for attr, modifier in _URL_ATTRS.get(name, ()):
            if attr in attrs:
                found.append(("url", attrs[attr], modifier, 0, 0))
        href = attrs.get("href")
        if name == "link" and href is not None:
            found.append(("url", href, _link_modifier(attrs), 0, 0))
        elif name == "base" and href is not None:
            if self.base is None:
                self.base = href.value  # only the first <base href> counts (HTML 4.2.3)
            found.append(("url", href, PAGE, 0, 0))
        elif name == "meta" and "content" in attrs and "http-equiv" in attrs:
            if attrs["http-equiv"].value.strip().lower() == "refresh":
                found.append(("refresh", attrs["content"], PAGE, 0, 0))
        elif name == "applet" and "/" in attrs.get("code", _NO_ATTR).value:
            # A code value that is a path rather than a class name is loaded like a link.
            found.append(("url", attrs["code"], OBJECT, 0, 0))
        srcset = attrs.get(_SRCSET.get(name, ""))
        if srcset is not None:
            found.append(("srcset", srcset, IMAGE, 0, 0))
        style = attrs.get("style")
        if style is not None and "url(" in style.value.lower():
            found.append(("style", style, IMAGE, 0, 0))
        if name == "iframe" and "srcdoc" in attrs:
            found.append(("srcdoc", attrs["srcdoc"], IFRAME, 0, 0))
        found += [("handler", attr, SCRIPT, 0, 0) for key, attr in attrs.items() if key.startswith("on")]

    def edits(self, links: _Links, client: str | None, depth: int, own: str) -> list[tuple[int, int, str]]:
        """Replacements (start, end, text) for every link and script found, in document order;
        ``own``: the document's modifier (see rewrite_refresh)."""
        out = []
        for what, attr, modifier, start, end in self.found:
            if attr is None:
                raw = self.text[start:end]
                rewritten = _css(raw, links) if what == "css" else rewrite_js(raw)
                if rewritten != raw:
                    out.append((start, end, rewritten))
                continue
            if what == "url" and _JAVASCRIPT_URL.match(attr.value):
                new = _changed(attr.value, rewrite_js(attr.value))
            elif what == "url":
                new = links.rewrite(attr.value, modifier)
            elif what == "handler":
                new = _changed(attr.value, rewrite_js(attr.value))
            elif what == "srcdoc":
                new = _srcdoc(attr.value, links, client, depth)
            elif what == "refresh":
                new = rewrite_refresh(attr.value, links, own)
            elif what == "srcset":
                new = _srcset(attr.value, links)
            else:
                new = _css(attr.value, links)
                new = None if new == attr.value else new
            if new is not None:
                out.append((attr.start, attr.end, _attr_quote(new, attr.quote)))
        return sorted(out, key=lambda edit: edit[0])


_NO_ATTR = _Attr("", 0, 0, "")
_JAVASCRIPT_URL = re.compile(r"[\x00-\x20]*javascript:", re.I)


def _changed(old: str, new: str) -> str | None:
    return None if new == old else new


def _holds_javascript(text: str, start: int, end: int) -> bool:
    """Whether a script start tag (its attributes between start and end) holds JavaScript."""
    kind = _attributes(text, start, end).get("type")
    return kind is None or kind.value.strip(_WS).lower() in _JAVASCRIPT_TYPES


def _srcdoc(document: str, links: _Links, client: str | None, depth: int) -> str | None:
    """An iframe's srcdoc document rewritten as a document of its own (it resolves links
    against its parent's base URL, and a refresh stays in the frame), with the client script
    and without a banner."""
    if depth >= _SRCDOC_DEPTH:
        return None
    inner = prepare_html_text(
        document, url=links.base, timestamp=links.timestamp, prefix=links.prefix, client=client,
        depth=depth + 1, modifier=IFRAME,
    )  # fmt: skip
    links.embeds += inner.embeds
    return _changed(document, inner.render())


def _is_letter(char: str) -> bool:
    return char.isascii() and char.isalpha()


def _after_doctype(text: str) -> int:
    stripped = text.lstrip(_WS)
    if stripped[:9].lower() == "<!doctype":
        close = text.find(">", len(text) - len(stripped))
        return len(text) if close < 0 else close + 1
    return 0


def client_tag(src: str, url: str, timestamp: str) -> str:
    """The element that loads the client script (``src``) into a replayed document of ``url``."""
    return (
        f'<script src="{html.escape(src)}" data-timestamp="{timestamp}" '
        f'data-url="{html.escape(url)}"></script>'
    )


@dataclass(frozen=True)
class RewrittenHtml:
    """A document's rewrite before any banner goes in: its edits (the client script's element
    among them, if asked for), where a banner would go (None in a frameset document) and the
    embeds its links send into the archive (see Embed)."""

    text: str
    edits: list[tuple[int, int, str]]
    banner_at: int | None
    embeds: list[Embed]

    def render(self, banner: str | None = None) -> str:
        """The rewritten text, with ``banner`` inserted where it goes."""
        before, after = self.parts()
        return before if after is None else before + (banner or "") + after

    def parts(self) -> tuple[str, str | None]:
        """The rewritten text split where the banner goes (after any edit at that place, such as
        the client script's element); None after it when the document takes no banner."""
        at = self.banner_at
        out: list[str] = []
        cut = None
        last = 0
        for start, end, new in self.edits:
            if cut is None and at is not None and start > at:
                out.append(self.text[last:max(at, last)])
                last, cut = max(at, last), len(out)
            out += [self.text[last:start], new]
            last = end
        if cut is None and at is not None:
            out.append(self.text[last:max(at, last)])
            last, cut = max(at, last), len(out)
        out.append(self.text[last:])
        if cut is None:
            return "".join(out), None
        return "".join(out[:cut]), "".join(out[cut:])

    def to_bytes(self, banner: str | None = None) -> bytes:
        """:meth:`render` in UTF-8, undecodable input bytes passed through."""
        return self.render(banner).encode("utf-8", "surrogateescape")


def prepare_html_text(
    text: str, *, url: str, timestamp: str, prefix: str, client: str | None = None, depth: int = 0,
    modifier: str = PAGE,
) -> RewrittenHtml:
    """One pass over an HTML document (text): its link and script edits, the banner's place and
    its embeds. ``client``: the client script's URL, to load it first (see :func:`client_tag`).
    ``modifier``: the one the document is served with, which a meta refresh keeps.

    The client script goes right after ``<head ...>``, or after a first ``<html ...>``, or at the
    start (after any doctype): before any script of the page. The banner goes right after
    ``<body ...>``; without a body tag, before the first element that would open the body, or at
    the start. A frameset document gets no banner: content in front of ``<frameset>`` would make
    browsers drop the frames. Inline scripts, event handler attributes and ``javascript:`` URLs
    get archiver.replay.scripts' rewriting; ``srcdoc`` documents are rewritten as documents.
    """
    doc = _Document(text)
    doc.scan()
    base = urls.normalize(doc.base, url) if doc.base is not None else None  # None: no URL, no base
    links = _Links(base or url, timestamp, prefix, len(text))
    edits = doc.edits(links, client, depth, modifier)
    if client is not None:
        at = doc.client_at if doc.client_at is not None else _after_doctype(text)
        edits = sorted([(at, at, client_tag(client, url, timestamp)), *edits], key=lambda edit: edit[0])
    banner_at = doc.banner_at if doc.banner_at is not None else _after_doctype(text)
    return RewrittenHtml(text, edits, None if doc.frameset else banner_at, links.embeds)


def prepare_html(body: bytes, *, url: str, timestamp: str, prefix: str, charset: str | None = None,
                 client: str | None = None, modifier: str = PAGE) -> RewrittenHtml:
    """:func:`prepare_html_text` of a document as stored (content-coding undone), decoded as
    :func:`rewrite_html` decodes it; never raises."""
    text = html_as_utf8(body, charset).decode("utf-8", "surrogateescape")
    return prepare_html_text(text, url=url, timestamp=timestamp, prefix=prefix, client=client,
                             modifier=modifier)


def rewrite_html_text(text: str, *, url: str, timestamp: str, prefix: str, banner: str | None = None,
                      modifier: str = PAGE) -> str:
    """An HTML document (text) with its links pointing into the archive and ``banner`` inserted
    (where :func:`prepare_html_text` says)."""
    page = prepare_html_text(text, url=url, timestamp=timestamp, prefix=prefix, modifier=modifier)
    return page.render(banner)


def rewrite_html(
    body: bytes,
    *,
    url: str,
    timestamp: str,
    prefix: str,
    charset: str | None = None,
    banner: str | None = None,
    client: str | None = None,
) -> bytes:
    """An HTML document (as stored, content-coding undone) rewritten, in UTF-8.

    Never raises, whatever the bytes and charset; the result is at most about 32 times the body's
    size plus the relative links' allowance (see _Links).
    """
    page = prepare_html(body, url=url, timestamp=timestamp, prefix=prefix, charset=charset, client=client)
    return page.to_bytes(banner)


# --- one archived document, as replay serves it ----------------------------------------------

HTML, CSS, SCRIPT_FILE = "html", "css", "script"


class NotRewritten(Exception):
    """Why a document is served as archived instead of rewritten (the message says)."""


@dataclass(frozen=True)
class PageEmbeds:
    """A page's distinct embeds (each embedded URL once, at its first place): the first of them,
    as many as were kept, and how many there are."""

    first: list[Embed]
    count: int


@dataclass(frozen=True)
class Rewritten:
    """A document rewritten by :func:`rewrite_document`, in UTF-8: ``before`` and ``after`` the
    banner's place (``after`` None: the document takes no banner), and its embeds."""

    before: bytes
    after: bytes | None
    embeds: PageEmbeds


def rewrite_document(body: bytes, *, kind: str, coding: str, limit: int, url: str, timestamp: str,
                     charset: str | None, client: str, embeds_kept: int,
                     modifier: str = PAGE, callback: tuple[str, str] | None = None) -> Rewritten | None:
    """The archived payload ``body`` (with the Content-Encoding ``coding``) of an HTML document,
    a stylesheet or a script file (``kind``), rewritten for replay at ``timestamp`` with links as
    paths, served with ``modifier``; None for a script with nothing to rewrite. A script's JSONP
    ``callback`` (captured name, asked name) is renamed (scripts.rewrite_js_body). NotRewritten if
    it is larger than ``limit`` bytes with its codings undone. Pure: the replay runs it in a
    worker process."""
    decoded = decode_body(body, coding, limit + 1)
    if len(decoded) > limit:
        raise NotRewritten(f"larger than replay.max_rewrite_size ({limit} bytes) once decoded")
    if kind == CSS:
        return Rewritten(rewrite_css(decoded, url=url, timestamp=timestamp, prefix="", charset=charset),
                         None, PageEmbeds([], 0))
    if kind == HTML:
        page = prepare_html(decoded, url=url, timestamp=timestamp, prefix="", charset=charset, client=client,
                            modifier=modifier)
        before, after = page.parts()
        distinct: dict[str, Embed] = {}  # each embedded URL once, at its first place
        for embed in page.embeds:
            distinct.setdefault(embed.url, embed)
        return Rewritten(before.encode("utf-8", "surrogateescape"),
                         None if after is None else after.encode("utf-8", "surrogateescape"),
                         PageEmbeds(list(islice(distinct.values(), embeds_kept)), len(distinct)))
    script = rewrite_js_body(decoded, charset, callback)
    return None if script is None else Rewritten(script, None, PageEmbeds([], 0))


# --- archived HTTP heads ---------------------------------------------------------------------

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_STATUS = re.compile(rb"HTTP/\d(?:\.\d)?[ \t]+(\d{3})\b")
# Headers served as archived: they describe the body and are safe on the archive's origin.
# Others (Set-Cookie, CSP, HSTS, caching, Link...) would act on the archive itself; all are also
# kept as X-Archive-Orig-<name>, as pywb and the Wayback Machine do.
_PASSED = frozenset(("content-type", "content-language", "content-disposition", "content-encoding"))
_RENAMED = {"x-archiver-transfer-encoding": "Transfer-Encoding"}


def parse_head(head: bytes) -> tuple[int | None, list[tuple[str, str]]]:
    """(status, headers) of an archived HTTP response head; (None, []) when there is none."""
    lines = head.split(b"\n")
    match = _STATUS.match(lines[0].strip()) if lines else None
    status = int(match.group(1)) if match else None
    headers = []
    for line in lines[1:]:
        name, sep, value = line.decode("latin-1").partition(":")
        if sep and _TOKEN.fullmatch(name):
            headers.append((name, value.strip()))
    return status, headers


def header(headers: list[tuple[str, str]], name: str) -> str | None:
    """The first value of ``name`` (case-insensitive) in a header list."""
    name = name.lower()
    return next((v for k, v in headers if k.lower() == name), None)


def replay_headers(
    headers: list[tuple[str, str]],
    *,
    rewritten: bool,
    location: str | None,
    refresh: Callable[[str], str | None],
) -> list[tuple[str, str]]:
    """The headers to serve with an archived response.

    ``rewritten``: the body was rewritten (decoded, UTF-8): Content-Encoding is dropped and the
    charset set to UTF-8. ``location`` replaces an archived Location; ``refresh`` rewrites a
    Refresh header's value. Values that are not valid in a header are left out.
    """
    out: list[tuple[str, str]] = []
    for name, value in headers:
        if _BAD_VALUE.search(value):
            continue
        lower = name.lower()
        out.append(("X-Archive-Orig-" + _RENAMED.get(lower, name), value))
        if lower in _PASSED:
            if not rewritten:
                out.append((name, value))
            elif lower == "content-type":
                out.append((name, value.split(";")[0].strip() + "; charset=utf-8"))
        elif lower == "refresh":
            new = refresh(value)
            if new is not None:
                out.append((name, new))
    if location is not None:
        out.append(("Location", location))
    return out


def refresher(url: str, timestamp: str, prefix: str, modifier: str = PAGE) -> Callable[[str], str | None]:
    """A rewriter of Refresh header values for a capture of ``url`` served with ``modifier``."""
    links = _Links(url, timestamp, prefix)
    return lambda value: rewrite_refresh(value, links, modifier)
