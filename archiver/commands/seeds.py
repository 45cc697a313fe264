"""``archiver seeds FILE``: queue seed sites without crawling."""

from __future__ import annotations

import argparse
from pathlib import Path

from archiver import logs
from archiver.commands.common import Verbs, add_config, fail, load_config, verb

EXITS = {0: "the seeds were queued; lines that are no URL or host name, and seeds out of scope, "
            "are refused, counted and each named on stderr",
         1: "the archive could not be written, named on stderr",
         2: "bad usage or bad input: a config, or a seeds file with no usable line"}


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
        done = enqueue_seeds(cfg, 0, seeds.urls, recrawl=args.recrawl, refused_lines=seeds.refused)
    except SeedError as e:
        return fail(str(e))
    said = f", {done.refused} refused (see the warnings)" if done.refused else ""
    print(f"seeds: {done.queued} queued{said}, {done.new_sites} sites new to the queues")
    return 0
