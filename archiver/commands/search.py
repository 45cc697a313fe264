"""``archiver search``: full-text search of the archived HTML pages, and building its index."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
from typing import TYPE_CHECKING

from archiver import logs
from archiver.commands.common import (
    SELECTOR_OPTIONS,
    InputError,
    Verbs,
    add_config,
    add_json,
    add_selector,
    catalog,
    count,
    date,
    fail,
    group,
    load_config,
    selected,
    storage_errors,
    store_failure,
    url,
    verb,
)
from archiver.stores import open_stores

if TYPE_CHECKING:
    from archiver.store.fulltextindex import IndexTotals
    from archiver.store.interfaces import FullTextStore
    from archiver.store.models import Capture, SearchHit
    from archiver.store.warcindex import WarcError
    from archiver.web.textquery import SearchQuery

# Results by default, and capture dates listed per result in the text form.
SEARCH_LIMIT = 20
SEARCH_MAX_LIMIT = 1000
SEARCH_DATES_SHOWN = 10
_SEARCH_LOG = logging.getLogger("archiver.search")

QUERY_EXITS = {0: "pages matched", 1: "no page matched", 2: "bad usage or bad input, or no index yet"}
INDEX_EXITS = {0: "the index was built", 1: "a store failed, named on stderr"}


def add(verbs: Verbs) -> None:
    search = group(verbs, "search", "full-text search of the archived HTML pages (`search index` "
                   "builds the index, `search query` asks it)", "search_verb")
    query_ = verb(search, "query", "the archived pages holding all the words, best first",
                  exits=QUERY_EXITS, run=query)
    query_.add_argument("words", nargs="+", metavar="WORD",
                        help='words and "phrases", all required (an argument with spaces is a '
                             "phrase)")
    query_.add_argument("--at", metavar="DATE",
                        help="only captures at or before this date: ISO 8601 or 4 to 14 digits")
    add_json(query_, "a JSON array of results: url, title, snippet, timestamps")
    query_.add_argument("--limit", type=limit, metavar="N", help=f"results (default {SEARCH_LIMIT})")
    add_selector(query_, required=False, matches=tuple(SELECTOR_OPTIONS))
    add_config(query_)
    index_ = verb(search, "index", "build the full-text index from the catalog (the entries it "
                  "lacks)", exits=INDEX_EXITS, run=index)
    index_.add_argument("--rebuild", action="store_true", help="forget the index and build it again")
    add_config(index_)


def limit(text: str) -> int:
    count = int(text)
    if not 1 <= count <= SEARCH_MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be 1 to {SEARCH_MAX_LIMIT}")
    return count


def query(args: argparse.Namespace) -> int:
    """The archived pages holding the words, best first, one result per URL with its matching
    captures."""
    from archiver.store.embedded.fulltext import FullTextMissing
    from archiver.web.textquery import QueryError, parse_query, plain_snippet

    cfg = load_config(args)
    try:
        parsed = parse_query(query_text(args.words))
        at = date(args.at, upper=True) if args.at else None
        selection = selected(args)
        chosen = None if selection is None else (selection[0], url(selection[1]))
        with contextlib.closing(open_stores(cfg).fulltext(readonly=True)) as fulltext:
            hits = _search(fulltext, parsed, at, args.limit or SEARCH_LIMIT, chosen)
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


def _search(fulltext: FullTextStore, parsed: SearchQuery, at: str | None, wanted: int,
            chosen: tuple[str, str] | None) -> list[SearchHit]:
    """The best ``wanted`` hits, of the URLs the selector ``chosen`` (match, URL) takes if given:
    the index is read a page of results at a time until that many are found or it has no more."""
    if chosen is None:
        return fulltext.search(parsed, at=at, limit=wanted)
    match, selector = chosen
    hits: list[SearchHit] = []
    offset = 0
    while len(hits) < wanted:
        page = fulltext.search(parsed, at=at, limit=SEARCH_MAX_LIMIT, offset=offset)
        hits += [hit for hit in page if selects(match, selector, hit.url)]
        if len(page) < SEARCH_MAX_LIMIT:
            break
        offset += len(page)
    return hits[:wanted]


def selects(match: str, selector: str, url: str) -> bool:
    """Whether the URL selector (``match``, ``selector``) takes ``url``, as ``exports.listed``
    would: compared by their SURT keys."""
    from archiver.store.catalogkeys import host_name, shard_host, surt_key

    wanted, key = surt_key(selector), surt_key(url)
    if match == "exact":
        return key == wanted
    if match == "prefix":
        folder = selector.split("#")[0].split("?")[0].endswith("/") and not wanted.endswith("/")
        return key.startswith(wanted) and (not folder or key[len(wanted):len(wanted) + 1] in ("", "/", "?"))
    if match == "host" and shard_host(wanted) != host_name(wanted):  # HOST:PORT, that port only
        return shard_host(key) == shard_host(wanted)
    if match == "host":
        return host_name(key) == host_name(wanted)
    return host_name(key) == host_name(wanted) or host_name(key).startswith(host_name(wanted) + ",")


def query_text(words: list[str]) -> str:
    """The query the command line gives: its arguments, one with spaces (and no quote) a phrase."""
    return " ".join(f'"{word}"' if '"' not in word and len(word.split()) > 1 else word for word in words)


def index(args: argparse.Namespace) -> int:
    """Take the catalog entries the index lacks (``--rebuild``: all of them, the index cleared)."""
    from archiver.store.fulltextindex import build_index

    cfg = load_config(args)
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
            if args.rebuild:
                fulltext.clear()
            totals = build_index(opened, stores.warcs(), fulltext, progress=progress, broken=broken)
            documents, captures = fulltext.counts()
    except storage_errors() as e:
        return store_failure("search index", e)
    print(f"search index: {totals.line()}; the index holds {count(documents, 'page text')} "
          f"of {count(captures, 'capture')}")
    return 0
