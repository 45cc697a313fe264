"""Server-side rewriting of scripts (archiver.replay.scripts): location writes and postMessage
calls in code are rewritten, nothing in strings, comments, regular expressions or template text
is, and whatever the input, the output is the input with only those insertions, in linear time."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from archiver.replay.scripts import GUARDED, LOCATION, POST, rewrite_js, rewrite_js_body
from tests.support.fuzzing import assert_cost_bounded, examples, repeat_to

WRITES = [
    ('location = "/a"', f'{LOCATION} = "/a"'),
    ("location.href = u", f"{LOCATION}.href = u"),
    ("window.location = u", f"window.{LOCATION} = u"),
    ("self.location.href=u", f"self.{LOCATION}.href=u"),
    ("document.location.assign(u)", f"document.{LOCATION}.assign(u)"),
    ("location.replace(u)", f"{LOCATION}.replace(u)"),
    ("if (x) location.href = u; else location = v", f"if (x) {LOCATION}.href = u; else {LOCATION} = v"),
    ("a => location.href = b", f"a => {LOCATION}.href = b"),
    ("`${location = 1} location = 2`", f"`${{{LOCATION} = 1}} location = 2`"),
    # Reads of a part: the archived URL's, as a single-page app reads its route.
    ("location.href == u", f"{GUARDED}.href == u"),
    ("x = location.href", f"x = {GUARDED}.href"),
    ('route = location.pathname.slice("/app/".length)', f'route = {GUARDED}.pathname.slice("/app/".length)'),
    ("q = window.location.search", f"q = window.{LOCATION}.search"),
    ("h = document.location . hash", f"h = document.{LOCATION} . hash"),
    ("w.postMessage(m, '*')", f"w.postMessage(...{POST}(m, '*'))"),
    ("p?.postMessage(f(g(1)), o)", f"p?.postMessage(...{POST}(f(g(1)), o))"),
    ("top.postMessage({a: (1)}, o, [b])", f"top.postMessage(...{POST}({{a: (1)}}, o, [b]))"),
]
LEFT_ALONE = [
    "x = location",  # the object itself: not one of its parts
    "p = self.location.pathname",  # a worker's own location, perhaps
    "location.pathname = p",  # a write to a part the archived location does not take
    "location.pathnames",
    "if (location === y) {}",
    "top.location = u",  # another window's location
    "obj.location = u",
    "a.window.location = u",
    "var location = 1",
    "let location = 1",
    "({location} = place)",
    'x = "location = 1"',
    "x = 'location.href = u'",
    "// location = 1",
    "/* location = 1 */",
    "r = /location = 1/g",
    "`location = 1`",
    "postMessage(m, '*')",  # the document's own, not a method call: left to the browser
    "function postMessage(m) {}",
    "w.postMessage(",  # never closed
    "location.hrefx = 1",
]


@pytest.mark.parametrize(("script", "rewritten"), WRITES)
def test_location_writes_and_post_message_calls_are_rewritten(script: str, rewritten: str) -> None:
    assert rewrite_js(script) == rewritten


@pytest.mark.parametrize("script", LEFT_ALONE)
def test_everything_else_is_left_as_it_was(script: str) -> None:
    assert rewrite_js(script) == script


def test_a_division_is_not_a_regular_expression() -> None:
    assert rewrite_js("a = b / 2; location = c / d") == f"a = b / 2; {LOCATION} = c / d"
    script = "x = (y) / 2 / location; location.href = z"
    assert rewrite_js(script) == f"x = (y) / 2 / location; {LOCATION}.href = z"


def test_script_files_are_decoded_by_their_charset_and_left_alone_without_writes() -> None:
    assert rewrite_js_body(b"var a = 1;", None) is None
    assert rewrite_js_body(b"var a = 'location';", None) is None
    assert rewrite_js_body(b"\xef\xbb\xbflocation = 'x'", None) == f"{LOCATION} = 'x'".encode()
    latin = "location = 'caf\xe9'".encode("latin-1")
    assert rewrite_js_body(latin, "iso-8859-1") == f"{LOCATION} = 'caf\xe9'".encode()
    broken = b"location = '\xff'"  # not UTF-8: the byte passes through
    assert rewrite_js_body(broken, None) == LOCATION.encode() + b" = '\xff'"
    assert rewrite_js_body(b"location = 1", "no-such-charset") == f"{LOCATION} = 1".encode()


def test_a_jsonp_script_calls_the_asked_callback_and_keeps_its_location_writes() -> None:
    names = ("jQuery3600_1", "jQuery3600_2")
    assert rewrite_js_body(b'/**/ jQuery3600_1({"a": 1});', None, names) == b'/**/ jQuery3600_2({"a": 1});'
    assert rewrite_js_body(b"jQuery3600_1(1); location = 'x'", None, names) == (
        f"jQuery3600_2(1); {LOCATION} = 'x'".encode())
    latin = "jQuery3600_1('caf\xe9')".encode("latin-1")
    assert rewrite_js_body(latin, "iso-8859-1", names) == "jQuery3600_2('caf\xe9')".encode()
    assert rewrite_js_body(b"other(1); jQuery3600_1(1)", None, names) is None  # not its first call


def _only_insertions(original: str, rewritten: str) -> bool:
    """Whether ``rewritten`` is ``original`` with location renamed and postMessage arguments
    wrapped, and nothing else changed."""
    wraps = rewritten.count(f"...{POST}(")
    plain = rewritten.replace(f"...{POST}(", "").replace(GUARDED, "location").replace(LOCATION, "location")
    extra = iter(plain)
    # ``original`` is a subsequence of ``plain``, and what is left over is one ")" per wrap.
    left = [char for char in original if char not in extra]
    if left:
        return False
    return len(plain) - len(original) == wraps and plain.count(")") - original.count(")") == wraps


PIECES = [
    "location", "location.href", "window.", "document.", " = ", "==", "=>", ".assign(", ".replace(",
    ".postMessage(", "(", ")", "{", "}", "[", "]", "'", '"', "`", "${", "/", "/*", "*/", "//", "\n",
    "\\", "x", "1", ",", ";", "var ", "return ", " ", "?.", "+", "*",
]  # fmt: skip
scripts = st.lists(st.sampled_from(PIECES) | st.text(max_size=3), max_size=30).map("".join)


@settings(max_examples=examples(400), deadline=None)
@given(scripts)
@example("location.postMessage(location = 1)")
@example("`${`${location = 1}`}`")
def test_any_script_gets_only_the_insertions(script: str) -> None:
    rewritten = rewrite_js(script)
    assert _only_insertions(script, rewritten), (script, rewritten)
    assert rewrite_js(rewritten).count(LOCATION) == rewritten.count(LOCATION)  # never renamed twice


@settings(max_examples=examples(200), deadline=None)
@given(st.text())
def test_nothing_inside_a_string_or_a_comment_is_rewritten(text: str) -> None:
    literal = json.dumps(f"location = {text}; w.postMessage({text})")
    assert rewrite_js(f"x = {literal};") == f"x = {literal};"
    comment = f"/* location = 1; {text.replace('*/', '')} */"
    assert rewrite_js(comment) == comment


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=200), st.sampled_from([None, "utf-8", "windows-1252", "utf-16", "bogus"]))
def test_any_bytes_rewrite_or_are_left_alone(body: bytes, charset: str | None) -> None:
    out = rewrite_js_body(b"location=1;" + body, charset)
    assert out is None or isinstance(out, bytes)


_BENIGN = b"function f(a, b) { return a.map(x => x * 2).filter(Boolean); } // a comment\n"
_PATHOLOGICAL = {
    "2000 unclosed postMessage calls": "w.postMessage(" * 2000,
    "2000 location writes": "location.href = u;\n" * 2000,
    "2000 nested template literals": "`${" * 2000 + "location = 1" + "}`" * 2000,
    "64 KiB unclosed string": "location = 1; '" + "a" * 2**16,
    "64 KiB unclosed comment": "location = 1; /*" + "location = 2;" * 5000,
    "2000 divisions that look like regular expressions": "location = a / b / c;" * 2000,
}


@pytest.mark.parametrize("name", _PATHOLOGICAL)
def test_pathological_scripts_cost_what_a_benign_script_of_their_size_does(name: str) -> None:
    script = _PATHOLOGICAL[name]
    benign = repeat_to(_BENIGN, len(script)).decode() + "location = 1;"
    assert_cost_bounded(rewrite_js, script, benign, factor=10, label=name)
