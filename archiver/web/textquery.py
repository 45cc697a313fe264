"""Full-text queries as users type them, and the same query in each engine's syntax (pure logic).

A query is words and "quoted phrases"; a result must hold all of them (AND), a phrase's words
next to each other in that order. A word is a run of letters and digits: anything else
separates words, so ``site-000`` or ``example.org`` is the phrase of its words, as the engines
split the page text. There is no operator: ``OR``, ``NOT``, ``-``, ``*``, ``:`` and the like are
punctuation or words like any other, and the user's text never reaches an engine's syntax:
each phrase is rebuilt from its words (``SearchQuery.fts5``, ``SearchQuery.tsquery``), so no
query can fail to parse there. Case and accents do not count (``fold``).

Snippets (``cut_snippet``, for both engines) hold their matches between ``MARK_START`` and
``MARK_END`` (control characters, which page text never holds): ``snippet_parts`` splits them.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from dataclasses import dataclass

MAX_QUERY = 500
MAX_PHRASES = 16
MAX_PHRASE_WORDS = 32
MARK_START = "\x02"
MARK_END = "\x03"
_WORD = re.compile(r"[^\W_]+")
_PIECE = re.compile(r'"([^"]*)"?|([^\s"]+)')
_MARKS = re.compile(f"([{MARK_START}{MARK_END}])")


class QueryError(ValueError):
    """A query that cannot be searched for; the message says why."""


@dataclass(frozen=True)
class SearchQuery:
    """A parsed query: its phrases, each a tuple of words (a lone word is a phrase of one)."""

    text: str
    phrases: tuple[tuple[str, ...], ...]

    def fts5(self) -> str:
        """The query as an SQLite FTS5 MATCH expression: each phrase a quoted string of words
        (letters and digits only, so nothing in it is FTS5 syntax), all of them required."""
        return " AND ".join('"' + " ".join(phrase) + '"' for phrase in self.phrases)

    def tsquery(self) -> str:
        """The query as PostgreSQL ``to_tsquery`` text over folded words (split again: a
        fraction such as "¼" folds to digits around a slash): each phrase its quoted lexemes
        joined by ``<->``, all of them joined by ``&``."""
        folded = [[part for word in phrase for part in folded_words(word)] for phrase in self.phrases]
        return " & ".join("(" + " <-> ".join(f"'{word}'" for word in words) + ")"
                          for words in folded if words)


def parse_query(text: str) -> SearchQuery:
    """The query in ``text``; QueryError if it is empty, too long, or has no word to look for."""
    if len(text) > MAX_QUERY:
        raise QueryError(f"the query is {len(text)} characters long; at most {MAX_QUERY}")
    phrases = []
    for match in _PIECE.finditer(text):
        words = tuple(_WORD.findall(match.group(1) if match.group(1) is not None else match.group(2)))
        if words and words not in phrases:
            phrases.append(words)
    if not phrases:
        raise QueryError(f"nothing to search for in {text.strip()[:80]!r}: give words (letters or "
                         'digits), or "a phrase" in double quotes')
    if len(phrases) > MAX_PHRASES:
        raise QueryError(f"the query has {len(phrases)} words and phrases; at most {MAX_PHRASES}")
    if any(len(phrase) > MAX_PHRASE_WORDS for phrase in phrases):
        raise QueryError(f"a phrase of the query has more than {MAX_PHRASE_WORDS} words")
    return SearchQuery(text, tuple(phrases))


def fold(text: str) -> str:
    """``text`` without case or accents ("Café" -> "cafe"): what both engines compare."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKD", text.casefold()).translate(_combining_marks())


def folded_words(text: str) -> list[str]:
    """The folded words of ``text``, split as ``parse_query`` splits a query: what the PostgreSQL
    index is built from."""
    return _WORD.findall(fold(text))


@functools.cache
def _combining_marks() -> dict[int, None]:
    """A ``str.translate`` table that deletes every combining mark (accents once decomposed)."""
    return {code: None for code in range(sys.maxunicode + 1) if unicodedata.combining(chr(code))}


def cut_snippet(text: str, query: SearchQuery, words: int) -> str:
    """About ``words`` words of ``text`` from a little before the first match of any of the
    query's phrases, every match in them between ``MARK_START`` and ``MARK_END``, and "…" where
    text was left out; the first words if nothing matches. Reads ``text`` up to the snippet's
    end (the whole of it when nothing matches: a page found by its title), looking at the
    phrases that end with each word only: linear in the text read, however often a word repeats."""
    ending: dict[str, list[list[str]]] = {}  # the phrases by their last word
    for words_of_phrase in query.phrases:
        if folded := folded_words(" ".join(words_of_phrase)):
            ending.setdefault(folded[-1], []).append(folded)
    found: list[str] = []  # the folded words read so far, each with the span of its token
    spans: list[tuple[int, int]] = []
    matches: list[tuple[int, int]] = []  # word index ranges
    stop = 0
    for token in _WORD.finditer(text):
        piece = token.group()
        for word in (piece.lower(),) if piece.isascii() else folded_words(piece):
            found.append(word)
            spans.append(token.span())
            for phrase in ending.get(word, []):
                if found[-len(phrase):] == phrase:
                    if not matches:
                        stop = len(found) - len(phrase) + words
                    matches.append((len(found) - len(phrase), len(found)))
        if matches and len(found) >= stop:
            break
    if not found:
        return text[: words * 8]
    first = max(0, matches[0][0] - words // 4) if matches else 0
    last = min(len(found), first + words)
    marks = [(spans[start][0], spans[end - 1][1]) for start, end in matches if first <= start and end <= last]
    cut, at = [], spans[first][0]
    for start, end in marks:
        if start >= at:
            cut += [text[at:start], MARK_START, text[start:end], MARK_END]
            at = end
    end = spans[last - 1][1]
    more = _WORD.search(text, end) is not None
    cut.append(text[at:end] + ("…" if more else text[end:].rstrip()))
    return ("…" if first else "") + "".join(cut)


def snippet_parts(snippet: str) -> list[tuple[str, bool]]:
    """A marked snippet as (text, is a match) pieces, in order, empty pieces left out."""
    parts = []
    marked = False
    for piece in _MARKS.split(snippet):
        if piece in (MARK_START, MARK_END):
            marked = piece == MARK_START
        elif piece:
            parts.append((piece, marked))
    return parts


def plain_snippet(snippet: str) -> str:
    """A marked snippet without its marks."""
    return snippet.replace(MARK_START, "").replace(MARK_END, "")
