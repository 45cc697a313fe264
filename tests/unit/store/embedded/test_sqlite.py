"""``store.embedded.sqlite.insert_rows``: many rows a statement give what one row a statement gives; a file
that is not a database is named in the error ``open_writer`` or ``open_reader`` raises."""

import sqlite3
from contextlib import closing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.store.embedded import sqlite
from tests.support.fuzzing import examples

SCHEMA = """
CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, n INTEGER NOT NULL);
CREATE TABLE sums (key TEXT PRIMARY KEY, n INTEGER NOT NULL, last INTEGER NOT NULL);
"""
UPSERT = "ON CONFLICT (key) DO UPDATE SET n = n + excluded.n, last = excluded.last"

# Up to three statements' worth and a remainder, over few keys: upserts of one key in one statement.
ROWS = st.lists(st.tuples(st.sampled_from("abcdefg"), st.integers(-5, 5)),
                max_size=3 * sqlite.ROWS_PER_STATEMENT + 5)


def _tables(fill) -> tuple[list, list]:
    with closing(sqlite3.connect(":memory:", isolation_level=None)) as db:
        db.executescript(SCHEMA)
        fill(db)
        return (db.execute("SELECT id, key, n FROM log").fetchall(),
                db.execute("SELECT key, n, last FROM sums ORDER BY key").fetchall())


@settings(max_examples=examples(60), deadline=None)
@given(ROWS)
def test_insert_rows_equals_one_row_a_statement(rows):
    numbered = [(key, n, i) for i, (key, n) in enumerate(rows)]

    def by_statements(db):
        db.executemany("INSERT INTO log (key, n) VALUES (?, ?)", rows)
        db.executemany(f"INSERT INTO sums (key, n, last) VALUES (?, ?, ?) {UPSERT}", numbered)

    def by_rows(db):
        sqlite.insert_rows(db, "INSERT INTO log (key, n)", rows)
        sqlite.insert_rows(db, "INSERT INTO sums (key, n, last)", numbered, UPSERT)

    expected = _tables(by_statements)
    assert _tables(by_rows) == expected
    assert len(expected[0]) == len(rows)


def test_a_file_that_is_not_a_database_is_named_in_the_error(tmp_path):
    path = tmp_path / "state.sqlite"
    path.write_bytes(b"garbage, not a database " * 100)
    for open_ in (sqlite.open_writer, sqlite.open_reader):
        with pytest.raises(sqlite3.DatabaseError) as raised:
            open_(path, 1.0)
        assert str(raised.value) == f"{path}: file is not a database"
        assert raised.value.sqlite_errorname == "SQLITE_NOTADB"    # the codes kept
