"""The ``archiver`` command and its verbs.

Exit codes: 0 success, 1 a failure while running, 2 bad usage or bad input (config, seeds).

Each verb imports what it needs at the top of its function, not at the top of this module: every
command starts a Python process, and a lookup (``catalog closest``, ``dns lookup``, ``status``)
should not wait for the crawler, trio, the DNS service, psycopg, boto3 or numpy to load
(``tests/integration/test_cli_imports.py`` holds that line).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import re
import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from archiver import __version__, config, logs
from archiver.links import compiled_loops_ahead, quiet_blas
from archiver.links.partition import MAX_PARTITIONS
from archiver.stores import (
    ProcessBusy,
    Stores,
    StoreUnavailable,
    check_stores,
    open_embedded,
    open_stores,
)
from archiver.web import urls
from archiver.web.timestamps import from_datetime, parse_date, to_datetime

if TYPE_CHECKING:
    from archiver.dns.resolver import RefreshStats
    from archiver.queues.models import SiteRow
    from archiver.store.fulltextindex import IndexTotals
    from archiver.store.interfaces import CatalogStore
    from archiver.store.models import Capture, DnsRow
    from archiver.store.warcindex import WarcError

# archiver search: results by default, and capture dates listed per result in the text form.
SEARCH_LIMIT = 20
SEARCH_MAX_LIMIT = 1000
SEARCH_DATES_SHOWN = 10
_SEARCH_LOG = logging.getLogger("archiver.search")


def _config(args: argparse.Namespace, *, stores_built: bool = True) -> config.Config:
    """The config of ``--config``; ``stores_built`` also refuses stores this version cannot open yet."""
    if not getattr(args, "config", None):
        raise SystemExit(_fail("--config FILE is required"))
    try:
        cfg = config.load(args.config)
        if stores_built:
            check_stores(cfg)
    except (config.ConfigError, StoreUnavailable) as e:
        raise SystemExit(_fail(str(e))) from None
    for notice in cfg.notices:
        print(f"archiver: warning: {notice}", file=sys.stderr)
    return cfg


_TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _fail(message: str) -> int:
    print(f"archiver: {message}", file=sys.stderr)
    return 2


def _storage_errors(*more: type[Exception]) -> tuple[type[Exception], ...]:
    """``more``, and what the stores raise when a file, a database or the object store fails:
    evaluated by an ``except`` clause only once something was raised, so psycopg and boto3 load
    only then."""
    import psycopg

    from archiver.store.objectstore import ObjectStoreError

    return *more, OSError, sqlite3.Error, psycopg.Error, ObjectStoreError


def _store_failure(verb: str, error: Exception) -> int:
    """Report a store's failure of ``verb`` (any password in a database URL masked): exit status 1."""
    from archiver.store.postgres.schema import redact

    print(f"archiver: {verb}: {redact(str(error)).strip()}", file=sys.stderr)
    return 1


def cmd_crawl(args: argparse.Namespace) -> int:
    import trio

    from archiver.crawl.crawler import Crawler, SeedError, enqueue_seeds, read_seeds
    from archiver.crawl.openfiles import FileLimitError
    from archiver.crawl.pluginhost import PluginError

    cfg = _config(args)
    logs.setup(cfg.log.level)
    shared = config.database_url(cfg.store.url) is not None  # any process may take any site there
    if args.process < 0 or (not shared and args.process >= cfg.crawl.processes):
        return _fail(f"--process {args.process} is outside 0..{cfg.crawl.processes - 1} "
                     f"(crawl.processes = {cfg.crawl.processes} in {cfg.path})")
    if args.seeds:
        try:
            seeds = read_seeds(Path(args.seeds))
            enqueue_seeds(cfg, args.process, seeds, recrawl=args.recrawl)
        except SeedError as e:
            return _fail(str(e))
    try:
        crawler = Crawler(cfg, process=args.process, until_idle=args.until_idle)
    except (ProcessBusy, PluginError, FileLimitError) as e:
        return _fail(str(e))
    except _storage_errors() as e:
        return _store_failure("crawl", e)
    if args.recrawl and not args.seeds:
        print(f"recrawl: {crawler.queue.recrawl()} finished sites queued again")
    trio.run(crawler.run)
    print(f"crawl stopped: {crawler.stats.pages} pages, {crawler.stats.bytes} bytes; "
          f"WARCs in {crawler.stores.warc_directory()}")
    if crawler.exit_status:
        print(f"archiver: crawl stopped because {crawler.stopped_because}", file=sys.stderr)
    return crawler.exit_status


def cmd_seeds(args: argparse.Namespace) -> int:
    from archiver.crawl.crawler import SeedError, enqueue_seeds, read_seeds

    cfg = _config(args)
    logs.setup(cfg.log.level)
    try:
        seeds = read_seeds(Path(args.file))
        done = enqueue_seeds(cfg, 0, seeds, recrawl=args.recrawl)
    except SeedError as e:
        return _fail(str(e))
    refused = f", {done.refused} refused (see the warnings)" if done.refused else ""
    print(f"seeds: {done.queued} queued{refused}, {done.new_sites} sites new to the queues")
    return 0


def cmd_links(args: argparse.Namespace) -> int:
    quiet_blas()
    cfg = _config(args)
    logs.setup(cfg.log.level)
    # Only the embedded spool: listing an object store's would load boto3 and ask the network.
    embedded = config.database_url(cfg.store.url) is None
    with compiled_loops_ahead(open_embedded(cfg).spool_files() if embedded else None):
        from archiver.links.batch import run_batch

        try:
            totals = run_batch(cfg, once=args.once)
        except (ProcessBusy, config.ConfigError) as e:
            return _fail(str(e))
        except _storage_errors(RuntimeError) as e:
            return _store_failure("links", e)
    print(f"links: {totals.line()}; {totals.new_pairs} new site-to-site links, "
          f"{totals.checkpoints} checkpoints")
    # The batch is closed; its modules' million objects die with the process. Frozen, Python's
    # last collection at exit skips them: the exit takes 0.05 s instead of 0.25-0.30 s.
    gc.freeze()
    return 0


