"""Benchmark the embedded inboxes as the links batch uses them: one checkpoint's appends to many
new sites (``EmbeddedCrawlQueues.append(..., sync=False)`` per site, then one ``sync``), timed in
wall, user and kernel (system) seconds; then the same again to the same sites; then the merge of
a sample of them by opening their crawl queues.

    python -m tools.bench_inboxes [--sites 50000] [--urls-per-site 20] [--merge 1000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from archiver.config import CrawlConfig
from archiver.queues.embedded.crawlqueue import EmbeddedCrawlQueues


@contextmanager
def timed(what: str, count: int, unit: str) -> Iterator[None]:
    """Print the wall, user and system seconds of the block, and per ``unit``."""
    before, wall = os.times(), time.monotonic()
    yield
    after, wall = os.times(), time.monotonic() - wall
    user, system = after.user - before.user, after.system - before.system
    print(f"{what}: wall {wall:.2f} s, user {user:.2f} s, system {system:.2f} s "
          f"({wall / count * 1e6:.1f} µs wall, {system / count * 1e6:.1f} µs system per {unit})")


def checkpoint(queues: EmbeddedCrawlQueues, origins: list[str], urls: Callable[[str], list[tuple[str, int]]]
               ) -> None:
    for origin in origins:
        queues.append(origin, urls(origin), sync=False)
    queues.sync()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sites", type=int, default=50_000)
    parser.add_argument("--urls-per-site", type=int, default=20)
    parser.add_argument("--merge", type=int, default=1000, help="sites whose queues are opened")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="bench-inboxes-"))
    root = work / "archive"
    shutil.rmtree(root, ignore_errors=True)
    crawl = CrawlConfig()
    origins = [f"http://www.site{n}.example" for n in range(args.sites)]
    total = args.sites * args.urls_per_site

    def urls(round_: int) -> Callable[[str], list[tuple[str, int]]]:
        return lambda origin: [(f"{origin}/r{round_}/page{k}.html", 0) for k in range(args.urls_per_site)]

    with closing(EmbeddedCrawlQueues(root, bloom_bits=crawl.site_bitmap_bits,
                                     max_fp=crawl.site_bitmap_max_fp)) as queues:
        with timed(f"{total:,} URLs appended to {args.sites:,} new sites", args.sites, "site"):
            checkpoint(queues, origins, urls(1))
        with timed(f"{total:,} more URLs appended to the same sites", args.sites, "site"):
            checkpoint(queues, origins, urls(2))
        sample = origins[:: max(1, args.sites // args.merge)][: args.merge]
        with timed(f"{len(sample):,} crawl queues opened, their inboxes merged", len(sample), "site"):
            for origin in sample:
                queues.open(origin).close()
    if args.dir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
