"""The full-text index in PostgreSQL: the behaviour of ``store.embedded.fulltext.FtsIndex``, two shared
tables.

``fulltext_documents`` (schema version 8 in ``store.postgres.schema``) holds one row per distinct page
text, keyed by (URL, payload digest), with a ``tsvector`` under a GIN index (``words``): the
text's folded words (``web.textquery.folded_words``) with their positions, the title weighing
A, the headings B, the body C. The vector is built here, not by a text search configuration, so
both backends split, fold and match words alike, in any language: no stemming, no stop words,
no phrase across two parts of a page. (A tsvector keeps positions up to 16,383: a phrase further
into a long body is not found, its words still are.) Queries use the ``simple`` configuration,
which only lowercases.
``fulltext_captures`` holds every catalog entry the index has taken, by WARC file and offset,
with its timestamp and document.

A search ranks documents with ``ts_rank`` (weights title 1.0, headings 0.5, body 0.1, divided by
one plus the log of the length: the proportions of the embedded index's BM25 weights), reading
every matching page's vector, and keeps one result per URL; ``web.textquery.cut_snippet`` cuts
the snippet (``ts_headline`` would parse the whole text again: 2 to 6 ms a result on the
benchmark's pages). The connection is in autocommit: each ``add`` is one transaction, each search
one read-only transaction (where its ``statement_timeout`` holds). Each call is run again on a
new connection if the server went away (``store.postgres.connection``): the adds skip what is there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

import psycopg

from archiver.store.models import (
    LATEST,
    SNIPPET_WORDS,
    DocumentKey,
    IndexedCapture,
    SearchHit,
    SearchTimeout,
)
from archiver.store.postgres.connection import PgConnection, StoreWatch, retried
from archiver.web.pagetext import PageText
from archiver.web.textquery import QueryError, SearchQuery, cut_snippet, folded_words

_ADD_DOCUMENT = """
INSERT INTO fulltext_documents (url, digest, title, headings, body, words) VALUES (
    %s, %s, %s, %s, %s,
    setweight(%s::tsvector, 'A') || setweight(%s::tsvector, 'B') || setweight(%s::tsvector, 'C'))