def cmd_links_reshard(args: argparse.Namespace) -> int:
    quiet_blas()
    from archiver.links.batch import ReshardError, reshard_batch

    cfg = _config(args)
    logs.setup(cfg.log.level)
    try:
        totals = reshard_batch(cfg, args.partitions, allow_missing=args.allow_missing)
    except (ProcessBusy, config.ConfigError) as e:
        return _fail(str(e))
    except _storage_errors(ReshardError, RuntimeError) as e:
        return _store_failure("links reshard", e)
    print(f"links reshard: {args.partitions} slices rebuilt from {totals.files} spool files, "
          f"{totals.lines} URLs read")
    return 0


def _partitions(text: str) -> int:
    count = int(text)
    if not 1 <= count <= MAX_PARTITIONS:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_PARTITIONS}")
    return count


def cmd_replay(args: argparse.Namespace) -> int:
    from archiver.replay import serve

    cfg = _config(args)
    logs.setup(cfg.log.level)
    return serve.run(cfg, args.listen)


def cmd_status(args: argparse.Namespace) -> int:
    from archiver.store.status import format_status

    cfg = _config(args)
    if args.sites:
        return _site_status(open_stores(cfg), as_json=args.json)
    if config.database_url(cfg.store.url) is not None:  # the cluster's status lives in its database
        from archiver.store.postgres.schema import StoreError

        try:
            stores = open_stores(cfg)
            with contextlib.closing(stores.status()) as status:
                statuses = status.read_all()
        except StoreError as e:
            return _local_status(cfg, e, as_json=args.json)
    else:
        stores = open_stores(cfg)
        with contextlib.closing(stores.status()) as status:
            statuses = status.read_all()
    if args.json:
        print(json.dumps(statuses, indent=1, sort_keys=True))
    elif not statuses:
        print(f"no crawler status in {stores.status_location}")
    else:
        print("\n".join(format_status(s, stale_after=cfg.crawl.lease_ttl) for s in statuses))
    return 0


def _local_status(cfg: config.Config, error: Exception, *, as_json: bool) -> int:
    """``status`` while the cluster's database is away: what this machine's crawlers last wrote
    to their local copies (each says ``waiting_for=database`` while it waits); status 2, as for
    every store that cannot be used."""
    from archiver.store.status import StatusFiles, format_status

    print(f"archiver status: {error}; this machine's crawlers, from their local status files:",
          file=sys.stderr)
    statuses = StatusFiles(cfg.root).read_all()
    if as_json:
        print(json.dumps(statuses, indent=1, sort_keys=True))
    elif not statuses:
        print(f"no crawler status in {cfg.root / 'state'}")
    else:
        print("\n".join(format_status(s, stale_after=cfg.crawl.lease_ttl) for s in statuses))
    return 2


def _site_status(stores: Stores, *, as_json: bool) -> int:
    """``status --sites``: every site of the site queues, with its next visit and change rate."""
    now = time.time()
    for number, queue in stores.site_queues():  # one at a time
        with contextlib.closing(queue):
            for row in queue.rows():
                described = describe_site(row, now)
                if number is not None:
                    described["process"] = number
                print(json.dumps(described, sort_keys=True) if as_json else site_line(described))
    return 0


def describe_site(row: SiteRow, now: float) -> dict[str, object]:
    """One site of a site queue, as ``status --sites --json`` prints it."""
    rate = row.history.rate()
    return {"origin": row.origin, "state": row.state, "visits": row.visits, "inlinks": row.inlinks,
            "hops": row.hops, "priority": row.priority,
            "due": _iso(row.due) if row.state != "done" and row.due else None,
            "next_visit": _iso(row.next_visit) if row.next_visit else None,
            "next_visit_in_days": round((row.next_visit - now) / 86400, 2) if row.next_visit else None,
            "change_rate_per_day": None if rate is None else round(rate * 86400, 4),
            "pages_compared": round(row.history.compared, 2),
            "pages_changed": round(row.history.changed, 2), "note": row.note}


def site_line(site: dict[str, object]) -> str:
    """The text form of ``describe_site``."""
    parts = [str(site["origin"]), str(site["state"]), f"visits={site['visits']}",
             f"inlinks={site['inlinks']}", f"hops={site['hops']}", f"priority={site['priority']}"]
    if site["next_visit"]:
        parts.append(f"next_visit={site['next_visit']} (in {site['next_visit_in_days']} days)")
    elif site["due"]:
        parts.append(f"due={site['due']}")
    if site["change_rate_per_day"] is not None:
        parts.append(f"change_rate={site['change_rate_per_day']}/day "
                     f"({site['pages_changed']} of {site['pages_compared']} pages compared changed)")
    if site["note"]:
        parts.append(f"note={site['note']!r}")
    return "  ".join(parts)


class InputError(Exception):
    """Bad input on the command line: reported with exit code 2."""


def _date(text: str, *, upper: bool = False) -> str:
    try:
        return parse_date(text, upper=upper)
    except ValueError as e:
        raise InputError(str(e)) from None


def _url(text: str) -> str:
    """A URL to look up (``example.org/x`` means ``http://example.org/x``), normalised."""
    from archiver.store.catalogkeys import surt_key

    url = urls.normalize(text if "://" in text else "http://" + text)
    if url is None:
        raise InputError(f"cannot parse URL {text!r} (want an http or https URL)")
    try:
        surt_key(url)
    except ValueError as e:
        raise InputError(str(e)) from None
    return url


def _catalog(cfg: config.Config) -> CatalogStore:
    from archiver.store.models import CatalogError

    try:
        return open_stores(cfg).catalog(readonly=True)
    except CatalogError as e:
        raise InputError(str(e)) from None


