"""The JSONP callback rename (archiver.web.fuzzy.callback_names, rename_callback): the captured
callback name at the start of a JSONP script becomes the asked one, and nothing else changes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.web.fuzzy import callback_names, rename_callback
from tests.support.fuzzing import assert_cost_bounded

NAME = st.from_regex(r"[A-Za-z_$][A-Za-z0-9_$]{0,30}", fullmatch=True)
LEAD = st.lists(st.sampled_from([" ", "\n", "\t", "\ufeff", "/* a comment */", "// a line\n", "/**/"]),
                max_size=5).map("".join)


@pytest.mark.parametrize(("script", "renamed"), [
    ('jQuery3600_1({"text": "x"});\n', 'jQuery3600_2({"text": "x"});\n'),
    ('/**/ jQuery3600_1 ({"a": 1})', '/**/ jQuery3600_2 ({"a": 1})'),
    ('\ufeff// JSONP\n/* x */\n\tjQuery3600_1(1); jQuery3600_1(2)',
     '\ufeff// JSONP\n/* x */\n\tjQuery3600_2(1); jQuery3600_1(2)'),
])
def test_the_leading_call_calls_the_asked_name(script: str, renamed: str) -> None:
    assert rename_callback(script, "jQuery3600_1", "jQuery3600_2") == renamed


@pytest.mark.parametrize(("script", "captured", "asked"), [
    ("jQuery3600_1x(1)", "jQuery3600_1", "b"),  # another name that starts alike
    ("jQuery3600_1 = 3; jQuery3600_1(1)", "jQuery3600_1", "b"),  # no call first
    ('var x = 1; jQuery3600_1({"a": 1})', "jQuery3600_1", "b"),  # not at the start
    ("/* unterminated jQuery3600_1(1)", "jQuery3600_1", "b"),
    ('"jQuery3600_1"(1)', "jQuery3600_1", "b"),
    ("cb(1)", "cb", "alert(document.domain);cb"),  # the asked name is no identifier
    ("cb(1)", "cb", ""),
    ("a.b(1)", "a.b", "c"),
])
def test_anything_else_is_left_alone(script: str, captured: str, asked: str) -> None:
    assert rename_callback(script, captured, asked) is None


@pytest.mark.parametrize(("asked", "captured", "names"), [
    ("http://a.test/p.js?callback=jQuery_2&_=9", "http://a.test/p.js?_=1&callback=jQuery_1",
     ("jQuery_1", "jQuery_2")),
    ("http://a.test/p?jsonp=cb%5F2", "http://a.test/p?jsonp=cb_1", ("cb_1", "cb_2")),
    ("http://a.test/p?callback=same", "http://a.test/p?callback=same", None),  # nothing to rename
    ("http://a.test/p?callback=x", "http://a.test/p?jsonp=y", None),  # another parameter
    ("http://a.test/p?callback=a(1)", "http://a.test/p?callback=b", None),
    ("http://a.test/p?_=1", "http://a.test/p?_=2", None),
])
def test_callback_names_come_from_the_same_parameter(asked: str, captured: str, names) -> None:
    assert callback_names(asked, captured) == names


@given(LEAD, NAME, NAME, st.text(max_size=60))
def test_only_the_name_changes(lead: str, captured: str, asked: str, rest: str) -> None:
    script = f"{lead}{captured}({rest}"
    assert rename_callback(script, captured, asked) == f"{lead}{asked}({rest}"


@given(st.text(max_size=200), NAME, NAME)
def test_a_rename_changes_at_most_the_first_name(script: str, captured: str, asked: str) -> None:
    renamed = rename_callback(script, captured, asked)
    if renamed is not None:
        assert any(renamed == script[:at] + asked + script[at + len(captured):]
                   for at in range(len(script)) if script.startswith(captured, at))
        assert rename_callback(renamed, asked, captured) == script


@given(st.text(max_size=80), st.text(max_size=80))
def test_callback_names_are_plain_identifiers_or_none(first: str, second: str) -> None:
    names = callback_names(f"http://a.test/p?callback={first}", f"http://a.test/p?callback={second}")
    assert names is None or all(n.isascii() and n and not n[0].isdigit() for n in names)


@pytest.mark.parametrize("unit", ["/*", "/* *", "// \n", " ", "/**/"])
def test_the_rename_is_linear_in_the_script(unit: str) -> None:
    bad = unit * 200_000
    benign = "cb(" + "x" * (len(bad) - 3)
    assert_cost_bounded(lambda s: rename_callback(s, "cb", "other"), bad, benign, factor=20, label=unit)
