"""The full-text index of the archive's HTML pages, embedded: one SQLite FTS5 database.

``<root>/search/fulltext.sqlite`` holds three tables:

- ``documents``: one row per distinct page text, keyed by (URL, payload digest): every capture
  of a URL with the same payload shares it, so a page captured a hundred times unchanged is
  indexed once;
- ``pages``: the FTS5 table (columns title, headings, body; rowid = the document's id), tokenized
  by ``unicode61 remove_diacritics 2`` (words are runs of letters and digits; case and accents do
  not count, as ``web.textquery.fold`` says);
- ``captures``: every catalog entry the index has taken (by WARC file and offset) with its
  timestamp and its document; a capture with no text (its page had none, or a revisit of a page
  that is not indexed) has none, and is not looked at again.

A search ranks documents by BM25 (title weighing 10, headings 5, body 1), keeps one result per
URL (its best document; the timestamps of all its matching captures) and cuts a snippet from the
best document's body with ``web.textquery.cut_snippet``, as the PostgreSQL index does: FTS5's own
``snippet()`` costs the square of how often the words appear in the body (one page repeating a
word 12,500 times: 1.2 s), and a deadline cannot interrupt it. It ranks every matching document,
so a deadline may stop it; the deadline is looked at again after each snippet. The file is
written in WAL mode by ``archiver search index``; the replay and ``archiver search`` read it
read-only meanwhile. An FtsIndex is used from one thread at a time.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from archiver.store.embedded import sqlite
from archiver.store.models import LATEST, SNIPPET_WORDS, DocumentKey, IndexedCapture, SearchHit, SearchTimeout
from archiver.web.pagetext import PageText
from archiver.web.textquery import QueryError, SearchQuery, cut_snippet

# SQLite's wait for another process's write transaction: each one is a batch of a few hundred pages.
_TIMEOUT = 60.0
# SQLite virtual machine steps between two looks at a search's deadline (well under a millisecond).
_PROGRESS_STEPS = 10_000
_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL,
    digest TEXT NOT NULL,
    UNIQUE (url, digest)
);
CREATE INDEX IF NOT EXISTS documents_digest ON documents (digest);
CREATE VIRTUAL TABLE IF NOT EXISTS pages USING fts5(
    title, headings, body, tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS captures (
    file TEXT NOT NULL,
    pos INTEGER NOT NULL,
    ts TEXT NOT NULL,
    doc INTEGER,
    PRIMARY KEY (file, pos)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS captures_doc ON captures (doc, ts);
"""
# The best document of each matching URL among those with a capture at or before a date. (With
# one min(), SQLite takes the bare column ``doc`` from the row holding the minimum.)
_RANKED = """
WITH matched AS MATERIALIZED (
    SELECT rowid AS doc, bm25(pages, 10.0, 5.0, 1.0) AS score FROM pages WHERE pages MATCH :query
), dated AS (
    SELECT documents.url, matched.doc, matched.score FROM matched
    JOIN documents ON documents.id = matched.doc
    WHERE EXISTS (SELECT 1 FROM captures WHERE captures.doc = matched.doc AND captures.ts <= :at)
)
SELECT url, min(score) AS best, doc, group_concat(doc) FROM dated
GROUP BY url ORDER BY best, url LIMIT :limit OFFSET :offset
"""
_TEXT = "SELECT title, body FROM pages WHERE rowid = ?"


class FullTextMissing(FileNotFoundError):
    """No full-text index has been built yet (``archiver search index`` makes it)."""


class _PastDeadline(Exception):
    """The clock passed a search's deadline between two statements."""


