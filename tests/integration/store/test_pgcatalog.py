"""What only the PostgreSQL catalog has: its query plans on a real server."""

from __future__ import annotations

import psycopg

from archiver.store.catalog import Capture, shard_of, surt_key
from archiver.store.pgcatalog import _CLOSEST, PgCatalog

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