def _print_captures(captures: list[Capture], as_json: bool) -> None:
    for c in captures:
        if as_json:
            print(json.dumps(c.to_json()))
        else:
            status = c.status if c.status is not None else "-"
            print(f"{c.timestamp} {status} {c.mime} {c.url} {c.filename}:{c.offset}:{c.length}"
                  + (f" -> {c.redirect}" if c.redirect else ""))


def cmd_robots(args: argparse.Namespace) -> int:
    """``archiver robots HOST``: the robots.txt in force at a date, and every change of it."""
    from archiver.store import robotstxt

    cfg = _config(args)
    try:
        origin = urls.origin(_url(args.host))
        at = _date(args.at, upper=True) if args.at else from_datetime(datetime.now(UTC))
    except InputError as e:
        return _fail(str(e))
    stores = open_stores(cfg)
    with contextlib.closing(_catalog(cfg)) as catalog:
        found = robotstxt.history(catalog, stores.warcs(), origin)
    current = robotstxt.governing(found, at)
    changes = [r for r in found if r.changed]
    if args.json:
        print(json.dumps({
            "origin": origin, "at": at,
            "in_force": None if current is None else current.to_json(text=True),
            "changes": [r.to_json(text=False) for r in changes],
            "captures": len(found)}, indent=1))
        return 0 if current is not None else 1
    if current is None:
        print(f"no capture of {origin}/robots.txt at or before {at}"
              + (f" (the first is at {found[0].capture.timestamp})" if found else ""))
    else:
        c = current.capture
        print(f"in force at {at}: the capture of {c.url} at {c.timestamp} "
              f"({c.filename}:{c.offset}): {current.meaning()}")
        if current.via:
            print("  redirected through " + " -> ".join(current.via))
        if current.status is not None and 200 <= current.status < 300:
            print(current.text.decode("utf-8", errors="replace").rstrip("\n"))
    print(f"\n{_count(len(changes), 'version')} in {_count(len(found), 'capture')}:")
    for r in changes:
        print(f"  {r.capture.timestamp}  {r.meaning()}  {len(r.text)} bytes  {r.capture.digest}")
    return 0 if current is not None else 1


def cmd_why(args: argparse.Namespace) -> int:
    """``archiver why URL``: captured (when, which record) or why not, from the archive's records."""
    from archiver.replay import why

    cfg = _config(args)
    try:
        url = _url(args.url)
        at = _date(args.at, upper=True) if args.at else from_datetime(datetime.now(UTC))
    except InputError as e:
        return _fail(str(e))
    stores = open_stores(cfg)
    with contextlib.closing(_catalog(cfg)) as catalog:
        answer = why.explain(why.gather(stores, catalog, stores.warcs(), cfg, url, at))
    if args.json:
        print(json.dumps(answer.to_json(), indent=1))
    else:
        print(f"{answer.url} at {answer.at}: {answer.kind}")
        print(f"  {answer.reason}")
    return 0 if answer.captured else 1


def cmd_scope_test(args: argparse.Namespace) -> int:
    """``archiver scope test URL``: in or out of the config's scope, and the deciding rule; exit
    status 0 in, 1 out, 2 for a bad URL or config."""
    cfg = _config(args, stores_built=False)
    try:
        url = _url(args.url)
    except InputError as e:
        return _fail(str(e))
    decision = cfg.scope.rules().decide(url)
    if args.json:
        print(json.dumps({"url": url, "decision": decision.word, "rule": decision.rule}))
    else:
        rule = decision.rule if decision.rule is not None else (
            "no rule (no include rules)" if decision.in_scope else "no include rule matched")
        print(f"{decision.word}\t{url}\t{rule}")
    return 0 if decision.in_scope else 1


def cmd_focus_train(args: argparse.Namespace) -> int:
    """``archiver focus train EXAMPLES_DIR``: a relevance model from example documents, written to
    ``--out`` or else to the file ``crawl.focus`` names; a short report on standard output."""
    cfg = _config(args, stores_built=False)
    try:
        from archiver.crawl.focustrain import TrainError, read_examples, train
    except ImportError as e:
        return _fail(f"focus train needs scikit-learn ({e}): pip install 'archiver[focus]'")
    from archiver.web.relevance import model_bytes
    out = Path(args.out) if args.out else cfg.crawl.focus
    if out is None:
        return _fail("name the model file: --out FILE, or crawl.focus in the config")
    try:
        examples = read_examples(Path(args.examples))
        trained = train(examples)
    except TrainError as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(f"cannot read the examples: {e}")
    try:
        _write_durably(out, model_bytes(trained.model))
    except OSError as e:
        return _fail(f"{out}: cannot write the model: {e.strerror}")
    counts = trained.counts
    accuracy = ("n/a (a class has one document)" if trained.accuracy is None
                else f"{trained.accuracy:.3f} ({trained.folds}-fold cross-validation)")
    skipped = f" ({examples.skipped} skipped: no text, or not .html, .htm or .txt)" \
        if examples.skipped else ""
    print(f"documents: {counts['relevant']} relevant, {counts['other']} other{skipped}")
    print(f"accuracy: {accuracy}")
    print(f"time: {trained.seconds:.2f} s")
    print(f"model: {out}")
    return 0


def _write_durably(path: Path, data: bytes) -> None:
    """``data`` as the file ``path``: written beside it, fsynced, then renamed over it."""
    from archiver.store.durable import fsync_directory

    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    temporary.replace(path)
    fsync_directory(path.parent)


