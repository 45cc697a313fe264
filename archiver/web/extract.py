"""Link extraction from HTML and CSS bodies: bytes in, raw link strings out (no I/O).

Links come back as found (entities decoded, surrounding whitespace stripped, in document order,
duplicates kept); resolving against the base and normalising is the job of `archiver.web.urls`.
Any bytes are a document: nothing here raises on content, and the time spent is linear in the
body's size (see "bounded parsing" for HTML; the CSS scanner never rescans what it passed).
"""

from __future__ import annotations

import codecs
import re
import threading
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import NamedTuple, TypeVar

from selectolax.lexbor import LexborCSSSelector, LexborHTMLParser, LexborNode

T = TypeVar("T")


class Link(NamedTuple):
    """One link: its raw value and where it came from ("a/href", "css/import"...)."""

    url: str
    kind: str


class HtmlLinks(NamedTuple):
    """The links of an HTML page and the raw value of its first `<base href>`."""

    base: str | None
    links: list[Link]


# --- character encodings ---------------------------------------------------------------------

# Decoders a browser would use (WHATWG Encoding Standard, "Names and labels"), keyed by Python's
# canonical codec name. A label naming a subset decodes with the superset browsers use
# ("iso-8859-1" and "us-ascii" are windows-1252); codecs browsers refuse (UTF-7, UTF-32, EBCDIC,
# rot13...) are absent, so such a label is ignored like an unknown one.
_BROWSER_CODECS = {
    **{
        name: name
        for name in (
            *("utf-8", "utf-16-le", "utf-16-be", "cp866", "koi8-r", "koi8-u", "mac-roman"),
            *("mac-cyrillic", "cp874", "cp932", "cp949", "euc_jp", "iso2022_jp", "gb18030"),
            "big5hkscs",
        )
    },
    **{f"cp{n}": f"cp{n}" for n in range(1250, 1259)},
    **{f"iso8859-{n}": f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)},
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "euc_kr": "cp949",
    "shift_jis": "cp932",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "utf-16": "utf-16-le",
}
# WHATWG labels that Python's codec registry does not know.
_EXTRA_LABELS = {
    "windows-874": "cp874",
    "x-mac-cyrillic": "mac-cyrillic",
    "iso-8859-8-i": "iso8859-8",
    "windows-31j": "cp932",
    "x-sjis": "cp932",
}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Browser codecs in which ASCII bytes do not stand for ASCII text.
_ASCII_INCOMPATIBLE = frozenset(("utf-16-le", "utf-16-be", "iso2022_jp"))
# HTML Standard 13.2.3.2: the <meta> prescan looks at the first 1024 bytes only.
_PRESCAN_BYTES = 1024
_HTML_COMMENT = re.compile(rb"<!--.*?(?:-->|\Z)", re.S)
_META_CHARSET = re.compile(
    rb"<meta[\t\n\f\r /][^>]*?charset[\t\n\f\r ]*=[\t\n\f\r ]*[\"']?[\t\n\f\r ]*"
    rb"([^\t\n\f\r \"';>/]+)",
    re.I,
)
# CSS Syntax 3.2: `@charset "label";` counts only as the very first bytes, written just so.
_CSS_CHARSET = re.compile(rb'@charset "([^"]{0,1021})";')


@lru_cache(maxsize=128)
def _codec(label: str) -> str | None:
    """Python codec for an encoding label as a browser reads it; None if unknown or refused."""
    label = label.strip("\t\n\f\r \"'").lower()
    if label in _EXTRA_LABELS:
        return _EXTRA_LABELS[label]
    try:
        return _BROWSER_CODECS.get(codecs.lookup(label).name)
    except (LookupError, ValueError):
        return None


def _declared_codec(label: bytes) -> str | None:
    """Codec for a label declared inside the document itself (<meta> or @charset)."""
    codec = _codec(label.decode("ascii", "replace"))
    # A document that could declare its encoding in ASCII bytes is not UTF-16; the HTML and
    # CSS specs both read such a declaration as UTF-8.
    return "utf-8" if codec in ("utf-16-le", "utf-16-be") else codec


