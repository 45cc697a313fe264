"""Fuzz tests for archiver.web.pagetext: any bytes give text or nothing, never an exception, within
the bounds, in time linear in the size (what link extraction's pathological pages cost)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.pagetext import MAX_BODY, MAX_HEADINGS, MAX_TITLE, PageText, page_text, response_text
from tests.support.fuzzing import CHARSETS, assert_cost_bounded, corpus, encoded, examples, html_documents
from tests.unit.web.test_extract_fuzz import _PATHOLOGICAL_HTML, _benign_html

_CONTROLS = {*map(chr, range(0x20)), *map(chr, range(0x7F, 0xA0))}
_CODINGS = st.sampled_from([None, "", "gzip", "deflate", "br", "x-gzip", "gzip, br", "identity", "zstd"])


def _check(page: PageText | None) -> None:
    if page is None:
        return
    assert isinstance(page, PageText) and (page.title or page.headings or page.body)
    assert len(page.title) <= MAX_TITLE and len(page.headings) <= MAX_HEADINGS
    assert len(page.body) <= MAX_BODY
    assert not _CONTROLS & set(page.title + page.body)
    assert not _CONTROLS & set(page.headings.replace("\n", ""))
    for text in (page.title, page.body, *page.headings.split("\n")):
        assert text == text.strip() and "  " not in text


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=3000), CHARSETS, _CODINGS)
def test_any_bytes_give_text_or_nothing(body: bytes, charset: str | None, coding: str | None) -> None:
    _check(page_text(body, f"text/html; charset={charset}" if charset else None, coding))


@settings(max_examples=examples(40), deadline=None)
@given(encoded(html_documents()), CHARSETS)
def test_near_valid_html_gives_text_within_bounds(body: bytes, charset: str | None) -> None:
    _check(page_text(body, f"text/html; charset={charset}" if charset else None))


@settings(max_examples=examples(100), deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_any_response_head_is_read(head: bytes, body: bytes) -> None:
    _check(response_text(head, body))


@pytest.mark.parametrize("name", ["10^5 nested divs", "10^5 unclosed divs with text", "misnested formatting",
                                  "nested formatting, distinct attributes", "run of <"])
def test_pathological_html_costs_what_a_benign_page_of_its_size_does(name: str) -> None:
    """A benign page stops once its body is full, so the budget is twice link extraction's."""
    body = _PATHOLOGICAL_HTML[name]
    _check(page_text(body))
    assert_cost_bounded(page_text, body, _benign_html(len(body)), factor=20, label=name)


@pytest.mark.parametrize("path", corpus("html"), ids=lambda p: p.name)
def test_html_corpus(path: Path) -> None:
    body = path.read_bytes()
    _check(page_text(body))
    assert_cost_bounded(page_text, body, _benign_html(len(body)), factor=20, label=path.name)