class FtsIndex:
    """The embedded full-text index in ``path`` (made by a writer; FullTextMissing for a reader
    when absent)."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        if readonly:
            if not path.exists():
                raise FullTextMissing(f"no full-text index at {path}: run `archiver search index` first")
            self._db = sqlite.open_reader(path, _TIMEOUT)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite.open_writer(path, _TIMEOUT)
            self._db.executescript(_SCHEMA)

    def __enter__(self) -> FtsIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def seen(self, records: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        """Of these (WARC file, offset) pairs, those the index holds a capture of."""
        query = "SELECT 1 FROM captures WHERE file = ? AND pos = ?"
        return {record for record in records if self._db.execute(query, record).fetchone()}

    def documents(self, keys: Iterable[DocumentKey]) -> set[DocumentKey]:
        """Of these documents, those the index holds."""
        query = "SELECT 1 FROM documents WHERE url = ? AND digest = ?"
        return {key for key in keys if self._db.execute(query, key).fetchone()}

    def text_of(self, digest: str) -> PageText | None:
        """The text of a document with payload ``digest``, under any URL (the same payload has
        the same text); None if there is none."""
        row = self._db.execute(
            "SELECT title, headings, body FROM pages WHERE rowid ="
            " (SELECT id FROM documents WHERE digest = ? LIMIT 1)", (digest,)).fetchone()
        return None if row is None else PageText(*row)

    def add(self, documents: Mapping[DocumentKey, PageText], captures: Iterable[IndexedCapture]) -> None:
        """New documents and captures, in one transaction; those already there are skipped. A
        capture's document is one of ``documents`` or one the index holds."""
        rows = [(c.filename, c.offset, c.timestamp, *(c.document or (None, None))) for c in captures]
        with sqlite.transaction(self._db):
            for (url, digest), text in documents.items():
                added = self._db.execute("INSERT OR IGNORE INTO documents (url, digest) VALUES (?, ?)",
                                         (url, digest))
                if added.rowcount:
                    self._db.execute("INSERT INTO pages (rowid, title, headings, body) VALUES (?, ?, ?, ?)",
                                     (added.lastrowid, text.title, text.headings, text.body))
            self._db.executemany(
                "INSERT OR IGNORE INTO captures (file, pos, ts, doc) VALUES"
                " (?, ?, ?, (SELECT id FROM documents WHERE url = ? AND digest = ?))", rows)

    def search(self, query: SearchQuery, *, at: str | None = None, limit: int = 20, offset: int = 0,
               deadline: float | None = None) -> list[SearchHit]:
        """The URLs whose pages match ``query`` in a capture at or before ``at`` (14 digits; None:
        any), best first, ``limit`` of them from ``offset``; SearchTimeout past ``deadline``
        seconds (SQLite's progress handler interrupts a statement; between statements, each result
        looks at the clock)."""
        end = math.inf if deadline is None else time.monotonic() + deadline
        if deadline is not None:
            self._db.set_progress_handler(lambda: time.monotonic() > end, _PROGRESS_STEPS)
        try:
            return self._search(query, at or LATEST, limit, offset, end)
        except _PastDeadline:
            raise SearchTimeout(f"the search ran past its deadline of {deadline:g} s") from None
        except sqlite3.OperationalError as e:
            if str(e) == "interrupted":
                raise SearchTimeout(f"the search ran past its deadline of {deadline:g} s") from None
            if "fts5" not in str(e):
                raise
            raise QueryError(f"the index cannot search for {query.text!r}: {e}") from None
        finally:
            self._db.set_progress_handler(None, 0)

    def _search(self, query: SearchQuery, at: str, limit: int, offset: int,
                end: float) -> list[SearchHit]:
        match = query.fts5()
        ranked = self._db.execute(_RANKED, {"query": match, "at": at, "limit": limit,
                                            "offset": offset}).fetchall()
        hits = []
        for url, _, best, docs in ranked:
            ids = [int(d) for d in docs.split(",")]
            stamps = self._db.execute(
                f"SELECT DISTINCT ts FROM captures WHERE doc IN ({', '.join('?' * len(ids))})"
                " AND ts <= ? ORDER BY ts", (*ids, at)).fetchall()
            title, body = self._db.execute(_TEXT, (best,)).fetchone()
            hits.append(SearchHit(url, title, cut_snippet(body, query, SNIPPET_WORDS),
                                  [ts for (ts,) in stamps]))
            if time.monotonic() > end:
                raise _PastDeadline
        return hits

    def counts(self) -> tuple[int, int]:
        """How many documents the index holds, and how many captures with text."""
        documents = self._db.execute("SELECT count(*) FROM documents").fetchone()[0]
        captures = self._db.execute("SELECT count(*) FROM captures WHERE doc IS NOT NULL").fetchone()[0]
        return documents, captures

    def clear(self) -> None:
        """Forget everything (``archiver search index --rebuild``), in one transaction."""
        with sqlite.transaction(self._db):
            for table in ("captures", "pages", "documents"):
                self._db.execute(f"DELETE FROM {table}")

    def close(self) -> None:
        sqlite.close(self._db, writer=not self.readonly)