def cmd_import(args: argparse.Namespace) -> int:
    """``archiver import FILE...``: WARC files of other tools into the WARC store and catalog."""
    from archiver.store.imports import ImportRefused, import_file, shown
    cfg = _config(args)
    stores = open_stores(cfg)
    warcs = stores.warc_store()
    refused = 0

    def say(line: str) -> None:
        print(f"archiver import: {line}", file=sys.stderr, flush=True)

    with contextlib.closing(stores.catalog()) as catalog:
        for name in args.files:
            try:
                done = import_file(Path(name), warcs=warcs, catalog=catalog,
                                   in_place=args.in_place, progress=say,
                                   max_temp_bytes=cfg.import_.max_temp_bytes)
            except ImportRefused as e:
                refused += 1
                print(f"archiver: {e} (nothing imported from it)", file=sys.stderr)
                continue
            how = ("rewritten as one gzip member per record, " if done.rewritten else "") + (
                f"stored as {warcs.location(done.name)}" if done.stored else
                "indexed in place" if args.in_place else f"already in the store as {done.name}")
            skipped = ", ".join(f"{n} {kind}" for kind, n in done.skipped.items())
            print(f"{shown(done.source)}: {_count(done.records, 'record')}, {done.added} catalog entries "
                  f"added, {done.duplicates} already in the catalog; {how}"
                  + (f"; not catalogued: {skipped}" if skipped else ""))
    return 2 if refused else 0


def cmd_export(args: argparse.Namespace) -> int:
    """``archiver export``: a slice of the archive as a WARC file or a WACZ package."""
    from archiver.store.exports import ExportError, export

    cfg = _config(args)
    match, given = (("exact", args.url) if args.url else ("prefix", args.prefix) if args.prefix
                    else ("host", args.host))
    try:
        url = _url(given)
        from_ = _date(args.from_) if args.from_ else None
        to = _date(args.to, upper=True) if args.to else None
    except InputError as e:
        return _fail(str(e))
    stores = open_stores(cfg)
    shown = [time.monotonic()]

    def progress(done: int, total: int) -> None:
        if done == total or time.monotonic() - shown[0] >= 5:
            shown[0] = time.monotonic()
            print(f"archiver export: {done}/{total} records", file=sys.stderr, flush=True)

    try:
        with contextlib.closing(stores.catalog(readonly=True)) as catalog:
            done = export(catalog, stores.warcs(), url=url, match=match, output=Path(args.output),
                          from_=from_, to=to, progress=progress)
    except ExportError as e:
        return _fail(f"{e} (nothing written)")
    print(f"{done.path}: {_count(done.captures, 'capture')} and "
          f"{_count(done.originals, 'original response')} of their revisits, "
          f"{_count(done.converted, 'server-not-modified revisit')} written whole, "
          f"{done.bytes} bytes")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """``archiver search QUERY``: the archived pages holding the words, best first, one result per
    URL with its matching captures; ``archiver search index``: build the index from the catalog.
    Exit 0 with results, 1 without, 2 for bad input (or no index yet)."""
    from archiver.store.embedded.fulltext import FullTextMissing
    from archiver.web.textquery import QueryError, parse_query, plain_snippet

    cfg = _config(args)
    if args.words == ["index"]:
        if args.at or args.json or args.limit is not None:
            return _fail("`archiver search index` takes --config and --rebuild only (to search for "
                         "the word index, quote it: archiver search '\"index\"')")
        return _search_index(cfg, rebuild=args.rebuild)
    if args.rebuild:
        return _fail("--rebuild goes with `archiver search index`")
    try:
        query = parse_query(_query_text(args.words))
        at = _date(args.at, upper=True) if args.at else None
        with contextlib.closing(open_stores(cfg).fulltext(readonly=True)) as fulltext:
            hits = fulltext.search(query, at=at, limit=args.limit or SEARCH_LIMIT)
    except (InputError, QueryError, FullTextMissing) as e:
        return _fail(str(e))
    if args.json:
        print(json.dumps([{"url": h.url, "title": h.title, "snippet": plain_snippet(h.snippet),
                           "timestamps": h.timestamps} for h in hits], indent=1))
    else:
        for hit in hits:
            more = len(hit.timestamps) - SEARCH_DATES_SHOWN
            print(f"{hit.title or hit.url}\n  {hit.url}\n  {plain_snippet(hit.snippet)}\n  "
                  f"{_count(len(hit.timestamps), 'capture')}: "
                  + " ".join(hit.timestamps[:SEARCH_DATES_SHOWN]) + (f" and {more} more" if more > 0 else ""))
    if not hits:
        print("no page of the archive matches" + (f" at or before {at}" if at else ""), file=sys.stderr)
    return 0 if hits else 1


def _query_text(words: list[str]) -> str:
    """The query the command line gives: its arguments, one with spaces (and no quote) a phrase."""
    return " ".join(f'"{word}"' if '"' not in word and len(word.split()) > 1 else word for word in words)


def _search_limit(text: str) -> int:
    count = int(text)
    if not 1 <= count <= SEARCH_MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be 1 to {SEARCH_MAX_LIMIT}")
    return count


def _search_index(cfg: config.Config, *, rebuild: bool) -> int:
    """``archiver search index [--rebuild]``: take the catalog entries the index lacks."""
    from archiver.store.fulltextindex import build_index

    logs.setup(cfg.log.level)
    stores = open_stores(cfg)
    try:
        catalog = _catalog(cfg)
    except InputError as e:
        return _fail(str(e))
    last = time.monotonic()
    total = catalog.count()

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
        with contextlib.closing(catalog), contextlib.closing(stores.fulltext()) as fulltext:
            if rebuild:
                fulltext.clear()
            totals = build_index(catalog, stores.warcs(), fulltext, progress=progress, broken=broken)
            documents, captures = fulltext.counts()
    except _storage_errors() as e:
        return _store_failure("search index", e)
    print(f"search index: {totals.line()}; the index holds {_count(documents, 'page text')} "
          f"of {_count(captures, 'capture')}")
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def cmd_catalog(args: argparse.Namespace) -> int:
    cfg = _config(args)
    try:
        return CATALOG_VERBS[args.catalog_verb](cfg, args)
    except InputError as e:
        return _fail(str(e))


