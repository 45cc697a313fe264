"""``archiver crawl run``: run a crawler process (``archiver crawl`` alone: the old spelling)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archiver import config, logs
from archiver.commands.common import (
    Verbs,
    add_config,
    fail,
    group,
    load_config,
    storage_errors,
    store_failure,
    verb,
)
from archiver.stores import ProcessBusy

EXITS = {0: "the crawler stopped cleanly (a signal, or --until-idle with nothing left)",
         1: "the crawler stopped on a failure (a store, a full disk), named on stderr"}


def add(verbs: Verbs) -> None:
    crawl = group(verbs, "crawl", "the crawler processes (`crawl run` runs one)", "crawl_verb")
    parser = verb(crawl, "run", "run a crawler process", exits=EXITS, run=run)
    add_config(parser)
    parser.add_argument("--seeds", metavar="FILE", help="file of seed URLs or host names, one a line")
    parser.add_argument("--process", type=int, default=0, metavar="N", help="process number (0-based)")
    parser.add_argument("--until-idle", action="store_true",
                        help="exit once every queued site is finished or deferred")
    parser.add_argument("--recrawl", action="store_true",
                        help="visit finished sites again (the seed sites, or every site of this "
                             "process without --seeds); unchanged pages become revisit records")


def run(args: argparse.Namespace) -> int:
    import trio

    from archiver.crawl.crawler import Crawler, SeedError, enqueue_seeds, read_seeds
    from archiver.crawl.openfiles import FileLimitError
    from archiver.crawl.pluginhost import PluginError

    cfg = load_config(args)
    logs.setup(cfg.log.level)
    shared = config.database_url(cfg.store.url) is not None  # any process may take any site there
    if args.process < 0 or (not shared and args.process >= cfg.crawl.processes):
        return fail(f"--process {args.process} is outside 0..{cfg.crawl.processes - 1} "
                    f"(crawl.processes = {cfg.crawl.processes} in {cfg.path})")
    if args.seeds:
        try:
            seeds = read_seeds(Path(args.seeds))
            enqueue_seeds(cfg, args.process, seeds.urls, recrawl=args.recrawl,
                          refused_lines=seeds.refused)
        except SeedError as e:
            return fail(str(e))
    try:
        crawler = Crawler(cfg, process=args.process, until_idle=args.until_idle)
    except (ProcessBusy, PluginError, FileLimitError) as e:
        return fail(str(e))
    except storage_errors() as e:
        return store_failure("crawl", e)
    if args.recrawl and not args.seeds:
        print(f"recrawl: {crawler.queue.recrawl()} finished sites queued again")
    trio.run(crawler.run)
    print(f"crawl stopped: {crawler.stats.pages} pages, {crawler.stats.bytes} bytes; "
          f"WARCs in {crawler.stores.warc_directory()}")
    if crawler.exit_status:
        print(f"archiver: crawl stopped because {crawler.stopped_because}", file=sys.stderr)
    return crawler.exit_status
