"""``archiver seeds FILE``: queue seed sites without crawling."""

from __future__ import annotations

import argparse
from pathlib import Path

from archiver import logs
from archiver.commands.common import Verbs, add_config, fail, load_config, verb

EXITS = {0: "the seeds were queued (any refused are named on stderr)"}


def add(verbs: Verbs) -> None:
    seeds = verb(verbs, "seeds", "queue seed sites (each in its owning process's queue) without "
                 "crawling; safe while crawlers run", exits=EXITS, run=run)
    seeds.add_argument("file", metavar="FILE", help="file of seed URLs or host names, one a line")
    add_config(seeds)
    seeds.add_argument("--recrawl", action="store_true", help="queue finished seed sites again")


def run(args: argparse.Namespace) -> int:
    from archiver.crawl.crawler import SeedError, enqueue_seeds, read_seeds

    cfg = load_config(args)
    logs.setup(cfg.log.level)
    try:
        seeds = read_seeds(Path(args.file))
        done = enqueue_seeds(cfg, 0, seeds, recrawl=args.recrawl)
    except SeedError as e:
        return fail(str(e))
    refused = f", {done.refused} refused (see the warnings)" if done.refused else ""
    print(f"seeds: {done.queued} queued{refused}, {done.new_sites} sites new to the queues")
    return 0
