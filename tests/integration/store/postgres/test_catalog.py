"""What only the PostgreSQL catalog has: its query plans on a real server, and ``replace`` (the reindex's
one transaction)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import psycopg
import pytest

from archiver.store.catalogkeys import shard_of, surt_key
from archiver.store.models import Capture
from archiver.store.postgres.catalog import _CLOSEST, PgCatalog
from archiver.store.warcindex import WarcError

PAGE = "http://example.org/page"


def cap(url: str, ts: str, offset: int) -> Capture:
    return Capture(surt_key(url), ts, url, 200, "text/html", "sha1:" + "A" * 32, None, "A.warc.gz",
                   offset, 10)


def test_closest_is_two_index_seeks_of_one_partition(pg_store_url: str) -> None:
    with PgCatalog(pg_store_url, 1000) as catalog:
        # Enough captures of one URL and its neighbours that a scan would be the planner's alternative.
        catalog.add(cap(PAGE, f"2019{n:010d}", n) for n in range(500))
        catalog.add(cap(f"http://example.org/p{n}", "20200101000000", n) for n in range(2000))
    key = surt_key(PAGE)
    params = {"shard": shard_of(key, 1000), "key": key, "at": "20190000000250"}
    with psycopg.connect(pg_store_url, autocommit=True) as conn:
        conn.execute("ANALYZE catalog_captures")
        plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN {_CLOSEST}", params))
    scans = [line for line in plan.splitlines() if "Index Scan" in line]
    assert len(scans) == 2, plan
    assert len({line.split(" on ")[1].split()[0] for line in scans}) == 1, plan  # one partition
    assert "Sort" not in plan and "Seq Scan" not in plan, plan


def filed(capture: Capture, filename: str) -> Capture:
    return dataclasses.replace(capture, filename=filename)


def test_replace_is_one_transaction_readers_see_the_old_entries_until_it_commits(pg_store_url: str) -> None:
    old = [filed(cap(PAGE, "20200101000000", 1), "A.warc.gz"),
           filed(cap(PAGE, "20200101000000", 2), "B.warc.gz"),
           filed(cap(PAGE, "20210101000000", 3), "C.warc.gz")]
    new = [filed(cap(PAGE, "20220101000000", 9), "A.warc.gz"),
           filed(cap(PAGE, "20230101000000", 9), "D.warc.gz")]
    seen_meanwhile: list[list[Capture]] = []
    with PgCatalog(pg_store_url, 1000) as catalog, PgCatalog(pg_store_url, 1000, readonly=True) as reader:
        catalog.add(old)

        def captures() -> Iterator[Capture]:
            yield new[0]
            seen_meanwhile.append(reader.captures(PAGE))
            yield new[1]

        assert catalog.replace(["A.warc.gz", "B.warc.gz"], captures()) == 2
        assert seen_meanwhile == [old]
        assert reader.captures(PAGE) == [old[2], *new]

        def torn() -> Iterator[Capture]:
            yield filed(cap(PAGE, "20240101000000", 5), "E.warc.gz")
            raise WarcError("E.warc.gz: not a complete WARC file")

        with pytest.raises(WarcError):
            catalog.replace(["A.warc.gz", "C.warc.gz", "D.warc.gz"], torn())
        assert reader.captures(PAGE) == [old[2], *new]
        # The file ids made in the transaction rolled back are not reused from a cache.
        catalog.add([filed(cap(PAGE, "20250101000000", 6), "E.warc.gz")])
        assert reader.captures(PAGE)[-1].filename == "E.warc.gz"
        assert catalog.file_names() == {"A.warc.gz", "B.warc.gz", "C.warc.gz", "D.warc.gz", "E.warc.gz"}


def test_an_add_commits_without_waiting_for_its_wal_and_nothing_after_it_does(
        pg_store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``synchronous_commit = off`` is the add's own (SET LOCAL): a later transaction of the same
    connection, a ``replace`` say, waits for its flush as the server says."""
    inside: list[str] = []
    copy = PgCatalog._copy

    def watched(cur: psycopg.Cursor, table: str, rows: list) -> None:
        inside.append(cur.execute("SHOW synchronous_commit").fetchone()[0])
        copy(cur, table, rows)

    monkeypatch.setattr(PgCatalog, "_copy", staticmethod(watched))
    with PgCatalog(pg_store_url, 1000) as catalog:
        catalog._db.execute("SET synchronous_commit = on")
        assert catalog.add([cap(PAGE, "20200101000000", 1)]) == 1
        assert catalog.add([cap(PAGE, "20200101000000", 1), cap(PAGE, "20210101000000", 2)]) == 1
        assert catalog._db.execute("SHOW synchronous_commit").fetchone() == ("on",)
    assert inside == ["off", "off", "off"]       # the second add: its copy, then the staging one