def _closest(cfg: config.Config, args: argparse.Namespace) -> Capture | None:
    """The capture of ``args.url`` nearest to ``args.at``; says so on stderr when there is none."""
    url, at = _url(args.url), _date(args.at)
    with contextlib.closing(_catalog(cfg)) as catalog:
        found = catalog.closest(url, at)
    if found is None:
        print(f"no capture of {url}", file=sys.stderr)
    return found


def catalog_closest(cfg: config.Config, args: argparse.Namespace) -> int:
    found = _closest(cfg, args)
    if found is None:
        return 1
    _print_captures([found], args.json)
    return 0


def catalog_captures(cfg: config.Config, args: argparse.Namespace) -> int:
    url = _url(args.url)
    start = _date(args.from_) if args.from_ else None
    end = _date(args.to, upper=True) if args.to else None
    with contextlib.closing(_catalog(cfg)) as catalog:
        found = catalog.captures(url, from_=start, to=end, limit=args.limit)
    _print_captures(found, args.json)
    return 0 if found else 1


def catalog_list(cfg: config.Config, args: argparse.Namespace) -> int:
    url = _url(args.url)
    with contextlib.closing(_catalog(cfg)) as catalog:
        found = list(catalog.list(url, args.match, limit=args.limit))
    _print_captures(found, args.json)
    return 0 if found else 1


def catalog_get(cfg: config.Config, args: argparse.Namespace) -> int:
    from archiver.store.warcindex import PIECE, WarcError

    found = _closest(cfg, args)
    if found is None:
        return 1
    try:
        with open_stores(cfg).warcs().open(found.filename, found.offset, found.length) as record:
            head = record.http_head if args.headers else b""
            if not args.output and sys.stdout.isatty():
                data = head + record.read(record.size)
                if not _printable(data):
                    return _fail("the archived payload holds control characters or is not UTF-8 "
                                 "text: it is not written to a terminal; use -o FILE or a pipe")
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
                return 0
            # A file or a pipe: the payload a piece at a time, never held whole.
            with open(args.output, "wb") if args.output else contextlib.nullcontext(sys.stdout.buffer) as out:
                out.write(head)
                while piece := record.read(PIECE):
                    out.write(piece)
                out.flush()
    except WarcError as e:
        return _fail(str(e))
    if args.output:
        print(f"{found.timestamp} {found.url}: {len(head) + record.size} bytes written to {args.output}",
              file=sys.stderr)
    return 0


