"""Shared pieces of the fuzz tests: example counts, the cost check and the corpus.

Example counts are sized so that every fuzz test together stays well within CI's minute; set
``ARCHIVER_FUZZ_SCALE=20`` (any positive number) to run that many times more examples when hunting.

Bounded time is checked as a cost ratio, never against an absolute figure: the CPU time of this
thread on the pathological input must stay within ``factor`` times that of a benign input of the
same size, measured in the same test (the machine is shared, so wall-clock time is not compared,
and the benign input is the best of two runs). A quadratic parser fails such a check by orders of
magnitude; a linear one passes it with room to spare. One full collection per check, then the
garbage collector stays off for all its runs: a collection costs a tenth of a second and more once
the suite's objects are loaded.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

CORPUS = Path(__file__).parents[1] / "fuzz_corpus"
SCALE = float(os.environ.get("ARCHIVER_FUZZ_SCALE", "1"))
# Below this a benign run is too short to compare with (timer grain, cache and allocator noise).
_FLOOR = 0.005


def examples(count: int) -> int:
    """``count`` examples, times ARCHIVER_FUZZ_SCALE."""
    return max(1, round(count * SCALE))


@contextmanager
def _collector_off() -> Iterator[None]:
    """The garbage collector off for the block, after one full collection: a collection's cost
    grows with everything else the test process holds (the whole suite's objects), not with the
    parser's work, so none may fall inside a timed run."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _cpu_time(run: Callable[[Any], object], value: Any) -> float:
    """CPU seconds this thread spends in ``run(value)``; the caller turns the collector off."""
    start = time.thread_time()
    run(value)
    return time.thread_time() - start


def assert_cost_bounded(
    run: Callable[[Any], object], bad: Any, benign: Any, factor: float, label: str = ""
) -> tuple[float, float]:
    """Assert ``run(bad)`` costs at most ``factor`` times ``run(benign)``; return both times.

    The benign time is floored at a few milliseconds, so tiny inputs compare with a small but
    real budget instead of with timer noise. Both are the best of two runs: a page-fault storm on
    a loaded machine is not the parser's cost.
    """
    with _collector_off():
        base = min(_cpu_time(run, benign) for _ in range(2))
        cost = _cpu_time(run, bad)
        if cost > factor * max(base, _FLOOR):
            cost = min(cost, _cpu_time(run, bad))
    budget = factor * max(base, _FLOOR)
    assert cost <= budget, f"{label}: {cost:.3f} s of CPU, benign input {base:.4f} s, budget {budget:.3f} s"
    return cost, base


def corpus(parser: str) -> list[Path]:
    """The corpus files of one parser family, for pytest.mark.parametrize."""
    return sorted((CORPUS / parser).iterdir())


def repeat_to(unit: bytes, size: int) -> bytes:
    """``unit`` repeated and cut to exactly ``size`` bytes."""
    return (unit * (size // len(unit) + 1))[:size]


# --- generators of near-valid markup --------------------------------------------------------------

# Link-bearing and parser-confusing elements (formatting, tables, raw text, foreign content).
_TAGS = (
    "a", "area", "link", "img", "script", "frame", "iframe", "embed", "input", "body", "table", "td",
    "tr", "th", "object", "source", "meta", "applet", "style", "base", "video", "audio", "track",
    "form", "button", "image", "svg", "math", "template", "select", "option", "textarea", "title",
    "noscript", "noembed", "noframes", "plaintext", "xmp", "p", "li", "ul", "div", "b", "i", "font",
    "nobr", "frameset", "head", "html", "br", "A", "IMG", "Style", "x-y", "svg:a",
)  # fmt: skip
_ATTRS = (
    "href", "src", "srcset", "imagesrcset", "lowsrc", "style", "background", "data", "code", "codebase",
    "http-equiv", "content", "rel", "as", "poster", "action", "formaction", "xlink:href", "charset",
    "HREF", "class", "on", "=", "/", '"',
)  # fmt: skip
# Values that reach every branch: URLs of every shape, entities, CSS, srcset and refresh syntax.
_VALUE_PIECES = (
    "a.html", "/abs", "//host/x", "http://example.org/", "https://[::1]:8080/", "?q=1", "#frag",
    "../up", "./", " ", "\t", "\n", "\r", "\x00", "\x0c", "javascript:x()", "java\nscript:", "data:,",
    "mailto:a@b", "&amp;", "&copy", "&copy=1", "&#0;", "&#x110000;", "&#xD800;", "&#99999999999;",
    "&notit;", "&", "url(", ")", "url(x.png)", "url('y.png')", '"', "'", "\\", "\\28", ",", " 2x",
    " 100w", "(", "0; url=", "5;URL='r.html'", "refresh", "stylesheet", "icon", "é", "ツ", "\U0001f600",
    "%zz", "%41", "\ufffd", "<", ">", "=", "http://h:" + "9" * 4400,
)  # fmt: skip
_TEXT_PIECES = (
    "text", " ", "\n", "&amp;", "&lt;", "<", ">", "<!--", "-->", "<!", "<!DOCTYPE html>", "<?x?>",
    "</", "</>", "<![CDATA[", "]]>", "</script>", "</style", "</title >", "é", "\x00", "url(z.png)",
    "@import 'i.css';",
)  # fmt: skip


@st.composite
def _attribute(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(_ATTRS) | st.text("abcdefghijklmnopqrstuvwxyz-:", min_size=1, max_size=6))
    value = "".join(draw(st.lists(st.sampled_from(_VALUE_PIECES) | st.text(max_size=4), max_size=5)))
    quote = draw(st.sampled_from(['"', "'", "", "unclosed", "none"]))
    if quote == "none":
        return " " + name
    if quote == "unclosed":
        return f' {name}="{value}'
    if not quote:
        value = value.replace(" ", "").replace(">", "") or "v"
    separator = draw(st.sampled_from(["=", " = ", "=\n"]))
    return f" {name}{separator}{quote}{value}{quote}"


def _element(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    @st.composite
    def build(draw: st.DrawFn) -> str:
        tag = draw(st.sampled_from(_TAGS))
        attributes = "".join(draw(st.lists(_attribute(), max_size=4)))
        end = draw(st.sampled_from([">", "/>", " >", ""]))
        inner = "".join(draw(st.lists(children, max_size=4)))
        close = draw(st.sampled_from([f"</{tag}>", "", f"</{tag.upper()} x>", "</b>"]))
        return f"<{tag}{attributes}{end}{inner}{close}"

    return build()


def html_documents() -> st.SearchStrategy[str]:
    """HTML text: random elements, attributes, entities and broken markup, nested a few deep."""
    leaves = st.sampled_from(_TEXT_PIECES) | st.text(max_size=8)
    return st.lists(st.recursive(leaves, _element, max_leaves=8), max_size=5).map("".join)


_CSS_PIECES = (
    "url(", "url(a.png)", 'url("b.png")', "url('c.png')", "url( d.png )", "URL(e.png)", "uRl(f",
    "myurl(g.png)", "-url(h.png)", "\\url(i.png)", "@import ", "@import 'j.css';", '@import "k.css"',
    "@IMPORT url(l.css)", "@import", "/*", "*/", "/* url(m.png) */", '"', "'", '"url(n.png)"', "\\",
    "\\\n", "\\\r\n", "\\29", "\\28 ", "\\0", "\\110000", "\\D800", "\\\\", ")", "(", " ", "\n", "\r",
    "\f", "\t", "body{background:", "}", ";", "@charset \"utf-8\";", "é", "\x00", "data:x", "#frag",
    "javascript:", "%", "u",
)  # fmt: skip


def css_texts() -> st.SearchStrategy[str]:
    """Stylesheet text: url() and @import in every quoting, escapes, comments, broken tokens."""
    return st.lists(st.sampled_from(_CSS_PIECES) | st.text(max_size=4), max_size=30).map("".join)


# Labels a server or a document may give: known, aliases, refused by browsers, unknown, garbage.
CHARSETS = st.sampled_from(
    [None, "", "utf-8", "UTF8", "latin1", "iso-8859-1", "us-ascii", "windows-1252", "utf-16", "utf-16be",
     "UTF-16LE", "utf-32", "utf-7", "shift_jis", "x-sjis", "euc-jp", "iso-2022-jp", "gb2312", "gbk",
     "gb18030", "big5", "koi8-r", "iso-8859-8-i", "cp037", "rot13", "base64", "zlib", "idna", "punycode",
     "hex", "mbcs", "\x00", "utf-8\x00", '"utf-8"', " ", "x" * 300, "é", "undefined"]
) | st.text(max_size=12)  # fmt: skip
# Encodings to write documents in; a byte-order mark is sometimes added, sometimes contradicted.
ENCODINGS = st.sampled_from(
    ["utf-8", "utf-16-le", "utf-16-be", "cp1252", "shift_jis", "iso2022_jp", "gb18030"]
)


@st.composite
def encoded(draw: st.DrawFn, texts: st.SearchStrategy[str]) -> bytes:
    """A text encoded in some encoding, maybe with a BOM, maybe with a few bytes spoiled."""
    data = draw(texts).encode(draw(ENCODINGS), "replace")
    data = draw(st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"])) + data
    if data and draw(st.booleans()):
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at + 1 :]
    return data
