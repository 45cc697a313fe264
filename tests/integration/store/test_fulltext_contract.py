"""The full-text index behind ``archiver search``, run against both backends (SQLite FTS5 under the
archive root, PostgreSQL's tsvector tables of schema version 8): documents and the captures that
share them, relevance ranking with one result per URL, phrases, folding, dates, snippets, paging."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from archiver.store.embedded.fulltext import FtsIndex
from archiver.store.interfaces import FullTextStore
from archiver.store.models import IndexedCapture, SearchTimeout
from archiver.store.postgres.fulltext import PgFullText
from archiver.web.pagetext import PageText
from archiver.web.textquery import parse_query, plain_snippet, snippet_parts
from tests.support.fuzzing import assert_cost_bounded

A, B, C = "http://a.test/", "http://b.test/page", "http://c.test/x"
FILLER = " ".join(["lorem ipsum dolor sit amet"] * 8)


def page(title: str, headings: str, sentence: str) -> PageText:
    """A page's text: a sentence, then words that every page has."""
    return PageText(title, headings, f"{sentence} {FILLER}")


CAFE = page("Café du Port", "Menu", "Coffee by the river, not the sea.")


@pytest.fixture(params=["embedded", "postgresql"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FullTextStore]:
    store: FullTextStore
    if request.param == "embedded":
        store = FtsIndex(tmp_path / "search" / "fulltext.sqlite")
    else:
        store = PgFullText(request.getfixturevalue("pg_store_url"))
    yield store
    store.close()


def add(index: FullTextStore, pages: dict[tuple[str, str], PageText],
        captures: list[tuple[str, int, str, tuple[str, str] | None]]) -> None:
    index.add(pages, [IndexedCapture(*c) for c in captures])


def search(index: FullTextStore, text: str, **kwargs) -> list[tuple[str, list[str]]]:
    return [(hit.url, hit.timestamps) for hit in index.search(parse_query(text), **kwargs)]


@pytest.fixture
def archive(index: FullTextStore) -> FullTextStore:
    """A's page in two versions (captured three times), B's and C's in one."""
    add(index, {
        (A, "d1"): page("Harbour news", "The old harbour", "Boats leave the old harbour at dawn."),
        (A, "d2"): page("Harbour news", "The new harbour", "Ferries leave the new harbour at noon."),
        (B, "d3"): page("Mountain paths", "", "From the harbour a path climbs to the mountain."),
        (C, "d4"): CAFE,
    }, [("w1.warc.gz", 100, "20260101000000", (A, "d1")),
        ("w1.warc.gz", 900, "20260201000000", (B, "d3")),
        ("w2.warc.gz", 100, "20260301000000", (A, "d1")),
        ("w2.warc.gz", 500, "20260401000000", (A, "d2")),
        ("w2.warc.gz", 700, "20260401000000", (C, "d4")),
        ("w2.warc.gz", 800, "20260401000000", None)])
    return index


def test_one_result_per_url_with_every_matching_capture(archive):
    assert dict(search(archive, "harbour")) == {
        A: ["20260101000000", "20260301000000", "20260401000000"], B: ["20260201000000"]}
    assert search(archive, "dawn") == [(A, ["20260101000000", "20260301000000"])]
    assert search(archive, "ferries noon") == [(A, ["20260401000000"])]
    assert search(archive, "ferries dawn") == []


def test_a_word_in_the_title_or_headings_outranks_one_in_the_body(archive):
    assert [url for url, _ in search(archive, "harbour")] == [A, B]
    assert [url for url, _ in search(archive, "mountain")] == [B]
    assert [url for url, _ in search(archive, "menu")] == [C]


def test_a_phrase_needs_its_words_together_and_in_order(archive):
    assert [url for url, _ in search(archive, '"old harbour"')] == [A]
    assert search(archive, '"harbour old"') == []
    assert [url for url, _ in search(archive, '"path climbs" harbour')] == [B]


def test_case_and_accents_do_not_count(archive):
    for text in ("café", "CAFE", "Cafe", "cAfÉ"):
        assert [url for url, _ in search(archive, text)] == [C], text


def test_at_keeps_the_captures_at_or_before_the_date(archive):
    assert search(archive, "harbour", at="20260215000000") == [
        (A, ["20260101000000"]), (B, ["20260201000000"])]
    assert search(archive, "ferries", at="20260331235959") == []
    assert search(archive, "harbour", at="20260101000000") == [(A, ["20260101000000"])]


def test_title_and_a_snippet_with_its_matches_marked(archive):
    hit = archive.search(parse_query('"new harbour"'))[0]
    assert hit.title == "Harbour news"
    marked = " ".join(text for text, matched in snippet_parts(hit.snippet) if matched)
    assert marked.split() == ["new", "harbour"]  # as one mark or two, as the engine cuts it
    assert "new harbour at noon" in plain_snippet(hit.snippet)


def test_engine_syntax_in_a_query_is_only_words(archive):
    for text in ('title:harbour', 'harbour OR "', 'NEAR(boats dawn)', "-harbour*", "harbour^", "'harbour'"):
        search(archive, text)  # no syntax error, whatever the words find
    assert [url for url, _ in search(archive, "harbour AND")] == []
    assert [url for url, _ in search(archive, "harbour,dawn")] == []  # a phrase "harbour dawn"
    assert [url for url, _ in search(archive, "harbour;boats")] == []


def test_seen_documents_and_text_of_payloads(archive):
    assert archive.seen([("w1.warc.gz", 100), ("w2.warc.gz", 800), ("w9.warc.gz", 1)]) == {
        ("w1.warc.gz", 100), ("w2.warc.gz", 800)}
    assert archive.documents([(A, "d1"), (A, "d3"), (B, "d3")]) == {(A, "d1"), (B, "d3")}
    assert archive.text_of("d4") == CAFE
    assert archive.text_of("nothing") is None
    assert archive.counts() == (4, 5)


def test_adding_again_adds_nothing_twice(archive):
    add(archive, {(A, "d1"): PageText("Other", "", "different words")},
        [("w1.warc.gz", 100, "20260101000000", (A, "d1")), ("w3.warc.gz", 5, "20260501000000", (A, "d1"))])
    assert archive.counts() == (4, 6)
    assert search(archive, "dawn") == [(A, ["20260101000000", "20260301000000", "20260501000000"])]
    assert search(archive, "different") == []


def test_limit_and_offset_turn_the_pages(index):
    add(index, {(f"http://s{n}.test/", "d"): PageText(f"page {n}", "", "common " * (n + 1))
                for n in range(5)},
        [(f"w{n}.warc.gz", 0, "20260101000000", (f"http://s{n}.test/", "d")) for n in range(5)])
    everything = [url for url, _ in search(index, "common")]
    assert sorted(everything) == [f"http://s{n}.test/" for n in range(5)]
    pages = [[url for url, _ in search(index, "common", limit=2, offset=start)] for start in (0, 2, 4)]
    assert [url for page in pages for url in page] == everything and [len(p) for p in pages] == [2, 2, 1]


def test_a_search_past_its_deadline_stops_and_the_next_one_runs(index):
    pages = {(f"http://s{n}.test/", "d"): PageText("", "", f"common words {n} " * 40) for n in range(1500)}
    add(index, pages, [(f"w{n}.warc.gz", 0, "20260101000000", key) for n, key in enumerate(pages)])
    with pytest.raises(SearchTimeout):
        index.search(parse_query("common"), deadline=0)
    assert len(index.search(parse_query("common"), limit=3, deadline=60)) == 3
    assert [hit.url for hit in index.search(parse_query('"words 7 common"'))] == ["http://s7.test/"]


def test_pages_repeating_a_word_thousands_of_times_cost_a_search_little(index):
    """30 pages each repeating "harbour" 3,000 times: FTS5's snippet() cost the square of the
    repeats (1.3 s for this search); now a search for it costs about what one for a word of
    ordinary pages of the same length does."""
    prose = " ".join(f"{FILLER} haven {n}" for n in range(120))  # about 24,000 characters
    pages = {(f"http://o{n}.test/", "d"): PageText(f"page {n}", "", prose) for n in range(30)}
    pages |= {(f"http://r{n}.test/", "d"): PageText(f"page {n}", "", "harbour " * 3000)
              for n in range(30)}
    add(index, pages, [(f"w{n}.warc.gz", 0, "20260101000000", key) for n, key in enumerate(pages)])

    def run(word: str) -> None:
        hits = index.search(parse_query(word))
        assert len(hits) == 20 and all(f"\x02{word}\x03" in hit.snippet.lower() for hit in hits)

    assert_cost_bounded(run, "harbour", "haven", factor=5, label="repeated word")


def test_clear_forgets_everything(archive):
    archive.clear()
    assert archive.counts() == (0, 0)
    assert archive.seen([("w1.warc.gz", 100)]) == set()
    assert search(archive, "harbour") == []
