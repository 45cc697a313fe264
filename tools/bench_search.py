"""Full-text search benchmark: indexing pages/s and query latency on a crawled demo web.

Crawls a demo web (default 40 sites x 100 pages, prose of 5 to 26 KB a page) into a temporary
archive, in this process on 127.0.0.1 as ``tools.bench_revisit`` does, then builds the full-text
index from its catalog as ``archiver search index`` does (``store.fulltextindex.build_index``:
every HTML page read from its WARC record, its text extracted and indexed), and runs a set of
queries (common and rare words, phrases, titles, with and without ``at``) ``--rounds`` times
against the index, as ``archiver search`` does once the index is open. Prints JSON: pages
indexed, indexing pages/s (wall and CPU), query latency (median and p95, milliseconds), sizes.

    python -m tools.bench_search [--sites 40] [--pages 100] [--rounds 5] [--store sqlite | postgres]
                                 [--repeats N]

``--repeats N`` adds 30 pages each repeating "harbour" N times (a page's body holds about 12,500)
to the index before the queries, as a hostile site could, and reports the latency of the query
"harbour" alone as well (``harbour_ms_median``): before snippets were cut by ``cut_snippet``,
FTS5's ``snippet()`` made it cost the square of N.

``--store postgres`` builds the index in a throwaway local PostgreSQL server (fsync on,
``tools.pgserver``) instead of ``search/fulltext.sqlite``, and queries it once ``VACUUM (ANALYZE)``
has run (as autovacuum leaves the tables after a bulk load); the crawl and the catalog stay
embedded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import psycopg
import trio

from archiver import config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.store.catalog_maintenance import WarcFiles
from archiver.store.embedded.fulltext import FtsIndex
from archiver.store.fulltextindex import build_index
from archiver.store.interfaces import FullTextStore
from archiver.store.models import IndexedCapture
from archiver.store.postgres.fulltext import PgFullText
from archiver.store.postgres.schema import init_schema
from archiver.stores import EmbeddedStores
from archiver.web.pagetext import MAX_BODY, PageText
from archiver.web.textquery import parse_query
from demoweb import WebSpec, start_demo
from tools.benchconfig import demo_config
from tools.pgserver import running_postgres

# Words of the demo's prose (every page has some), rarer pairings, phrases and page titles.
QUERIES = [
    "harbour", "museum library", '"ancient city"', "winter garden", "robots rule agent",
    '"quiet morning"', "version", "frontier bitmap", "curious patient gentle", '"the river"',
    "site-003.demo: page 7", "site-017.demo: page 42", '"careful harvest"', "island forest meadow",
    "replay", '"store modern capture"', "nothing-like-this", "protocol", "autumn spring", "staff",
]


async def crawl(cfg: config.Config, spec: WebSpec) -> int:
    """Crawl every site of ``spec`` until idle; the pages fetched."""
    async with trio.open_nursery() as nursery:
        web, _ = await start_demo(nursery, spec)
        (cfg.path.parent / "hosts").write_text(web.hosts_file())
        enqueue_seeds(cfg, 0, [origin + "/" for origin in web.origins()], recrawl=False)
        crawler = Crawler(cfg, until_idle=True)
        await crawler.run()
        nursery.cancel_scope.cancel()
    return crawler.stats.pages


def latencies(index: FullTextStore, rounds: int, at: str) -> list[float]:
    """Seconds per query, every query of QUERIES ``rounds`` times, half of them with ``at``."""
    taken = []
    for n in range(rounds):
        for text in QUERIES:
            query = parse_query(text)
            start = time.perf_counter()
            index.search(query, at=at if n % 2 else None)
            taken.append(time.perf_counter() - start)
    return taken


def add_repeating_pages(index: FullTextStore, repeats: int) -> None:
    """30 pages each repeating "harbour" ``repeats`` times (cut at the body's bound)."""
    body = ("harbour " * repeats)[:MAX_BODY]
    pages = {(f"http://repeats-{n}.example/", f"repeats-{n}"): PageText(f"repeats {n}", "", body)
             for n in range(30)}
    index.add(pages, [IndexedCapture("repeats.warc.gz", n, "20260101000000", key)
                      for n, key in enumerate(pages)])


def bench(args: argparse.Namespace) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="bench-search-"))
    (work / "hosts").write_text("")
    (work / "archiver.toml").write_text(demo_config())
    cfg = config.load(work / "archiver.toml")
    spec = WebSpec(sites=args.sites, pages_per_site=args.pages, port=0, trap=False)
    fetched = trio.run(crawl, cfg, spec)
    stores = EmbeddedStores(cfg)
    with contextlib.ExitStack() as stack:
        if args.store == "postgres":
            url = stack.enter_context(running_postgres(durable=True)).url()
            init_schema(url)
            index: FullTextStore = stack.enter_context(PgFullText(url))
        else:
            index = stack.enter_context(FtsIndex(work / "archive" / "search" / "fulltext.sqlite"))
        catalog = stack.enter_context(contextlib.closing(stores.catalog(readonly=True)))
        cpu = time.process_time()
        totals = build_index(catalog, WarcFiles(stores.warc_directory()), index)
        cpu = time.process_time() - cpu
        wall = totals.seconds
        documents, captures = index.counts()
        if args.store == "postgres":  # settled, as autovacuum leaves a table after a bulk load
            with psycopg.connect(url, autocommit=True) as db:
                db.execute("VACUUM (ANALYZE) fulltext_documents, fulltext_captures")
        if args.repeats:
            add_repeating_pages(index, args.repeats)
        taken = latencies(index, args.rounds, at="20990101000000")
        harbour = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            index.search(parse_query("harbour"))
            harbour.append(time.perf_counter() - start)
    quantiles = statistics.quantiles(taken, n=20)
    size = sum(p.stat().st_size for p in (work / "archive" / "search").glob("*")) \
        if args.store == "sqlite" else None
    return {
        "demo_web": f"{args.sites} sites x {args.pages} pages", "store": args.store,
        "fetches": fetched, "catalog_entries": totals.examined, "pages_indexed": totals.extracted,
        "captures_indexed": captures, "page_texts": documents,
        "index_seconds": round(wall, 2), "pages_per_second": round(totals.extracted / wall, 1),
        "pages_per_cpu_second": round(totals.extracted / cpu, 1),
        "queries": len(taken), "query_ms_median": round(statistics.median(taken) * 1000, 2),
        "query_ms_p95": round(quantiles[18] * 1000, 2),
        "harbour_ms_median": round(statistics.median(harbour) * 1000, 2), "repeats": args.repeats,
        "index_bytes": size, "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sites", type=int, default=40)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--repeats", type=int, default=0)
    print(json.dumps(bench(parser.parse_args()), indent=1))


if __name__ == "__main__":
    main()