def _printable(data: bytes) -> bool:
    """True for UTF-8 text without controls (tab and line ends aside) that a terminal would act on."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _TERMINAL_CONTROL.search(text) is None


def catalog_export(cfg: config.Config, args: argparse.Namespace) -> int:
    from archiver.store.catalog_maintenance import export_cdxj

    with contextlib.closing(_catalog(cfg)) as catalog:
        if args.output:
            with open(args.output, "w", encoding="utf-8") as out:
                lines = export_cdxj(catalog, out)
            print(f"{lines} CDXJ lines written to {args.output}", file=sys.stderr)
        else:
            export_cdxj(catalog, sys.stdout)
    return 0


def catalog_reindex(cfg: config.Config, args: argparse.Namespace) -> int:
    from archiver.store.catalog_maintenance import Progress
    from archiver.store.warcindex import WarcError

    stores = open_stores(cfg)
    warcs = stores.warcs()
    try:
        names = warcs.names(args.warcs)
        if not names:
            raise InputError(f"no WARC files match {args.warcs or warcs.location('*.warc.gz')}")
        progress = Progress(sum(warcs.size(name) for name in names), "reindex")
        entries = stores.reindex_catalog(warcs, names, progress.update)
    except WarcError as e:
        raise InputError(f"{e} (catalog left as it was)") from None
    progress.update(progress.total, entries, force=True)
    print(f"reindexed {len(names)} WARC file(s): {entries} entries in the catalog")
    return 0


def catalog_verify(cfg: config.Config, args: argparse.Namespace) -> int:
    from archiver.store.warcindex import WarcError

    stores = open_stores(cfg)
    warcs = stores.warcs()
    try:
        names = warcs.names(args.warcs, include_open=True)
    except WarcError as e:
        raise InputError(str(e)) from None
    with contextlib.closing(_catalog(cfg)) as catalog:
        result = stores.verify_catalog(catalog, warcs, names)
    for line in result.bad_entries:
        print(f"bad entry: {line}")
    for line in result.unindexed:
        print(f"not indexed: {line}")
    for line in result.unreadable:
        print(f"unreadable: {line}")
    verdict = "OK" if result.ok else "DIFFERENCES FOUND"
    print(f"{verdict}: {result.entries} entries, {result.records} response/revisit records in "
          f"{len(names)} file(s); {len(result.bad_entries)} bad entries, "
          f"{len(result.unindexed)} records not indexed, {len(result.unreadable)} unreadable files")
    return 0 if result.ok else 1


CATALOG_VERBS = {
    "closest": catalog_closest, "captures": catalog_captures, "list": catalog_list,
    "get": catalog_get, "export-cdxj": catalog_export, "reindex": catalog_reindex,
    "verify": catalog_verify,
}


def _when(text: str | None) -> float:
    if text is None:
        return time.time()
    return to_datetime(_date(text)).timestamp()


def _iso(t: float | None) -> str:
    if t is None:
        return "-"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _row_json(row: DnsRow) -> dict[str, object]:
    return {"id": row.id, "value": row.value, "type": row.type, "entered": _iso(row.entered),
            "superseded": _iso(row.superseded) if row.superseded else None, "source": row.source}


def _print_rows(rows: list[DnsRow]) -> None:
    for r in rows:
        print(f"{r.id:>6} {r.type:<9} {r.value:<40} {_iso(r.entered)}  {_iso(r.superseded)}  "
              f"{r.source}")


def cmd_dns(args: argparse.Namespace) -> int:
    cfg = _config(args)
    logs.setup(cfg.log.level)
    try:
        extra = _host_names(Path(args.hosts)) if getattr(args, "hosts", None) else []
    except OSError as e:
        return _fail(f"{args.hosts}: cannot read host names: {e.strerror}")
    if args.dns_verb in (None, "refresh"):
        cfg.root.mkdir(parents=True, exist_ok=True)
        return _dns_service(cfg, args, extra)
    try:
        when = _when(getattr(args, "at", None))
    except InputError as e:
        return _fail(str(e))
    try:
        history = open_stores(cfg).dns_history(readonly=True)
    except FileNotFoundError as e:
        return _fail(f"{e} (run `archiver dns refresh --once` first)")
    with contextlib.closing(history):
        if args.dns_verb == "history":
            rows = history.history(args.host)
            if args.json:
                print(json.dumps([_row_json(r) for r in rows], indent=1))
            else:
                _print_rows(rows)
            return 0 if rows else 1
        found = history.at(args.host, when)
        state = history.state(args.host)
    if args.json:
        print(json.dumps({
            "host": args.host, "at": _iso(when),
            "canonical": found.canonical if found else None,
            "addresses": list(found.addresses) if found else [],
            "aliases": list(found.aliases) if found else [],
            "rows": [_row_json(r) for r in found.rows] if found else [],
            "last_outcome": state.outcome if state else None}, indent=1))
    elif found is None:
        outcome = f" (last answer: {state.outcome})" if state else ""
        print(f"{args.host}: no record as of {_iso(when)}{outcome}")
    else:
        print(f"{args.host} as of {_iso(when)}: canonical {found.canonical}, "
              f"address {', '.join(found.addresses) or '-'}")
        _print_rows(list(found.rows))
    return 0 if found else 1


def _host_names(path: Path) -> list[str]:
    """The host names of ``--hosts``, one a line (OSError if the file cannot be read)."""
    from archiver.dns.service import read_names

    return read_names(path)


def _dns_service(cfg: config.Config, args: argparse.Namespace, extra: list[str]) -> int:
    """``dns`` and ``dns refresh``: run the DNS service, or one refresh pass with ``--once``."""
    import trio

    from archiver.dns.service import refresh_pass, run_service

    if args.dns_verb is None or not args.once:
        trio.run(run_service, cfg, extra)
        return 0

    async def once() -> RefreshStats:
        history = open_stores(cfg).dns_history()
        try:
            return await refresh_pass(cfg, history, extra, force=args.force)
        finally:
            history.close()

    stats = trio.run(once)
    failed = ", ".join(f"{k} {v}" for k, v in sorted(stats.failed.items())) or "none"
    print(f"dns refresh: {stats.asked} asked, {stats.ok} ok, {stats.changed} changed, "
          f"failed: {failed} ({stats.elapsed:.2f}s)")
    return 0


def cmd_store(args: argparse.Namespace) -> int:
    """``store init``: create or upgrade the PostgreSQL schema of ``store.url``."""
    from archiver.store.postgres.schema import CURRENT_VERSION, StoreError, init_schema

    cfg = _config(args, stores_built=False)
    url = config.database_url(cfg.store.url)
    if url is None:
        print(f'store init: store.url is "sqlite": the embedded store has nothing to initialise '
              f"(its files under {cfg.root} are made on first use)")
        return 0
    try:
        applied = init_schema(url)
    except StoreError as e:
        print(f"archiver: store init: {e}", file=sys.stderr)
        return 1
    if not applied:
        print(f"store init: {url} is at schema version {CURRENT_VERSION} already; nothing to do")
    for migration in applied:
        print(f"store init: {url}: applied version {migration.version}: {migration.description}")
    return 0


def cmd_store_migrate(args: argparse.Namespace) -> int:
    """``store migrate``: move the embedded archive of ``--from`` into the stores of ``--to``."""
    from archiver.migrate import Migration, MigrationFailed, MigrationRefused
    from archiver.store.models import CatalogError

    configs = []
    for path in (args.old, args.new):
        try:
            configs.append(config.load(path))
        except config.ConfigError as e:
            return _fail(str(e))
    try:
        Migration(*configs, out=sys.stdout, err=sys.stderr).run()
    except MigrationRefused as e:
        return _fail(f"store migrate: {e}")
    except (MigrationFailed, CatalogError, OSError) as e:
        print(f"archiver: store migrate: {e}", file=sys.stderr)
        return 1
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="archiver", description="An archival web crawler.")
    p.add_argument("--version", action="version", version=f"archiver {__version__}")
    verbs = p.add_subparsers(dest="verb", required=True)

    crawl = verbs.add_parser("crawl", help="run a crawler process")
    crawl.add_argument("--config", required=True, help="the TOML config file")
    crawl.add_argument("--seeds", help="file of seed URLs or host names, one a line")
    crawl.add_argument("--process", type=int, default=0, help="process number (0-based)")
    crawl.add_argument("--until-idle", action="store_true",
                       help="exit once every queued site is finished or deferred")
    crawl.add_argument("--recrawl", action="store_true",
                       help="visit finished sites again (the seed sites, or every site of this "
                            "process without --seeds); unchanged pages become revisit records")
    crawl.set_defaults(func=cmd_crawl)

    seeds_ = verbs.add_parser(
        "seeds", help="queue seed sites (each in its owning process's queue) without crawling; "
                      "safe while crawlers run")
    seeds_.add_argument("file", help="file of seed URLs or host names, one a line")
    seeds_.add_argument("--config", required=True, help="the TOML config file")
    seeds_.add_argument("--recrawl", action="store_true", help="queue finished seed sites again")
    seeds_.set_defaults(func=cmd_seeds)

    links = verbs.add_parser("links", help="the external-link batch (holds the global bitmap)")
    links_verbs = links.add_subparsers(dest="links_verb", required=True)
    links_run = links_verbs.add_parser(
        "run", help="turn closed spool files into new URLs and sites in the crawl queues")
    links_run.add_argument("--config", required=True, help="the TOML config file")
    links_run.add_argument("--once", action="store_true",
                           help="process the spool files there now, then exit")
    links_run.set_defaults(func=cmd_links)
    links_reshard = links_verbs.add_parser(
        "reshard", help="rebuild the global bitmap's slices for another slice count from the "
                        "spool files done (no links run meanwhile)")
    links_reshard.add_argument("--config", required=True, help="the TOML config file")
    links_reshard.add_argument("--partitions", required=True, type=_partitions,
                               help="the new slice count (set links.partitions to it too)")
    links_reshard.add_argument(
        "--allow-missing", action="store_true",
        help="rebuild even if spool files the ledger lists were pruned from outlinks/done: their "
             "URLs may be queued again (each site's bitmap drops them) and their site pairs may "
             "count twice as in-links")
    links_reshard.set_defaults(func=cmd_links_reshard)

    replay = verbs.add_parser("replay", help="serve the archive as a website, by date")
    replay.add_argument("--config", required=True, help="the TOML config file")
    replay.add_argument("--listen", help="ADDRESS:PORT for the replay's own pages "
                        "(default: replay.listen in the config, 127.0.0.1:8080)")
    replay.set_defaults(func=cmd_replay)

    status = verbs.add_parser("status", help="print the crawler processes' progress")
    status.add_argument("--config", required=True)
    status.add_argument("--json", action="store_true")
    status.add_argument("--sites", action="store_true",
                        help="list every site of the site queues: state, next visit, change rate")
    status.set_defaults(func=cmd_status)

    robots_ = verbs.add_parser("robots", help="the robots.txt that governed a host at a date, "
                               "and every change of it, from the archive's captures")
    robots_.add_argument("host", help="a host name or an origin (http://host:port)")
    robots_.add_argument("--at", help="ISO 8601 or an archive timestamp (default: now)")
    robots_.add_argument("--json", action="store_true")
    robots_.add_argument("--config", required=True)
    robots_.set_defaults(func=cmd_robots)

    why_ = verbs.add_parser("why", help="was a URL captured (when, which record), and if not, "
                            "why not: robots.txt, a guard, its site failing, not reached yet...")
    why_.add_argument("url")
    why_.add_argument("--at", help="ISO 8601 or an archive timestamp (default: now)")
    why_.add_argument("--json", action="store_true")
    why_.add_argument("--config", required=True)
    why_.set_defaults(func=cmd_why)

    scope_ = verbs.add_parser("scope", help="the crawl's scope rules ([scope] in the config)")
    scope_verbs = scope_.add_subparsers(dest="scope_verb", required=True)
    scope_test = scope_verbs.add_parser("test", help="is a URL in scope, and which rule decided: "
                                        "exit status 0 in, 1 out, 2 error")
    scope_test.add_argument("url")
    scope_test.add_argument("--json", action="store_true")
    scope_test.add_argument("--config", required=True)
    scope_test.set_defaults(func=cmd_scope_test)

    focus = verbs.add_parser("focus", help="focused crawling: the relevance model")
    focus_verbs = focus.add_subparsers(dest="focus_verb", required=True)
    focus_train = focus_verbs.add_parser(
        "train", help="fit a relevance model to example documents: EXAMPLES_DIR/relevant/ and "
        "EXAMPLES_DIR/other/ holding .html, .htm or .txt files")
    focus_train.add_argument("examples", metavar="EXAMPLES_DIR")
    focus_train.add_argument("--out", metavar="FILE",
                             help="where the model goes (default: the file crawl.focus names)")
    focus_train.add_argument("--config", required=True)
    focus_train.set_defaults(func=cmd_focus_train)

    search_ = verbs.add_parser(
        "search", help="full-text search of the archived HTML pages (`search index` builds the index)")
    search_.add_argument("words", nargs="+", metavar="QUERY",
                         help='words and "phrases", all required (an argument with spaces is a '
                              "phrase); `index` alone builds the index from the catalog (to search "
                              "for the word, quote it: '\"index\"')")
    search_.add_argument("--at", help="only captures at or before this date: ISO 8601 or 4 to 14 digits")
    search_.add_argument("--json", action="store_true",
                         help="a JSON array of results: url, title, snippet, timestamps")
    search_.add_argument("--limit", type=_search_limit, help=f"results (default {SEARCH_LIMIT})")
    search_.add_argument("--rebuild", action="store_true",
                         help="with `index`: forget the index and build it again")
    search_.add_argument("--config", required=True)
    search_.set_defaults(func=cmd_search)

    import_ = verbs.add_parser("import", help="index WARC (or ARC) files other tools wrote into "
                               "the catalog, copied into the WARC store")
    import_.add_argument("files", nargs="+", metavar="FILE")
    where = import_.add_mutually_exclusive_group()
    where.add_argument("--copy", dest="in_place", action="store_false",
                       help="copy each file into the WARC store (the default)")
    where.add_argument("--in-place", dest="in_place", action="store_true",
                       help="index files that already lie in the WARC folder, where they are")
    import_.add_argument("--config", required=True)
    import_.set_defaults(func=cmd_import, in_place=False)

    export_ = verbs.add_parser("export", help="write a slice of the archive (a URL, a prefix or a "
                               "host, between two dates) as a WARC file, or a WACZ package")
    which = export_.add_mutually_exclusive_group(required=True)
    which.add_argument("--url", help="the captures of this URL")
    which.add_argument("--prefix", help="the captures of every URL under this one")
    which.add_argument("--host", help="the captures of every URL of this host, any scheme and port "
                       "(HOST:PORT: that port only)")
    export_.add_argument("--from", dest="from_", help="ISO 8601 or an archive timestamp")
    export_.add_argument("--to", help="ISO 8601 or an archive timestamp")
    export_.add_argument("-o", "--output", required=True,
                         help="the file to write: a WACZ package if it ends in .wacz, else a WARC")
    export_.add_argument("--config", required=True)
    export_.set_defaults(func=cmd_export)

    catalog = verbs.add_parser("catalog", help="query and maintain the card catalog")
    catalog_verbs = catalog.add_subparsers(dest="catalog_verb", required=True)
    date_help = "ISO 8601 (2026-11-22T03:15:00Z) or an archive timestamp of 4 to 14 digits"

    def verb(name: str, help_: str, *, url: bool = True, json_: bool = True) -> argparse.ArgumentParser:
        sub = catalog_verbs.add_parser(name, help=help_)
        sub.add_argument("--config", required=True)
        if url:
            sub.add_argument("url")
        if json_:
            sub.add_argument("--json", action="store_true", help="one CDXJ-style JSON object a line")
        sub.set_defaults(func=cmd_catalog)
        return sub

    closest = verb("closest", "the capture nearest to a date (ties go to the earlier)")
    closest.add_argument("--at", required=True, help=date_help)
    captures = verb("captures", "all captures of a URL, in time order")
    captures.add_argument("--from", dest="from_", help=date_help)
    captures.add_argument("--to", help=date_help)
    captures.add_argument("--limit", type=int)
    listing = verb("list", "captures under a URL prefix, a host, or a domain")
    listing.add_argument("--match", choices=("exact", "prefix", "host", "domain"), default="prefix")
    listing.add_argument("--limit", type=int)
    get = verb("get", "the archived payload of the capture nearest to a date", json_=False)
    get.add_argument("--at", required=True, help=date_help)
    get.add_argument("-o", "--output", help="write to this file instead of standard output")
    get.add_argument("--headers", action="store_true", help="the archived HTTP head first")
    export = verb("export-cdxj", "one sorted CDXJ index of all shards", url=False, json_=False)
    export.add_argument("-o", "--output")
    reindex_ = verb("reindex", "rebuild the catalog from the WARC files alone", url=False,
                    json_=False)
    warcs_help = ("glob of WARC files (default: every closed bundle): a file-system glob, or with "
                  "an object store (warc.store = \"s3://...\") a glob on the bundles' names")
    reindex_.add_argument("--warcs", help=warcs_help)
    verify_ = verb("verify", "check the catalog against the WARC files", url=False, json_=False)
    verify_.add_argument("--warcs", help=warcs_help.replace("every closed bundle", "every bundle"))

    store = verbs.add_parser("store", help="the shared stores (store.url)")
    store_verbs = store.add_subparsers(dest="store_verb", required=True)
    store_init = store_verbs.add_parser(
        "init", help="create or upgrade the PostgreSQL schema (idempotent; nothing to do for sqlite)")
    store_init.add_argument("--config", required=True, help="the TOML config file")
    store_init.set_defaults(func=cmd_store)
    store_migrate = store_verbs.add_parser(
        "migrate", help="move an embedded archive into PostgreSQL and object storage "
                        "(resumable, verified)")
    store_migrate.add_argument("--from", dest="old", required=True, metavar="OLD.toml",
                               help="the config of the embedded archive (store.url = \"sqlite\")")
    store_migrate.add_argument("--to", dest="new", required=True, metavar="NEW.toml",
                               help="the config naming the PostgreSQL store.url and warc.store")
    store_migrate.set_defaults(func=cmd_store_migrate)

    dns = verbs.add_parser("dns", help="the DNS history service and its queries "
                           "(without a sub-verb: run the service)")
    dns.add_argument("--config", help="the TOML config file")
    dns.add_argument("--hosts", help="also keep these names fresh (one a line)")
    dns.set_defaults(func=cmd_dns, dns_verb=None)
    dns_verbs = dns.add_subparsers(dest="dns_verb")

    def dns_verb(name: str, help_: str) -> argparse.ArgumentParser:
        sub = dns_verbs.add_parser(name, help=help_)
        sub.add_argument("--config", default=argparse.SUPPRESS, help="the TOML config file")
        return sub

    refresh_ = dns_verb("refresh", "resolve the queued sites' hosts that are due")
    refresh_.add_argument("--once", action="store_true", help="one pass, then exit")
    refresh_.add_argument("--hosts", default=argparse.SUPPRESS,
                          help="also these names (one a line)")
    refresh_.add_argument("--force", action="store_true", help="every name, due or not")
    lookup = dns_verb("lookup", "a host's addresses, canonical name and aliases as of a date")
    lookup.add_argument("host")
    lookup.add_argument("--at", help="ISO 8601 or 4 to 14 digits (default: now)")
    lookup.add_argument("--json", action="store_true")
    history_ = dns_verb("history", "every row ever recorded for a host")
    history_.add_argument("host")
    history_.add_argument("--json", action="store_true")
    return p


def _store_errors() -> tuple[type[Exception], ...]:
    """The errors of a store the config names that cannot be used: StoreUnavailable, and the
    PostgreSQL stores' StoreError if a verb has loaded them (nothing raises it before), so that
    ``main`` catches it without importing psycopg."""
    pgschema = sys.modules.get("archiver.store.postgres.schema")
    return (StoreUnavailable,) if pgschema is None else (StoreUnavailable, pgschema.StoreError)


def main(argv: list[str] | None = None) -> int:
    # What archiver creates is readable by its own user and group only (directories 0750, files
    # 0640): an archive holds whatever the crawled web served, cookies and all.
    os.umask(0o027)
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except _store_errors() as e:
        # a store the config names cannot be used
        return _fail(str(e))
    except sqlite3.DatabaseError as e:  # an archive's SQLite file that cannot be read (corrupt)
        return _store_failure(args.verb, e)
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it


if __name__ == "__main__":
    sys.exit(main())
