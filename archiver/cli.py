"""The ``archiver`` command and its verbs.

Exit codes: 0 success, 1 a failure while running, 2 bad usage or bad input (config, seeds).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import trio

from archiver import __version__, config, logs
from archiver.crawler import Crawler, SeedError, enqueue_seeds, read_seeds
from archiver.status import format_status, read_statuses


def _config(args: argparse.Namespace) -> config.Config:
    try:
        return config.load(args.config)
    except config.ConfigError as e:
        raise SystemExit(_fail(str(e))) from None


def _fail(message: str) -> int:
    print(f"archiver: {message}", file=sys.stderr)
    return 2


def cmd_crawl(args: argparse.Namespace) -> int:
    cfg = _config(args)
    logs.setup(cfg.log.level)
    if not 0 <= args.process < cfg.crawl.processes:
        return _fail(f"--process {args.process} is outside 0..{cfg.crawl.processes - 1} "
                     f"(crawl.processes = {cfg.crawl.processes} in {cfg.path})")
    if args.seeds:
        try:
            seeds = read_seeds(Path(args.seeds))
        except SeedError as e:
            return _fail(str(e))
        enqueue_seeds(cfg, args.process, seeds)
    crawler = Crawler(cfg, process=args.process, until_idle=args.until_idle)
    trio.run(crawler.run)
    warcs = cfg.root / "warcs"
    print(f"crawl stopped: {crawler.stats.pages} pages, {crawler.stats.bytes} bytes; "
          f"WARCs in {warcs}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cfg = _config(args)
    statuses = read_statuses(cfg.root)
    if args.json:
        print(json.dumps(statuses, indent=1, sort_keys=True))
    elif not statuses:
        print(f"no crawler status under {cfg.root / 'state'}")
    else:
        print("\n".join(format_status(s) for s in statuses))
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
    crawl.set_defaults(func=cmd_crawl)

    status = verbs.add_parser("status", help="print the crawler processes' progress")
    status.add_argument("--config", required=True)
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