def _sniff_bom(body: bytes) -> tuple[str, bytes] | None:
    """A byte-order mark wins over any declaration (Encoding Standard, "decode")."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return codec, body[len(bom) :]
    return None


def _prescan(head: bytes) -> str | None:
    """The codec a `<meta charset>` or `<meta content="...; charset=x">` declares, if any."""
    if b"<!--" in head:
        head = _HTML_COMMENT.sub(b"", head)
    match = _META_CHARSET.search(head)
    return _declared_codec(match.group(1)) if match else None


def _is_utf8(body: bytes) -> bool:
    """True if body is UTF-8, allowing a sequence cut short at the end (size-capped fetches)."""
    if body.isascii():
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(body, final=False)
    except UnicodeDecodeError:
        return False
    return True


def html_as_utf8(body: bytes, charset: str | None) -> bytes:
    """The document as UTF-8 bytes, the parser's own encoding.

    Follows the HTML Standard's order (13.2.3.2): byte-order mark, transport-layer charset,
    <meta> prescan, then a fallback. The fallback is UTF-8 when the bytes are valid UTF-8 and
    windows-1252 otherwise, the legacy default browsers use for most locales.
    """
    sniffed = _sniff_bom(body)
    codec: str | None
    if sniffed is not None:
        codec, body = sniffed
    else:
        codec = (_codec(charset) if charset else None) or _prescan(body[:_PRESCAN_BYTES])
        if codec is None:
            codec = "utf-8" if _is_utf8(body) else "cp1252"
    if codec == "utf-8" or (codec not in _ASCII_INCOMPATIBLE and body.isascii()):
        return body
    return body.decode(codec, "replace").encode("utf-8", "replace")


def decode_text(body: bytes, charset: str | None) -> str:
    """Decode a stylesheet: byte-order mark, else charset, else `@charset`, else UTF-8."""
    sniffed = _sniff_bom(body)
    codec: str | None
    if sniffed is not None:
        codec, body = sniffed
    else:
        codec = _codec(charset) if charset else None
        if codec is None and (match := _CSS_CHARSET.match(body)):
            codec = _declared_codec(match.group(1))
    return body.decode(codec or "utf-8", "replace")


# --- filtering -------------------------------------------------------------------------------

# The URL parser strips leading and trailing C0 controls and spaces (WHATWG URL, basic parser).
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_NOT_FETCHABLE = re.compile(r"#|(?:mailto|javascript|data|tel|about):", re.I)
_NOT_FETCHABLE_FIRST = "#mjdtaMJDTA"
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")


def _clean(value: str | None) -> str | None:
    """The stripped value, or None if empty, fragment-only or a scheme never fetched."""
    if not value:
        return None
    value = value.strip(_C0_AND_SPACE)
    if not value:
        return None
    if value[0] in _NOT_FETCHABLE_FIRST:
        # The URL parser also drops tabs and newlines anywhere: "java\nscript:" is javascript:.
        probe = value
        if "\t" in value or "\n" in value or "\r" in value:
            probe = value.translate(_TAB_NEWLINE)
        if _NOT_FETCHABLE.match(probe):
            return None
    return value


# --- CSS -------------------------------------------------------------------------------------

_CSS_WS = r"[\t\n\f\r ]"
_DQ_BODY = r'(?:[^"\\\n\r\f]|\\(?:\r\n|[\s\S]))*+'
_SQ_BODY = _DQ_BODY.replace('"', "'")
# Possessive quantifiers keep a long run of escapes from backtracking exponentially.
_UNQUOTED_BODY = (
    r"(?:[^\\\"'()\t\n\f\r ]"
    rf"|\\(?:[0-9a-fA-F]{{1,6}}+(?:\r\n|{_CSS_WS})?|[^\n\r\f0-9a-fA-F]))*+"
)
_URL_ARGS = rf"""\({_CSS_WS}*+(?:"({_DQ_BODY})"|'({_SQ_BODY})'|({_UNQUOTED_BODY})){_CSS_WS}*\)"""
# A string runs to its closing quote, the end of its line (a bad string) or the end of the sheet, as
# the tokenizer reads it (CSS Syntax 4.3.5): never rescanned from a quote inside it, which would be
# quadratic in a run of escaped quotes.
# Every token starts with one of the characters of the leading class: a pattern that opens with
# a character class lets the regex engine skip to candidates in C, several times faster than an
# alternation (which it must try at every position). Each branch then checks which character
# it got with a lookbehind. Case is spelt out because re.I would turn that skipping off.
_CSS_TOKENS = re.compile(
    rf"""
    [/"'uU@]
    (?: (?<=/) \*[\s\S]*?(?:\*/|\Z)                       # a comment: skipped
      | (?<=") {_DQ_BODY}(?:"|(?=[\n\r\f])|\Z)                # a string: skipped, to its end
      | (?<=') {_SQ_BODY}(?:'|(?=[\n\r\f])|\Z)
      | (?<=[uU]) [rR][lL] {_URL_ARGS}                     # groups 1-3: url(...)
      | (?<=@) [iI][mM][pP][oO][rR][tT] {_CSS_WS}*         # groups 4-8: @import
        (?: [uU][rR][lL] {_URL_ARGS} | "({_DQ_BODY})" | '({_SQ_BODY})' )
    )
    """,
    re.X,
)
_CSS_ESCAPE = re.compile(rf"\\(?:([0-9a-fA-F]{{1,6}})(?:\r\n|{_CSS_WS})?|(\r\n|[\n\r\f])|([\s\S]))")


def _css_unescape_one(match: re.Match[str]) -> str:
    """One CSS escape (CSS Syntax 4.3.7); an escaped newline is a string's line continuation."""
    hex_digits, newline, char = match.groups()
    if hex_digits:
        code = int(hex_digits, 16)
        return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
    return "" if newline else char


def css_references(text: str) -> Iterator[tuple[re.Match[str], int, str]]:
    """Each `url()` and `@import` reference of a stylesheet: its match, the group holding the
    value (1-3 for url(), 4-6 for @import; 3 and 6 unquoted) and the value unescaped."""
    for match in _CSS_TOKENS.finditer(text):
        group = match.lastindex
        if group is None:
            continue  # a comment, or a string that is not a URL
        start = match.start()
        if group <= 3 and start and (text[start - 1].isalnum() or text[start - 1] in "_-\\"):
            continue  # "myurl(" is another function
        value = match.group(group)
        if "\\" in value:
            value = _CSS_ESCAPE.sub(_css_unescape_one, value)
        yield match, group, value


def _css_urls(text: str) -> Iterator[tuple[str, bool]]:
    """Raw URLs of `url()` and `@import` in a stylesheet, with True for imports."""
    for _, group, value in css_references(text):
        url = _clean(value)
        if url:
            yield url, group > 3


def extract_css(text: str) -> list[Link]:
    """Links of a stylesheet, kinds "css/url" and "css/import"."""
    return [Link(url, "css/import" if imported else "css/url") for url, imported in _css_urls(text)]


# --- bounded parsing -------------------------------------------------------------------------

# lexbor's tree builder, like the HTML Standard's algorithm it follows, is not linear: most start
# tags and unknown end tags walk the stack of open elements, and at every insertion it rebuilds the
# formatting elements (<b>, <font>...) that a <p> or a misnested end tag closed but that are still
# active, O(their number) new elements each time (lexbor issue #340). 200,000 nested <div> took
# minutes, 180 KB of "<div></x>" 0.7 s, 20 KB of "<p><b N>" 1.2 s, 500 such <b> and then 10,000
# "<p>x</p>" 8 s. No estimate of the depth made without the tree builder's own rules is sound (an
# end tag closes an element or is ignored depending on names and on the elements between), so a
# long document is parsed in parts of at most _PART_TAGS tags and _PART_FORMATTING formatting
# start tags: each part's cost is bounded, so the whole is linear. A part ends before a tag, never
# inside a comment or a raw-text element (a script's strings would otherwise read as markup)
# unless that one holds more than a part's worth of tags. Across parts the parser forgets what is
# open: links in a table cell or frameset cut from its table or frameset by a part boundary are
# lost, which on 400 real pages (rustdoc and mdBook, 20 KB to 1 MB) never happened.
_PART_TAGS = 512
_PART_FORMATTING = 16
_NAME_END = rb"(?=[\t\n\f\r />])"
# A formatting start tag with an attribute. Those without are at most three of a kind in the list
# (the HTML Standard's "Noah's Ark" clause), 39 in all: they need no counting.
_FORMATTING = (
    rb"(?:[bBiIsSuU]|[bB][iI][gG]|[cC][oO][dD][eE]|[eE][mM]|[fF][oO][nN][tT]|[nN][oO][bB][rR]"
    rb"|[sS](?:[mM][aA][lL][lL]|[tT][rR](?:[iI][kK][eE]|[oO][nN][gG]))|[tT][tT])[\t\n\f\r /]++[^\t\n\f\r />]"
)
# From a part's start: past its _PART_TAGS-th "<", and past its _PART_FORMATTING-th formatting
# start tag with attributes (counting "<" in text too only makes parts smaller).
_SOME_TAGS = re.compile(rb"(?:[^<]*+<){%d}" % _PART_TAGS)
# (Most tags start with a letter no formatting element does: that test comes first, it is cheap.)
_SOME_FORMATTING = re.compile(
    rb"(?:(?:[^<]*+<(?:(?![bBcCeEfFiInNsStTuU])|(?!%s)))*+[^<]*+<%s){%d}"
    % (_FORMATTING, _FORMATTING, _PART_FORMATTING)
)
_RAW_TEXT = ("script", "style", "xmp", "textarea", "title", "noembed", "noframes", "iframe")
_RAW_TEXT_START = re.compile(
    rb"<(?=[!iInNsStTxX])(?:!--|(?i:(%s))%s)" % ("|".join(_RAW_TEXT).encode(), _NAME_END)
)
_RAW_TEXT_END = {
    name.encode(): re.compile(rb"</(?i:%s)%s" % (name.encode(), _NAME_END)) for name in _RAW_TEXT
}
_COMMENT_END = re.compile(rb"--!?>")


def _raw_text_end(doc: bytes, name: bytes, start: int, end: int) -> int | None:
    """Where the raw-text element ``name`` (b"!--" for a comment) whose content runs from ``start``
    ends (the "<" of its end tag, or just past a comment's "-->"), if it does within a part's worth
    of tags after ``end`` (looking no further keeps the whole linear)."""
    if name == b"!--" and doc.startswith((b">", b"->"), start):  # <!--> and <!---> end at once
        return doc.index(b">", start) + 1
    pattern = _COMMENT_END if name == b"!--" else _RAW_TEXT_END[name]
    closed = pattern.search(doc, start, end)
    if closed is None:
        further = _SOME_TAGS.match(doc, end + 1)
        limit = len(doc) if further is None else further.end() - 1
        # An end tag may straddle ``end``: look again from a little before it.
        closed = pattern.search(doc, max(start, end - 16), limit)
    if closed is None:
        return None
    return closed.end() if name == b"!--" else closed.start()


def _next_tag(doc: bytes, position: int) -> int:
    """The first "<" from ``position`` on, or the document's end."""
    found = doc.find(b"<", position)
    return len(doc) if found < 0 else found


def linear_parts(doc: bytes) -> list[tuple[bytes, bytes]]:
    """``doc`` cut into parts whose parse costs time linear in their size: (prefix, part) pairs.

    A part ends before a tag: after _PART_TAGS "<" or _PART_FORMATTING formatting start tags
    with attributes, moved past a comment or raw-text element that it would fall into and that
    ends within as many tags again. A longer one is cut, and the next part starts with its start
    tag again as its prefix (b"<script>", b"<!--"), so that its text stays text.
    """
    if doc.count(b"<") <= _PART_TAGS and _SOME_FORMATTING.match(doc) is None:
        return [(b"", doc)]
    parts = []
    start = 0
    inside: bytes | None = None  # the raw-text element (or comment) the last cut fell into
    while start < len(doc):
        found = _SOME_TAGS.match(doc, start + 1)
        end = len(doc) if found is None else found.end() - 1
        if (formatting := _SOME_FORMATTING.match(doc, start + 1, end)) is not None:
            end = doc.rfind(b"<", start + 1, formatting.end())
        prefix = b""
        at = start
        if inside is not None:
            prefix = b"<!--" if inside == b"!--" else b"<" + inside + b">"
            closed = _raw_text_end(doc, inside, start, end)
            if closed is None or (closed > end and _SOME_FORMATTING.match(doc, end, closed)):
                parts.append((prefix, doc[start:end]))
                start = end
                continue
            inside = None
            at = closed
            if closed > end:
                end = _next_tag(doc, closed)
        while end < len(doc) and (opened := _RAW_TEXT_START.search(doc, at, end)) is not None:
            name = (opened.group(1) or b"!--").lower()
            closed = _raw_text_end(doc, name, opened.end(), end)
            if closed is not None and closed <= end:
                at = closed
                continue
            if closed is None or _SOME_FORMATTING.match(doc, end, closed):
                inside = name  # cut inside it: the next part reopens it
            else:
                end = _next_tag(doc, closed)
            break
        parts.append((prefix, doc[start:end]))
        start = end
    return parts


# --- HTML ------------------------------------------------------------------------------------

_URL_ATTRS = {
    "a": ("href",),
    "area": ("href",),
    "link": ("href",),
    "img": ("src", "lowsrc"),
    "script": ("src",),
    "frame": ("src",),
    "iframe": ("src",),
    "embed": ("src",),
    "input": ("src",),
    "body": ("background",),
    "table": ("background",),
    "td": ("background",),
    "object": ("data",),
}
_ATTR_KINDS = {tag: tuple((a, f"{tag}/{a}") for a in attrs) for tag, attrs in _URL_ATTRS.items()}
_SRCSET_KINDS = {"img": "img/srcset", "source": "source/srcset"}
_SPECIAL_TAGS = frozenset(("img", "source", "meta", "applet", "style"))
# lexbor walks the tree once per selector of a list, so one `:is()` of them all is several times
# faster than the plain list; it also yields each element once, in document order.
_QUERY = ":is({})".format(
    ", ".join(
        [f"{tag}[{attr}]" for tag, attrs in _URL_ATTRS.items() for attr in attrs]
        + [f"{tag}[srcset]" for tag in _SRCSET_KINDS]
        + ["applet[code]", "meta[http-equiv]", "base[href]", "style", "[style*='url(' i]"]
    )
)
# Creating a selector engine costs about as much as parsing a 20 KB page, and the parser makes
# a new one per document: keep one per thread instead (it is not thread-safe).
_local = threading.local()

_HTML_WS = "\t\n\f\r "
# A candidate's URL runs to the next whitespace and may hold commas; if it ends with commas they
# end the candidate, else its descriptors run to the next comma outside parentheses.
SRCSET_CANDIDATE = re.compile(r"[\t\n\f\r ,]*+([^\t\n\f\r ]++)(?:(?<=,)|(?:[^,(]|\([^)]*\)?)*+,?)")
_REFRESH_TIME = re.compile(r"[\t\n\f\r ]*[0-9.]+")
_REFRESH_URL = re.compile(r"url[\t\n\f\r ]*=[\t\n\f\r ]*", re.I)


def _selector() -> LexborCSSSelector:
    selector = getattr(_local, "selector", None)
    if selector is None:
        selector = _local.selector = LexborCSSSelector()  # type: ignore[no-untyped-call]
    return selector


def _srcset_urls(srcset: str) -> list[str]:
    """Candidate URLs of a srcset (HTML Standard, "parse a srcset attribute").

    Descriptors are skipped, not validated: a candidate the spec would drop for a malformed
    descriptor is still reported, as an archive would rather fetch too much than too little.
    """
    return [url.rstrip(",") for url in SRCSET_CANDIDATE.findall(srcset)]


def refresh_url_span(content: str) -> tuple[int, int] | None:
    """Where the URL of a ``<meta http-equiv=refresh>`` content is (HTML Standard, shared
    declarative refresh steps); None if it names none. Crawling reads it, replay rewrites it."""
    match = _REFRESH_TIME.match(content)
    if match is None:
        return None
    end = len(content)
    pos = match.end()
    if pos < end:
        if content[pos] not in ";," + _HTML_WS:
            return None
        pos = _skip_space(content, pos)
        if content[pos : pos + 1] in (";", ","):
            pos = _skip_space(content, pos + 1)
    prefix = _REFRESH_URL.match(content, pos)
    if prefix is not None:
        pos = prefix.end()
    elif content[pos : pos + 1] in ("u", "U"):
        return pos, end  # "u..." that is not "url=": the spec takes the whole remainder
    if content[pos : pos + 1] in ("'", '"'):
        close = content.find(content[pos], pos + 1)
        return pos + 1, close if close >= 0 else end
    return (pos, end) if pos < end else None


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _HTML_WS:
        pos += 1
    return pos


def _applet_url(code: str, codebase: str | None) -> str:
    """One raw URL for an applet class: the codebase joined with the class's file path.

    Java reads `code` as a class name ("pkg.Main" and "pkg.Main.class" both mean pkg/Main.class)
    and the codebase as a directory, adding a missing final "/" as the JDK's applet viewer does;
    the result resolves against the document base like any link.
    """
    name = code.removesuffix(".class")
    path = (name if "/" in name else name.replace(".", "/")) + ".class"
    if not codebase:
        return path
    return (codebase if codebase.endswith("/") else codebase + "/") + path


def _special_links(node: LexborNode, tag: str, attrs: dict[str, str | None]) -> Iterator[Link]:
    """Links of the elements that need more than reading an attribute."""
    if tag in _SRCSET_KINDS:
        kind = _SRCSET_KINDS[tag]
        for candidate in _srcset_urls(attrs.get("srcset") or ""):
            url = _clean(candidate)
            if url:
                yield Link(url, kind)
    elif tag == "meta":
        if (attrs.get("http-equiv") or "").strip().lower() == "refresh":
            content = attrs.get("content") or ""
            span = refresh_url_span(content)
            url = None if span is None else _clean(content[span[0] : span[1]])
            if url:
                yield Link(url, "meta/refresh")
    elif tag == "applet":
        code = _clean(attrs.get("code"))
        if code:
            yield Link(_applet_url(code, _clean(attrs.get("codebase"))), "applet/code")
    elif tag == "style":
        for url, _ in _css_urls(node.text()):
            yield Link(url, "style/url")


def extract_html(body: bytes, charset: str | None = None) -> HtmlLinks:
    """Links of an HTML page in document order, and its base; `charset` is the HTTP header's.

    CSS found in `<style>` blocks (imports included) is reported as "style/url" and in style
    attributes as "style-attr/url".
    """
    base, links = _links_of(_parts(body, charset), Link)
    return HtmlLinks(base, links)


def html_urls(body: bytes, charset: str | None = None) -> tuple[str | None, list[str]]:
    """The raw URLs of :func:`extract_html`'s links, and the base. Strings only: the garbage
    collector tracks no object per link, so a page of a million links does not set off full
    collections (each a pause of every thread, proportional to the whole heap)."""
    return _links_of(_parts(body, charset), _url_of)


def css_urls(text: str) -> list[str]:
    """The raw URLs of :func:`extract_css`'s links, as strings only (see :func:`html_urls`)."""
    return [url for url, _ in _css_urls(text)]


def _url_of(url: str, kind: str) -> str:
    return url


def _parts(body: bytes, charset: str | None) -> list[bytes]:
    return [prefix + part for prefix, part in linear_parts(html_as_utf8(body, charset))]


def _links_of(parts: list[bytes], make: Callable[[str, str], T]) -> tuple[str | None, list[T]]:
    """The base and the links of a document parsed part by part (UTF-8 bytes), in document
    order, each made by ``make(url, kind)``."""
    links: list[T] = []
    base: str | None = None
    base_seen = False
    for part in parts:
        root = LexborHTMLParser(part).root
        if root is None:
            continue
        for node in _selector().find(_QUERY, root):
            tag = node.tag or ""
            attrs = node.attributes
            for attr, kind in _ATTR_KINDS.get(tag, ()):
                url = _clean(attrs.get(attr))
                if url:
                    links.append(make(url, kind))
            if tag in _SPECIAL_TAGS:
                links.extend(make(*link) for link in _special_links(node, tag, attrs))
            elif tag == "base" and not base_seen:
                # Only the first <base href> counts (HTML Standard, "frozen base URL").
                base_seen = True
                base = _clean(attrs.get("href"))
            style = attrs.get("style")
            if style:
                links.extend(make(url, "style-attr/url") for url, _ in _css_urls(style))
    return base, links
