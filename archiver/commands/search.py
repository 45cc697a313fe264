"""``archiver search``: full-text search of the archived HTML pages, and building its index."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
from typing import TYPE_CHECKING

from archiver import config, logs
from archiver.commands.common import (
    InputError,
    Verbs,
    add_config,
    add_json,
    catalog,
    count,
    date,
    fail,
    load_config,
    storage_errors,
    store_failure,
    verb,
)
from archiver.stores import open_stores

if TYPE_CHECKING:
    from archiver.store.catalog import Capture
    from archiver.store.fulltextindex import IndexTotals
    from archiver.store.warcindex import WarcError

# Results by default, and capture dates listed per result in the text form.
SEARCH_LIMIT = 20
SEARCH_MAX_LIMIT = 1000
SEARCH_DATES_SHOWN = 10
_SEARCH_LOG = logging.getLogger("archiver.search")

EXITS = {0: "pages matched (with `index`: the index was built)", 1: "no page matched",
         2: "bad usage or bad input, or no index yet"}


def add(verbs: Verbs) -> None:
    search = verb(verbs, "search", "full-text search of the archived HTML pages (`search index` "
                  "builds the index)", exits=EXITS, run=run)
    search.add_argument("words", nargs="+", metavar="QUERY",
                        help='words and "phrases", all required (an argument with spaces is a '
                             "phrase); `index` alone builds the index from the catalog (to search "
                             "for the word, quote it: '\"index\"')")
    search.add_argument("--at", metavar="DATE",
                        help="only captures at or before this date: ISO 8601 or 4 to 14 digits")
    add_json(search, "a JSON array of results: url, title, snippet, timestamps")
    search.add_argument("--limit", type=limit, help=f"results (default {SEARCH_LIMIT})")
    search.add_argument("--rebuild", action="store_true",
                        help="with `index`: forget the index and build it again")
    add_config(search)


def limit(text: str) -> int:
    count = int(text)
    if not 1 <= count <= SEARCH_MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be 1 to {SEARCH_MAX_LIMIT}")
    return count


def run(args: argparse.Namespace) -> int:
    """The archived pages holding the words, best first, one result per URL with its matching
    captures."""
    cfg = load_config(args)
    if args.words == ["index"]:
        if args.at or args.json or args.limit is not None:
            return fail("`archiver search index` takes --config and --rebuild only (to search for "
                        "the word index, quote it: archiver search '\"index\"')")
        return index(cfg, rebuild=args.rebuild)
    if args.rebuild:
        return fail("--rebuild goes with `archiver search index`")
    return query(cfg, args)


def query(cfg: config.Config, args: argparse.Namespace) -> int:
    from archiver.store.fulltext import FullTextMissing
    from archiver.web.textquery import QueryError, parse_query, plain_snippet

    try:
        parsed = parse_query(query_text(args.words))
        at = date(args.at, upper=True) if args.at else None
        with contextlib.closing(open_stores(cfg).fulltext(readonly=True)) as fulltext:
            hits = fulltext.search(parsed, at=at, limit=args.limit or SEARCH_LIMIT)
    except (InputError, QueryError, FullTextMissing) as e:
        return fail(str(e))
    if args.json:
        print(json.dumps([{"url": h.url, "title": h.title, "snippet": plain_snippet(h.snippet),
                           "timestamps": h.timestamps} for h in hits], indent=1))
    else:
        for hit in hits:
            more = len(hit.timestamps) - SEARCH_DATES_SHOWN
            print(f"{hit.title or hit.url}\n  {hit.url}\n  {plain_snippet(hit.snippet)}\n  "
                  f"{count(len(hit.timestamps), 'capture')}: "
                  + " ".join(hit.timestamps[:SEARCH_DATES_SHOWN]) + (f" and {more} more" if more > 0 else ""))
    if not hits:
        print("no page of the archive matches" + (f" at or before {at}" if at else ""), file=sys.stderr)
    return 0 if hits else 1


def query_text(words: list[str]) -> str:
    """The query the command line gives: its arguments, one with spaces (and no quote) a phrase."""
    return " ".join(f'"{word}"' if '"' not in word and len(word.split()) > 1 else word for word in words)


def index(cfg: config.Config, *, rebuild: bool) -> int:
    """Take the catalog entries the index lacks (``rebuild``: all of them, the index cleared)."""
    from archiver.store.fulltextindex import build_index

    logs.setup(cfg.log.level)
    stores = open_stores(cfg)
    try:
        opened = catalog(cfg)
    except InputError as e:
        return fail(str(e))
    last = time.monotonic()
    total = opened.count()

    def progress(totals: IndexTotals) -> None:  # a line every 5 s
        nonlocal last
        if time.monotonic() - last >= 5:
            last = time.monotonic()
            print(f"search index: {totals.examined} of {total} catalog entries read, {totals.extracted} "
                  f"pages extracted ({totals.extracted / totals.seconds:.0f} pages/s)", file=sys.stderr)

    def broken(capture: Capture, error: WarcError) -> None:
        logs.event(_SEARCH_LOG, logging.WARNING, "search-index-unreadable", url=capture.url,
                   file=capture.filename, offset=capture.offset, error=str(error))

    try:
        with contextlib.closing(opened), contextlib.closing(stores.fulltext()) as fulltext:
            if rebuild:
                fulltext.clear()
            totals = build_index(opened, stores.warcs(), fulltext, progress=progress, broken=broken)
            documents, captures = fulltext.counts()
    except storage_errors() as e:
        return store_failure("search index", e)
    print(f"search index: {totals.line()}; the index holds {count(documents, 'page text')} "
          f"of {count(captures, 'capture')}")
    return 0