ON CONFLICT (url, digest) DO NOTHING
"""
# PostgreSQL's limits on a tsvector: positions per word, a word's 2,046 bytes (511 characters of
# up to 4 bytes).
MAX_POSITIONS = 256
MAX_WORD_CHARS = 511
_ADD_CAPTURE = """
INSERT INTO fulltext_captures (file, pos, ts, doc)
SELECT %s, %s, %s, (SELECT id FROM fulltext_documents WHERE url = %s AND digest = %s)
ON CONFLICT (file, pos) DO NOTHING
"""
_RANKED = """
WITH query AS (SELECT to_tsquery('simple', %(query)s) AS q), hits AS (
    SELECT d.id, d.url, ts_rank('{0.1, 0.1, 0.5, 1.0}', d.words, query.q, 1) AS score
    FROM fulltext_documents d, query
    WHERE d.words @@ query.q
      AND EXISTS (SELECT 1 FROM fulltext_captures c WHERE c.doc = d.id AND c.ts <= %(at)s)
)
SELECT url, (array_agg(id ORDER BY score DESC, id))[1], array_agg(id) FROM hits
GROUP BY url ORDER BY max(score) DESC, url LIMIT %(limit)s OFFSET %(offset)s
"""


class PgFullText:
    """The full-text index in the PostgreSQL database at ``url``."""

    def __init__(self, url: str, *, readonly: bool = False, watch: StoreWatch | None = None) -> None:
        self._db = PgConnection(url, readonly=readonly, watch=watch)

    def __enter__(self) -> PgFullText:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def seen(self, records: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        """Of these (WARC file, offset) pairs, those the index holds a capture of."""
        files, offsets = _columns(records)
        rows = self._db.read(
            "SELECT file, pos FROM fulltext_captures WHERE (file, pos) IN"
            " (SELECT * FROM unnest(%s::text[], %s::bigint[]))", (files, offsets))
        return {(file, int(pos)) for file, pos in rows}

    def documents(self, keys: Iterable[DocumentKey]) -> set[DocumentKey]:
        """Of these documents, those the index holds."""
        urls, digests = _columns(keys)
        rows = self._db.read(
            "SELECT url, digest FROM fulltext_documents WHERE (url, digest) IN"
            " (SELECT * FROM unnest(%s::text[], %s::text[]))", (urls, digests))
        return {(url, digest) for url, digest in rows}

    @retried
    def text_of(self, digest: str) -> PageText | None:
        """The text of a document with payload ``digest``, under any URL; None if there is none."""
        row = self._db.execute("SELECT title, headings, body FROM fulltext_documents WHERE digest = %s"
                               " LIMIT 1", (digest,)).fetchone()
        return None if row is None else PageText(*row)

    def add(self, documents: Mapping[DocumentKey, PageText], captures: Iterable[IndexedCapture]) -> None:
        """New documents and captures, in one transaction; those already there are skipped."""
        pages = [(url, digest, text.title, text.headings, text.body, vector(text.title),
                  vector(text.headings), vector(text.body))
                 for (url, digest), text in documents.items()]
        rows = [(c.filename, c.offset, c.timestamp, *(c.document or (None, None))) for c in captures]

        def write() -> None:
            with self._db.transaction(), self._db.cursor() as cursor:
                if pages:
                    cursor.executemany(_ADD_DOCUMENT, pages)
                if rows:
                    cursor.executemany(_ADD_CAPTURE, rows)

        self._db.run(write)  # twice is harmless: both inserts skip what is there

    def search(self, query: SearchQuery, *, at: str | None = None, limit: int = 20, offset: int = 0,
               deadline: float | None = None) -> list[SearchHit]:
        """The URLs whose pages match ``query`` in a capture at or before ``at`` (14 digits; None:
        any), best first, ``limit`` of them from ``offset``; SearchTimeout when a statement runs
        past ``deadline`` seconds (``statement_timeout``, for this search's transaction only)."""
        at = at or LATEST
        terms = query.tsquery()

        def ranked() -> list[SearchHit]:
            with self._db.transaction():
                if deadline is not None:
                    self._db.execute("SELECT set_config('statement_timeout', %s, true)",
                                     (f"{max(1, round(deadline * 1000))}ms",))
                rows = self._db.execute(_RANKED, {"query": terms, "at": at, "limit": limit,
                                                  "offset": offset}).fetchall()
                return [self._hit(query, at, *row) for row in rows]

        try:
            return self._db.run(ranked)
        except psycopg.errors.QueryCanceled:
            raise SearchTimeout(f"the search ran past its deadline of {deadline:g} s") from None
        except psycopg.errors.SyntaxError as e:
            raise QueryError(f"the index cannot search for {query.text!r}: {e}") from None

    def _hit(self, query: SearchQuery, at: str, url: str, best: int, docs: list[int]) -> SearchHit:
        """One result: its dates at or before ``at``, the title and a snippet of document ``best``."""
        stamps = self._db.execute("SELECT DISTINCT ts FROM fulltext_captures WHERE doc = ANY(%s)"
                                  " AND ts <= %s ORDER BY ts", (docs, at)).fetchall()
        found = self._db.execute("SELECT title, body FROM fulltext_documents WHERE id = %s",
                                 (best,)).fetchone()
        assert found is not None  # the document's row, which the ranking just read
        title, body = found
        return SearchHit(url, title, cut_snippet(body, query, SNIPPET_WORDS), [ts for (ts,) in stamps])

    @retried
    def counts(self) -> tuple[int, int]:
        """How many documents the index holds, and how many captures with text."""
        row = self._db.execute("SELECT (SELECT count(*) FROM fulltext_documents),"
                               " (SELECT count(*) FROM fulltext_captures WHERE doc IS NOT NULL)").fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    @retried
    def clear(self) -> None:
        """Forget everything (``archiver search index --rebuild``), in one transaction."""
        self._db.execute("TRUNCATE fulltext_captures, fulltext_documents")

    def close(self) -> None:
        self._db.close()


def vector(text: str) -> str:
    """The ``tsvector`` of one part of a page, as text: its folded words (``folded_words``) with
    their positions from 2 on. The add joins the parts with ``||``, which moves each part's
    positions past the last of the part before: position 1 stays empty between them, so no phrase
    runs across two. PostgreSQL keeps positions up to 16,383 (later words keep that position:
    found, but not as a phrase) and 256 of them per word; a longer word than it allows is left
    out."""
    positions: defaultdict[str, list[int]] = defaultdict(list)
    for at, word in enumerate(folded_words(text), 2):
        positions[word].append(at)
    return " ".join(f"'{word}':{','.join(map(str, found[:MAX_POSITIONS]))}"
                    for word, found in positions.items() if len(word) <= MAX_WORD_CHARS)


def _columns(pairs: Iterable[tuple[str, object]]) -> tuple[list[str], list[object]]:
    """Pairs as two lists, for ``unnest``."""
    listed = list(pairs)
    return [a for a, _ in listed], [b for _, b in listed]
