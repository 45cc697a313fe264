"""Fuzz tests for archiver.replay.cdxquery: any parameters give a query or a CdxError, and any
query selects and renders its lines in time linear in the listing and in its parameters."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.replay.cdxquery import (
    FIELDS,
    MAX_LIMIT,
    UNSUPPORTED,
    CdxError,
    CdxQuery,
    parse_query,
    render,
    select,
)
from archiver.store.catalogkeys import surt_key
from archiver.store.models import Capture
from tests.support.fuzzing import assert_cost_bounded, corpus, examples

_STAMPS = ["19960101000000", "20200101000000", "20200601123456", "20210101000000", "20991231235959"]


def _listing(url: str = "http://example.org/" + "a" * 40) -> list[Capture]:
    """Captures in (urlkey, timestamp) order, with every field kind: missing status, redirect..."""
    out = []
    for i, stamp in enumerate(_STAMPS):
        out.append(
            Capture(
                urlkey=surt_key(url), timestamp=stamp, url=url, status=[200, None, 404, 302, 200][i],
                mime=["text/html", "-", "image/png", "text/html", "warc/revisit"][i],
                digest=f"sha1:{'AB'[i % 2]}",
                redirect="http://example.org/next" if i == 3 else None, filename="a.warc.gz", offset=i,
                length=100 + i, rectype="revisit" if i == 4 else "response",
            )
        )  # fmt: skip
    return out


def _run(query: CdxQuery, captures: list[Capture]) -> list[str]:
    return [render(query, row) for row in select(query, captures)]


# --- generators --------------------------------------------------------------------------------

_NAMES = st.sampled_from(
    ["url", "matchType", "from", "to", "closest", "sort", "limit", "fl", "fields", "output", "collapseTime",
     "filter", "collapse", *UNSUPPORTED, "x", "", "URL"]
)  # fmt: skip
_FIELD_NAMES = st.sampled_from([*FIELDS, "original", "mimetype", "statuscode", "rectype", "", "x"])
_DATES = st.one_of(
    st.text("0123456789", max_size=20),
    st.sampled_from(["2026-11-22", "2026-02-30", "2026-11-22T03:15:00Z", "9999-12-31T23:59:59-23:59",
                     "0001-01-01T00:00+01:00", "2026-13", "00000000000000", "99999999999999", "٢٠٢٦"]),
    st.text(max_size=10),
)  # fmt: skip
_INTEGERS = st.one_of(
    st.integers(-2 * MAX_LIMIT, 2 * MAX_LIMIT).map(str),
    st.sampled_from(["0", "-0", "+5", " 5", "5 ", "1_000", "²", "٣", "1e3", "9" * 5000, "-9" * 2500, ""]),
)
_REGEXES = st.sampled_from(
    ["", ".*", "(", ")", "[", "a{99999999999999999999}", "a{4294967295}", "(?<=a)b", "\\", "(?P<x>a)(?P=x)",
     "(" * 3000 + ")" * 3000, "(a+)+$", "(a|a)*$", "(.*a){20}", "[[:alpha:]]", "\\p{L}", "(?i)TEXT"]
) | st.text(max_size=8)  # fmt: skip


@st.composite
def _value(draw: st.DrawFn, name: str) -> str:
    if name == "url":
        return draw(st.sampled_from(["example.org/", "*.example.org", "example.org/*", "*", "", "*."])
                    | st.text(max_size=20))  # fmt: skip
    if name == "matchType":
        return draw(st.sampled_from(["exact", "prefix", "host", "domain", "", "EXACT"]))
    if name in ("from", "to", "closest"):
        return draw(_DATES)
    if name in ("limit", "collapseTime"):
        return draw(_INTEGERS)
    if name in ("sort", "output"):
        return draw(st.sampled_from(["closest", "reverse", "", "cdxj", "json", "text", "link"]))
    if name in ("fl", "fields"):
        return ",".join(draw(st.lists(_FIELD_NAMES, max_size=4)))
    if name == "filter":
        bang = draw(st.sampled_from(["", "!"]))
        mode = draw(st.sampled_from(["", "=", "~"]))
        field = draw(st.sampled_from(["", "url:", "status:", "mime:", "x:", "original:"]))
        value = draw(_REGEXES) if mode == "~" else draw(st.text(max_size=8))
        return bang + mode + field + value
    if name == "collapse":
        count = draw(st.sampled_from(["", ":", ":4", ":0", ":-1", ":²", ":" + "9" * 5000]))
        return draw(_FIELD_NAMES) + count
    return draw(st.sampled_from(["", "false", "0", "true", "1", "off"]) | st.text(max_size=5))


@st.composite
def _params(draw: st.DrawFn) -> list[tuple[str, str]]:
    params = [("url", "example.org/")] if draw(st.booleans()) else []
    for name in draw(st.lists(_NAMES, max_size=8)):
        params.append((name, draw(_value(name))))
    return params


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=examples(200), deadline=None)
@given(_params())
def test_any_parameters_give_a_query_or_a_cdx_error(params: list[tuple[str, str]]) -> None:
    try:
        query = parse_query(params)
    except CdxError as exc:
        assert str(exc)
        return
    assert isinstance(query, CdxQuery)
    lines = _run(query, _listing())
    assert len(lines) <= abs(query.limit)
    for line in lines:
        assert line.endswith("\n") and "\n" not in line[:-1]
        if query.output == "json":
            assert isinstance(json.loads(line), dict)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.text(max_size=12)), max_size=6))
def test_arbitrary_pairs_give_a_query_or_a_cdx_error(params: list[tuple[str, str]]) -> None:
    with contextlib.suppress(CdxError):
        parse_query(params)


# --- bounded time ------------------------------------------------------------------------------

_BIG = 2**20
# Captures of long URLs of one character, the food of a backtracking regex.
_LONG_LISTING = _listing("http://example.org/" + "a" * 200) * 20
_URL = ("url", "example.org/")


def _parse_and_select(params: list[tuple[str, str]]) -> None:
    try:
        query = parse_query(params)
    except CdxError:
        return
    _run(query, _LONG_LISTING)


def _benign(params: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """An ordinary query whose parameters hold as many characters as ``params`` do."""
    size = sum(len(name) + len(value) for name, value in params)
    query = [_URL, ("filter", "~url:http://example\\.org/a*"), ("fl", "url,timestamp"), ("output", "json")]
    return [*query, ("x", "a" * max(0, size - sum(len(n) + len(v) for n, v in query)))]


_PATHOLOGICAL = {
    "catastrophic regex": [_URL, ("filter", "~url:http://example\\.org/(a+)+b")],
    "catastrophic alternation": [_URL, ("filter", "~url:http://example\\.org/(a|aa)*b")],
    "nested repeats": [_URL, ("filter", "~url:http://example\\.org/((a*)*)*b")],
    "counted repeats": [_URL, ("filter", "~url:(.*a){30}b")],
    "1 MiB url": [("url", "a" * _BIG)],
    "1 MiB filter": [_URL, ("filter", "url:" + "a" * _BIG)],
    "1 MiB regex": [_URL, ("filter", "~url:" + "a" * _BIG)],
    "1 MiB regex of groups": [_URL, ("filter", "~url:" + "(a)" * (_BIG // 3))],
    "deep regex": [_URL, ("filter", "~url:" + "(" * 50_000 + "a" + ")" * 50_000)],
    "4096 characters of regex groups": [_URL, ("filter", "~url:" + "((a)" * 1000 + ")" * 1000)],
    "10^4 filters": [_URL] + [("filter", "!url:b")] * 10_000,
    "10^4 regex filters": [_URL] + [("filter", "~url:" + "a?" * 2000)] * 10_000,
    "10^4 collapses": [_URL] + [("collapse", "url")] * 10_000,
    "10^5 fields": [_URL, ("fl", ",".join(["url"] * 100_000))],
    "1 MiB closest": [_URL, ("closest", "2" * _BIG)],
    "1 MiB limit": [_URL, ("limit", "9" * _BIG)],
    "1 MiB collapseTime": [_URL, ("collapseTime", "9" * _BIG)],
    "1 MiB unknown parameter": [_URL, ("x", "a" * _BIG)],
}


@pytest.mark.parametrize("name", _PATHOLOGICAL)
def test_pathological_queries_cost_what_a_benign_query_of_their_size_does(name: str) -> None:
    params = _PATHOLOGICAL[name]
    assert_cost_bounded(_parse_and_select, params, _benign(params), factor=10, label=name)


# --- corpus ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", corpus("cdxquery"), ids=lambda p: p.name)
def test_corpus(path: Path) -> None:
    """Each file is a query string, as the CDX endpoint receives it."""
    params = parse_qsl(path.read_text(), keep_blank_values=True)
    with contextlib.suppress(CdxError):
        _run(parse_query(params), _listing())
    assert_cost_bounded(_parse_and_select, params, _benign(params), factor=10, label=path.name)
