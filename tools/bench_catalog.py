"""Catalog benchmark: insert rate, closest-capture latency, size on disk.

Fills a catalog with N synthetic captures of 100,000 hosts, in add() calls of --batch captures,
then times closest() on 10,000 random URLs, half captured, half not (absent paths on captured
hosts, so their shard is searched): first with the shards already open, then through a
one-connection LRU, so nearly every lookup opens its shard (OS page cache warm). Last, it times
remove_file() of one 50,000-entry WARC file. Targets on the project's 2-core machine at 10M
entries: >= 100,000 inserts/s and p99 closest < 1 ms.

--store postgresql://user@host:port/dbname measures the PostgreSQL catalog instead (its schema made
by init_schema; the database's catalog must be empty): the same inserts and lookups, through one
connection, and no cold-open figure (a server keeps no per-shard files to open). The lookups are
timed twice: right after the load, while autovacuum and the checkpointer work through it, and
"settled", after ``VACUUM (ANALYZE)`` and ``CHECKPOINT``. ``--store postgres`` starts a throwaway
local server with fsync on and the settings docs/cluster.md recommends for a catalog server
(``SERVER_SETTINGS``).

--order crawl (default) writes captures as crawlers do: each host visited once in each of three
rounds, 64 sites at a time with their captures interleaved, so a 10,000 batch holds ~300 hosts'
captures (as a reindex of a WARC file reads them). --order random draws a random host for every
entry, so every batch touches every shard: the worst case. Without --dir the catalog goes to a
temporary directory, deleted at the end.

    python -m tools.bench_catalog [--entries 10000000] [--shards 1000] [--batch 10000]
                                  [--order crawl|random] [--dir PATH | --store URL | --store postgres]
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import psycopg

from archiver.store.catalogkeys import surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.interfaces import CatalogStore
from archiver.store.models import Capture
from archiver.store.postgres.catalog import PgCatalog
from archiver.store.postgres.schema import init_schema
from tools.pgserver import running_postgres

HOSTS = 100_000
FILES_EVERY = 50_000  # entries per synthetic WARC file (about 1 GB of pages)
ROUNDS = 3  # crawls of every host over the 30 years
SLOTS = 64  # sites crawled at once, their captures interleaved in the WARC files
PATHS = 60  # pages per host
LOOKUPS = 10_000
# docs/cluster.md's settings for a PostgreSQL server holding a catalog, scaled to this 24 GiB machine: a
# bulk of inserts checkpoints rarely (each checkpoint makes the next writes of every page log a full
# page image), and the WAL is compressed.
SERVER_SETTINGS = {"shared_buffers": "4GB", "max_wal_size": "16GB", "checkpoint_timeout": "30min",
                   "wal_compression": "lz4"}


def _capture(n: int, host: str, path: str, ts: str, rng: random.Random) -> Capture:
    return Capture(
        urlkey=",".join(reversed(host.split(".")[1:])) + ")" + path,  # SURT folds "www0."
        timestamp=ts,
        url=f"https://{host}{path}",
        status=200,
        mime="text/html",
        digest="sha1:" + base64.b32encode(rng.randbytes(20)).decode(),
        redirect=None,
        filename=f"ARCHIVER-20261122031500-0-{n // FILES_EVERY:05d}.warc.gz",
        offset=(n % FILES_EVERY) * 20_000,
        length=rng.randrange(500, 40_000),
    )


def _timestamp(n: int, entries: int) -> str:
    """Entry n of the run, dated along 30 years from 1996 in write order."""
    t = time.gmtime(820_454_400 + n * (30 * 365 * 86_400 // entries))
    return time.strftime("%Y%m%d%H%M%S", t)


def crawl_order(entries: int, rng: random.Random, hosts: list[str]) -> Iterator[Capture]:
    """Captures as crawlers write them: every host once per round (ROUNDS rounds), SLOTS sites
    at a time, their pages interleaved; a host has PATHS pages, each round takes a random part."""
    per_visit = max(1, entries // (ROUNDS * len(hosts)))
    n = 0
    while True:
        order = rng.sample(hosts, len(hosts))
        for first in range(0, len(order), SLOTS):
            slots = order[first : first + SLOTS]
            visits = [(host, rng.sample(range(PATHS), min(PATHS, per_visit))) for host in slots]
            for step in range(per_visit):
                for host, paths in visits:
                    if n == entries:
                        return
                    path = f"/section{paths[step] % 7}/page{paths[step]}.html"
                    yield _capture(n, host, path, _timestamp(n, entries), rng)
                    n += 1


def random_order(entries: int, rng: random.Random, hosts: list[str]) -> Iterator[Capture]:
    """Captures in random host order: each batch touches every shard (the worst case)."""
    for n in range(entries):
        path = f"/section{rng.randrange(7)}/page{rng.randrange(PATHS)}.html"
        yield _capture(n, rng.choice(hosts), path, _timestamp(n, entries), rng)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def time_lookups(catalog: CatalogStore, urls: list[str], ats: list[str]) -> dict[str, float]:
    times = []
    found = 0
    for url, at in zip(urls, ats, strict=True):
        t0 = time.perf_counter()
        hit = catalog.closest(url, at)
        times.append((time.perf_counter() - t0) * 1e6)
        found += hit is not None
    return {
        "p50_us": round(statistics.median(times), 1),
        "p99_us": round(percentile(times, 0.99), 1),
        "max_us": round(max(times), 1),
        "found": found,
    }


def run(entries: int, shards: int, where: Path | str, order: str, batch_size: int) -> dict[str, object]:
    """Measure the SQLite catalog in the folder ``where``, or the PostgreSQL one at the URL ``where``."""
    rng = random.Random(1997)
    hosts = [f"www{rng.randrange(3)}.site{i}.example{i % 7}.org" for i in range(HOSTS)]
    catalog: CatalogStore
    if isinstance(where, str):
        init_schema(where)
        catalog = PgCatalog(where, shards)
        if catalog.count():
            raise SystemExit(f"{where}: the catalog there is not empty; use an empty database")
    else:
        catalog = Catalog(where, shards)
    sample: list[str] = []
    insert_seconds = 0.0
    added = 0
    stream = (crawl_order if order == "crawl" else random_order)(entries, rng, hosts)
    while batch := list(islice(stream, batch_size)):
        if not sample:
            assert all(surt_key(c.url) == c.urlkey for c in batch[:100])
        sample += [c.url for c in rng.sample(batch, min(len(batch), 50))]
        t0 = time.perf_counter()
        added += catalog.add(batch)
        insert_seconds += time.perf_counter() - t0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    half = LOOKUPS // 2
    urls = rng.sample(sample, min(half, len(sample)))
    urls += [f"https://{rng.choice(hosts)}/absent/{i}.html" for i in range(LOOKUPS - len(urls))]
    rng.shuffle(urls)
    ats = [_timestamp(rng.randrange(entries), entries) for _ in urls]
    warm = time_lookups(catalog, urls, ats)
    catalog.close()
    settled: dict[str, float] | None = None
    if isinstance(where, str):
        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE) catalog_captures")
            conn.execute("CHECKPOINT")
        with PgCatalog(where, shards, readonly=True) as reader:
            settled = time_lookups(reader, urls, ats)
    cold: dict[str, float] | None = None
    writer: CatalogStore
    if isinstance(where, str):
        size = _database_size(where)
        writer = PgCatalog(where, shards)
    else:
        size = sum(p.stat().st_size for p in where.iterdir())
        cold_catalog = Catalog(where, shards, readonly=True, max_open=1)
        cold = time_lookups(cold_catalog, urls[:2000], ats[:2000])
        cold_catalog.close()
        writer = Catalog(where, shards)
    t0 = time.perf_counter()
    removed = writer.remove_file(_capture(0, hosts[0], "/", "", rng).filename)
    remove_seconds = time.perf_counter() - t0
    writer.close()
    return {
        "store": "postgresql" if isinstance(where, str) else "sqlite",
        "entries": added,
        "shards": shards,
        "order": order,
        "batch": batch_size,
        "inserts_per_s": round(added / insert_seconds),
        "closest_open_shards": warm,
        "closest_settled": settled,
        "closest_cold_open": cold,
        "db_bytes": size,
        "db_bytes_per_entry": round(size / max(added, 1), 1),
        "peak_rss_mib": round(rss_mib),
        "remove_file_s": round(remove_seconds, 2),
        "remove_file_entries": removed,
    }


def _database_size(url: str) -> int:
    """Bytes of the catalog's tables and indexes in the database at ``url``."""
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits"
            " WHERE inhparent = 'catalog_captures'::regclass").fetchone()
        files = conn.execute("SELECT pg_total_relation_size('catalog_files')").fetchone()
    return int(found[0] or 0) + int(files[0] or 0) if found and files else 0


def main() -> int:
    parser = argparse.ArgumentParser(description="archiver catalog benchmark")
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=10_000, help="captures per add() call")
    parser.add_argument("--order", choices=("crawl", "random"), default="crawl")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--dir", type=Path, help="catalog directory (default: a temporary one, deleted)")
    where.add_argument("--store", help="postgresql://user@host:port/dbname: measure PostgreSQL instead;"
                       ' "postgres": on a throwaway local server with fsync on (tools.pgserver)')
    args = parser.parse_args()
    if args.store == "postgres":
        with running_postgres(durable=True, settings=SERVER_SETTINGS) as server:
            result = run(args.entries, args.shards, server.url(), args.order, args.batch)
    elif args.store is not None:
        result = run(args.entries, args.shards, args.store, args.order, args.batch)
    elif args.dir is not None:
        result = run(args.entries, args.shards, args.dir, args.order, args.batch)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="bench-catalog-"))
        try:
            result = run(args.entries, args.shards, tmp / "catalog", args.order, args.batch)
        finally:
            shutil.rmtree(tmp)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
