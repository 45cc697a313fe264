"""Full-text queries (archiver.web.textquery): words and phrases, rebuilt for each engine from
their words alone, so no user text reaches an engine's syntax."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.textquery import (
    MARK_END,
    MARK_START,
    MAX_QUERY,
    QueryError,
    cut_snippet,
    fold,
    folded_words,
    parse_query,
    plain_snippet,
    snippet_parts,
)
from tests.support.fuzzing import examples


def test_words_and_quoted_phrases():
    query = parse_query('harbour "old river mouth" fish')
    assert query.phrases == (("harbour",), ("old", "river", "mouth"), ("fish",))
    assert query.fts5() == '"harbour" AND "old river mouth" AND "fish"'
    assert query.tsquery() == "('harbour') & ('old' <-> 'river' <-> 'mouth') & ('fish')"


def test_punctuation_separates_words_as_the_engines_split_page_text():
    assert parse_query("site-000.example").phrases == (("site", "000", "example"),)
    assert parse_query('"unclosed phrase here').phrases == (("unclosed", "phrase", "here"),)
    assert parse_query("a_b").phrases == (("a", "b"),)


def test_operators_of_the_engines_are_plain_words_or_punctuation():
    query = parse_query('title:harbour OR NOT -fish* NEAR(a b) ^start "x" AND')
    assert query.phrases == (("title", "harbour"), ("OR",), ("NOT",), ("fish",), ("NEAR", "a"),
                             ("b",), ("start",), ("x",), ("AND",))
    assert query.fts5().count('"') == 2 * len(query.phrases)
    assert "'or'" in query.tsquery() and "'not'" in query.tsquery()


def test_a_repeated_word_is_asked_once():
    assert parse_query("fish Fish fish").phrases == (("fish",), ("Fish",))


@pytest.mark.parametrize("text", ["", "   ", '""', "!!! ... ---", "_"])
def test_a_query_without_words_is_refused(text):
    with pytest.raises(QueryError, match="nothing to search for"):
        parse_query(text)


def test_limits():
    with pytest.raises(QueryError, match="at most 500"):
        parse_query("a" * (MAX_QUERY + 1))
    with pytest.raises(QueryError, match="at most 16"):
        parse_query(" ".join(f"w{i}" for i in range(17)))
    with pytest.raises(QueryError, match="more than 32 words"):
        parse_query('"' + " ".join(f"w{i}" for i in range(33)) + '"')


def test_folding_drops_case_and_accents():
    assert fold("Café NAÏVE Straße") == "cafe naive strasse"
    assert folded_words("L'été, à Zürich: 20°C!") == ["l", "ete", "a", "zurich", "20", "c"]
    assert folded_words("Ärger ǅ ﬁne Ωmega") == ["arger", "dz", "fine", "ωmega"]
    assert parse_query("Zürich").tsquery() == "('zurich')"


def test_snippet_marks():
    snippet = f"…the {MARK_START}old harbour{MARK_END} at {MARK_START}dawn{MARK_END}"
    assert snippet_parts(snippet) == [("…the ", False), ("old harbour", True), (" at ", False),
                                      ("dawn", True)]
    assert plain_snippet(snippet) == "…the old harbour at dawn"


def test_a_snippet_starts_a_little_before_the_first_match_and_marks_every_match():
    text = " ".join(f"w{n}" for n in range(100)) + " Old  Harbour, old harbour! w100 " + "tail " * 50
    snippet = cut_snippet(text, parse_query('"old harbour" w103'), words=12)
    s, e = MARK_START, MARK_END
    assert snippet == f"…w97 w98 w99 {s}Old  Harbour{e}, {s}old harbour{e}! w100 tail tail tail tail…"
    assert cut_snippet("Café au lait.", parse_query("cafe"), words=12) == f"{s}Café{e} au lait."


def test_a_snippet_without_a_match_is_the_first_words():
    assert cut_snippet("one two three four five", parse_query("zebra"), words=3) == "one two three…"
    assert cut_snippet("one two", parse_query("zebra"), words=3) == "one two"
    assert cut_snippet("", parse_query("zebra"), words=3) == ""
    assert cut_snippet("--- ...", parse_query("zebra"), words=3) == "--- ..."


@settings(max_examples=examples(200), deadline=None)
@given(st.text(st.characters(blacklist_categories=["Cc", "Cs"]), max_size=300),
       st.sampled_from(["a", '"a b"', "b c", "é", "1"]), st.integers(1, 30))
def test_a_snippet_is_the_text_with_marks_and_cuts(text, query, words):
    snippet = cut_snippet(text, parse_query(query), words)
    plain = plain_snippet(snippet)
    assert plain.removeprefix("…").removesuffix("…") in text
    assert snippet.count(MARK_START) == snippet.count(MARK_END)
    assert len(re.findall(r"[^\W_]+", plain)) <= words


_FTS5_STRING = re.compile(r'"[^\W_]+(?: [^\W_]+)*"')
_LEXEME = re.compile(r"'[^\W_]+'")


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=MAX_QUERY))
def test_any_text_is_a_query_or_refused_with_a_reason(text):
    try:
        query = parse_query(text)
    except QueryError as e:
        assert str(e)
        return
    # Each engine gets quoted runs of letters and digits and its own operators, nothing else.
    assert all(_FTS5_STRING.fullmatch(part) for part in query.fts5().split(" AND "))
    tsquery = _LEXEME.sub("L", query.tsquery())
    assert re.fullmatch(r"\(L(?: <-> L)*\)(?: & \(L(?: <-> L)*\))*", tsquery), query.tsquery()
